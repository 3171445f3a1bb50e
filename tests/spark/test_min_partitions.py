"""minPartitions (Spark's Kafka source option): ranges cut into pieces of equal offset counts, inside
segments and inside batches, and every record read once, in every kind of partition."""

from __future__ import annotations

import random

import pytest

import compactlog
from compactlog.clock import MockTime
from compactlog.records.batch import BatchInfo, build_batch
from compactlog.records.codecs import Codec
from compactlog.spark.source import min_partitions

TS = 1_700_000_000_000


def test_pieces_as_sparks_kafka_source_cuts_them():
    # each range gets round(share x wanted) pieces, at least one, each the offsets left / the pieces left
    assert min_partitions([("t", 0, 0, 10)], 3) == [("t", 0, 0, 3), ("t", 0, 3, 6), ("t", 0, 6, 10)]
    assert min_partitions([("t", 0, 0, 10), ("t", 1, 5, 6)], 4) == [
        ("t", 0, 0, 2), ("t", 0, 2, 4), ("t", 0, 4, 7), ("t", 0, 7, 10), ("t", 1, 5, 6)]
    assert min_partitions([("t", 0, 0, 2)], 5) == [("t", 0, 0, 1), ("t", 0, 1, 2)]  # never an empty piece
    assert min_partitions([("t", 0, 0, 5), ("t", 1, 0, 5)], 2) == [("t", 0, 0, 5), ("t", 1, 0, 5)]  # enough already


@pytest.fixture
def topic(tmp_path):
    """``t``: partition 0 compacted (gaps in its offsets) with lz4 batches of 40 records, partition 1
    empty, partition 2 with transactions, one aborted, in batches of 7."""
    clock = MockTime(TS)
    rng = random.Random(5)
    with compactlog.open(tmp_path, time=clock) as cl:
        cl.create_topic("t", 3, {"cleanup.policy": "compact", "segment.bytes": "1200", "min.cleanable.dirty.ratio": "0.01"})
        for i in range(30):
            keys = [b"k%d" % rng.randrange(97) if n < 600 else b"u%d" % n for n in range(i * 40, i * 40 + 40)]
            cl.append_batch("t", 0, build_batch(keys,
                                                [b"v%d" % (i * 40 + j) for j in range(40)], [TS] * 40, codec=Codec.LZ4))
        cl.clean("t")
        p2 = cl.partition("t", 2)
        for txn in range(6):
            info = BatchInfo(producer_id=9, producer_epoch=0, base_sequence=txn * 7, is_transactional=True)
            p2.append(build_batch([b"x"] * 7, [b"t%d-%d" % (txn, j) for j in range(7)], [TS] * 7, info=info))
            p2.write_txn_marker(9, 0, commit=txn != 3, coordinator_epoch=0)
        expected = {}
        for level in ("read_uncommitted", "read_committed"):
            expected[level] = sorted((r.partition, r.offset, r.value) for r in
                                     cl.consume("t", from_beginning=True, isolation_level=level))
        offsets = [r.offset for r in cl.consume("t", 0, from_beginning=True)]
    assert offsets != list(range(offsets[0], offsets[0] + len(offsets))), "partition 0 has compacted gaps"
    return tmp_path, expected


@pytest.mark.parametrize("level", ["read_uncommitted", "read_committed"])
@pytest.mark.parametrize("wanted", [1, 2, 7, 120])  # 120: pieces of about 6 offsets, in every batch
def test_every_record_once_however_the_ranges_are_cut(spark, topic, level, wanted):
    path, expected = topic
    df = (spark.read.format("compactlog").option("path", str(path)).option("subscribe", "t")
          .option("minPartitions", str(wanted)).option("kafka.isolation.level", level).load())
    assert df.rdd.getNumPartitions() >= min(wanted, 2)
    rows = sorted((r.partition, r.offset, bytes(r.value)) for r in df.select("partition", "offset", "value").collect())
    assert rows == expected[level]


