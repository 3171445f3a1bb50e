"""A stateful quixstreams application: counts the records per key of an input topic.

Run by the tests with the python of quixstreams' own venv (tests/server/apps/apps_support.py). Each
input record is JSON ``{"seq": N}`` under a string key; for each, the app adds one to the key's count in
its state store (RocksDB, backed by a changelog topic the broker keeps compacted) and writes
``{"key": K, "seq": N, "count": C}`` to the output topic. A small delay per record keeps a run long
enough for a test to kill it midway; a checkpoint (state flushed to the changelog, offsets committed,
and with exactly-once one transaction) every few records gives the changelog many versions of each key,
for the broker's cleaner to compact.

Usage: quix_counter.py BROKER INPUT OUTPUT GROUP STATE_DIR GUARANTEE DELAY_SECONDS COMMIT_EVERY
"""

import logging
import sys
import time

from quixstreams import Application


def main() -> None:
    broker, source, sink, group, state_dir, guarantee, delay, every = sys.argv[1:9]
    pause = float(delay)
    producer_settings = {"linger.ms": 5}
    if guarantee == "exactly-once":
        # quixstreams gives each run a new random transactional id unless told one: then the transaction a
        # killed run left open would stay open until it timed out, and the next run would wait for it
        # (its offsets unstable). With the same id each run fences the last one at its start, and the
        # coordinator aborts what that one left open.
        producer_settings["transactional.id"] = f"{group}-1"
    app = Application(
        broker_address=broker,
        consumer_group=group,
        auto_offset_reset="earliest",
        state_dir=state_dir,
        processing_guarantee=guarantee,
        commit_interval=0.5,
        commit_every=int(every),
        loglevel=logging.INFO,
        request_timeout=10,
        producer_extra_config=producer_settings,
        # a static member (KIP-345): the next run takes over the killed run's place in the group at once,
        # instead of waiting for its session to end; the session outlasts a restart of the broker
        consumer_extra_config={"group.instance.id": f"{group}-1", "session.timeout.ms": 30000,
                               "heartbeat.interval.ms": 1000},
    )
    inputs = app.topic(source, key_deserializer="str", value_deserializer="json")
    outputs = app.topic(sink, key_serializer="str", value_serializer="json")

    def count(value: dict, key: str, timestamp: int, headers, state) -> dict:
        if pause:
            time.sleep(pause)
        n = state.get("count", 0) + 1
        state.set("count", n)
        return {"key": key, "seq": value["seq"], "count": n}

    sdf = app.dataframe(inputs)
    sdf = sdf.apply(count, stateful=True, metadata=True)
    sdf.to_topic(outputs)
    app.run()


if __name__ == "__main__":
    main()
