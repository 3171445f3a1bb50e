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
        producer_extra_config={"linger.ms": 5},
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