def test_a_bad_min_partitions_is_named(spark, topic):
    path, _ = topic
    with pytest.raises(Exception, match='option "minPartitions" must be at least 1, got 0'):
        spark.read.format("compactlog").option("path", str(path)).option("subscribe", "t") \
            .option("minPartitions", "0").load().count()


def test_cuts_fall_inside_batches(topic):
    from compactlog.spark.options import SourceOptions
    from compactlog.spark.source import plan_ranges

    path, _ = topic
    ranges = plan_ranges(SourceOptions.parse({"path": str(path), "subscribe": "t", "minPartitions": "7"}))
    with compactlog.open(path) as cl:
        bases = {b.base_offset for p in (0, 2) for b in cl.partition("t", p).batches()}
    assert len(ranges) >= 7 and not {r.partition for r in ranges} & {1}  # the empty partition has no range
    assert any(r.start not in bases for r in ranges if r.start > 0)


def test_min_partitions_alone_replaces_the_byte_cut(topic):
    from compactlog.spark.options import SourceOptions
    from compactlog.spark.source import plan_ranges

    path, _ = topic
    plan = lambda **o: [(r.partition, r.start, r.end) for r in plan_ranges(  # noqa: E731
        SourceOptions.parse({"path": str(path), "subscribe": "t", **o}))]
    by_bytes = plan(maxPartitionBytes="1000")
    assert len(by_bytes) > 3  # many segments of partition 0
    assert len(plan(minPartitions="2")) == 2  # one piece each for partitions 0 and 2
    assert plan(minPartitions="2", maxPartitionBytes="1000") == by_bytes  # already more than 2


def test_without_either_option_a_read_has_a_range_per_core_and_no_byte_cut(topic, monkeypatch):
    """The default: a range per task slot (a one-partition topic read by every core), cut at equal
    offset counts as minPartitions cuts, but no piece under about 4 MiB (a small read, a micro-batch,
    stays a range a partition); maxPartitionBytes named alone keeps its byte cut only."""
    from compactlog.spark.options import CORES_ENV, SourceOptions
    from compactlog.spark.source import plan_ranges

    path, _ = topic
    plan = lambda **o: [(r.partition, r.start, r.end) for r in plan_ranges(  # noqa: E731
        SourceOptions.parse({"path": str(path), "subscribe": "t", **o}))]
    monkeypatch.setenv(CORES_ENV, "4")
    assert plan() == plan(minPartitions="1")  # a read of a few kilobytes: one range a partition
    monkeypatch.setattr("compactlog.spark.source.MIN_PIECE_BYTES", 1)  # as if each byte were worth a piece
    for cores in (1, 2, 5, 9):
        monkeypatch.setenv(CORES_ENV, str(cores))
        assert plan() == plan(minPartitions=str(cores), maxPartitionBytes=str(2**63 - 1))
        assert max(2, cores) <= len(plan()) <= cores + 1  # partitions 0 and 2 hold records, each a piece at least
    assert plan(maxPartitionBytes="1000") == plan(maxPartitionBytes="1000", minPartitions="1")  # no default minimum
    monkeypatch.setenv(CORES_ENV, "not a number")  # (not ours to refuse: this machine's cores then)
    monkeypatch.setattr("compactlog.spark.options.machine_cores", lambda: 3)
    assert 3 <= len(plan()) <= 4


@pytest.mark.parametrize("master,cores", [("local", 1), ("local[3]", 3), ("local[ 4 , 2]", 4), ("local[*]", 6),
                                          ("spark://127.0.0.1:7077", None), ("local-cluster[2,1,1024]", None)])
def test_a_local_masters_task_slots_are_known_before_it_starts(master, cores, monkeypatch):
    from compactlog.spark.session import local_cores

    monkeypatch.setattr("compactlog.spark.session.machine_cores", lambda: 6)
    assert local_cores(master) == cores
