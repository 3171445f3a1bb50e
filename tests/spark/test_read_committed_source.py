"""The Spark source's kafka.isolation.level, as Spark's Kafka source names it: batch reads (split at segment
boundaries, across which transactions run) and streaming reads, whose latest offsets are the last stable
offset for read_committed, so a later micro-batch picks the transaction up once it commits."""

from __future__ import annotations

import json

import pytest
import txn_support as tx

import compactlog


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    d = tmp_path_factory.mktemp("spark-iso") / "data"
    return d, tx.build(d)


def read(spark, path, **options):
    r = spark.read.format("compactlog").option("path", str(path)).option("subscribe", tx.TOPIC)
    for k, v in options.items():
        r = r.option(k, v)
    return [bytes(row.value) for row in r.load().orderBy("offset").select("value").collect()]


def test_batch_reads_by_isolation_level(spark, built):
    d, _ = built
    assert read(spark, d) == tx.ALL  # read_uncommitted by default, as Spark's Kafka source
    # one Spark partition per segment: an aborted transaction's batches and its marker in different tasks
    assert read(spark, d, **{"kafka.isolation.level": "read_committed", "maxPartitionBytes": "1"}) \
        == tx.COMMITTED_BEFORE
    with pytest.raises(Exception, match='option "kafka.isolation.level" must be one of read_uncommitted, '
                                        "read_committed, got 'committed'"):
        read(spark, d, **{"kafka.isolation.level": "committed"})


def test_streaming_read_committed_ends_at_the_lso_and_reads_the_transaction_once_committed(spark, built,
                                                                                           tmp_path_factory):
    d, b = built
    checkpoint = str(tmp_path_factory.mktemp("ckpt"))
    seen: list[bytes] = []

    def run():
        q = (spark.readStream.format("compactlog").option("path", str(d)).option("subscribe", tx.TOPIC)
             .option("startingOffsets", "earliest").option("kafka.isolation.level", "read_committed").load()
             .writeStream.foreachBatch(lambda df, i: seen.extend(
                 bytes(r.value) for r in df.orderBy("offset").select("value").collect()))
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        q.awaitTermination(120)
        return q.lastProgress

    progress = run()
    assert seen == tx.COMMITTED_BEFORE
    assert json.loads(progress["sources"][0]["endOffset"]) == {tx.TOPIC: {"0": b.lso}}
    with compactlog.open(d) as cl:
        tx.commit_open(cl.partition(tx.TOPIC, 0))
    run()
    assert seen == tx.COMMITTED_AFTER  # each record once: the second query starts at the LSO the first ended at
