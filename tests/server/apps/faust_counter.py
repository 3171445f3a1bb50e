"""A faust (faust-streaming) application with a table: counts the records per key of an input topic.

Run by the tests with the python of faust's own venv (tests/server/apps/apps_support.py). Each input
record is JSON ``{"seq": N}`` under a key; for each, the agent adds one to the key's count in a table
(kept locally in RocksDB, backed by the ``<app id>-counts-changelog`` topic the broker keeps compacted)
and sends ``{"key": K, "seq": N, "count": C}`` to the output topic under the same key. With
``exactly_once`` faust writes the output, the changelog and the consumed offsets of each input partition
in one transaction of that partition's transactional producer. A small delay per record keeps a run
long enough for a test to kill it midway.

Usage: faust_counter.py BROKER INPUT OUTPUT APP_ID STATE_DIR GUARANTEE DELAY_SECONDS COMMIT_EVERY
"""

import asyncio
import sys

import faust


def main() -> None:
    broker, source_name, sink_name, app_id, state_dir, guarantee, delay, every = sys.argv[1:9]
    pause = float(delay)
    app = faust.App(
        app_id,
        broker=f"kafka://{broker}",
        store="rocksdb://",
        datadir=state_dir,
        processing_guarantee=guarantee,
        topic_partitions=2,
        topic_replication_factor=1,
        web_enabled=False,
        consumer_auto_offset_reset="earliest",
        broker_commit_every=int(every),
        broker_commit_interval=0.5,
        # small batches: the test server's segments are small, and a batch larger than one is refused
        producer_max_batch_size=1024,
        # a killed run's group member is dropped when its session ends; until then a new run's join waits
        broker_session_timeout=6.0,
        broker_heartbeat_interval=0.5,
    )
    source = app.topic(source_name, key_serializer="raw", value_serializer="json")
    sink = app.topic(sink_name, key_serializer="raw", value_serializer="json")
    counts = app.Table("counts", default=int, partitions=2, key_type=bytes, value_type=int)

    @app.agent(source)
    async def count(stream):
        async for key, value in stream.items():
            if pause:
                await asyncio.sleep(pause)
            n = counts[key] + 1
            await sink.send(key=key, value={"key": key.decode(), "seq": value["seq"], "count": n})
            # The table is written last, with no await after it: faust acknowledges an event when the
            # loop takes the next one, and a commit that ran between this write and that acknowledgement
            # would put the write in a transaction without the event's offset (a restart would then
            # count the event twice).
            counts[key] = n

    sys.argv = [sys.argv[0], "worker", "--loglevel", "info", "--without-web"]
    app.main()


if __name__ == "__main__":
    main()
