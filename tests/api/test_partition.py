"""The partition seam: what the broker, the console, the CLI and Spark see of a partition agrees with the
topic's description and with what a consumer reads, and the read path refuses what it cannot honour."""

from __future__ import annotations

import pytest

import compactlog
from compactlog.errors import InvalidRequestError, UnknownTopicOrPartitionError
from compactlog.records import iter_batches


@pytest.fixture
def cl(tmp_path):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 2, {"segment.bytes": "600"})
        for i in range(30):
            cl.produce("t", b"v%d" % i, key=b"k%d" % i, partition=1)
        yield cl


def test_a_partition_agrees_with_the_topic_description_and_the_consumer(cl):
    part = cl.partition("t", 1)
    assert part.describe() == cl.describe_topic("t").partitions[1]
    assert (part.log_start_offset, part.high_watermark, part.log_end_offset) == (0, 30, 30)
    got = [(r.offset, r.value) for r in part.records()]
    assert got == [(r.offset, r.value) for r in cl.consume("t", 1, from_beginning=True)]
    assert got == [(i, b"v%d" % i) for i in range(30)]
    assert [r.offset for r in part.records(12, 15)] == [12, 13, 14]


def test_a_located_range_is_whole_batches_from_the_one_holding_the_offset(cl):
    found = cl.partition("t", 1).locate(7, 300)
    offsets = [b.base_offset for _, b in iter_batches(found.read())]
    assert offsets and offsets[0] <= 7 and offsets == list(range(offsets[0], offsets[0] + len(offsets)))


def test_unknown_partitions_and_unsupported_reads_are_named(cl):
    assert cl.find_partition("t", 2) is None and cl.find_partition("nope", 0) is None
    with pytest.raises(UnknownTopicOrPartitionError):
        cl.partition("t", 5)
    with pytest.raises(InvalidRequestError, match="isolation level must be one of read_uncommitted, read_committed"):
        cl.partition("t", 1).records(isolation="read_comitted")
    # no transaction here: read_committed reads what read_uncommitted reads
    part = cl.partition("t", 1)
    assert [r.offset for r in part.records(isolation="read_committed")] == [r.offset for r in part.records()] != []
    with pytest.raises(InvalidRequestError, match="view"):
        cl.partition("t", 1).records(view="sideways")


def _brute_max(part) -> tuple[int, int] | None:
    best = None
    for r in part.records():
        if r.timestamp >= 0 and (best is None or r.timestamp > best[0]):
            best = (r.timestamp, r.offset)
    return best


@pytest.mark.parametrize("seed", range(6))
def test_max_timestamp_is_the_first_record_with_the_largest_timestamp(tmp_path, seed):
    """Partition.max_timestamp (ListOffsets' -3) against reading every record: batches of records with
    timestamps out of order and repeated, many small segments, a log start moved into the middle of a
    batch, and a restart (the segments' bounds then come from their time indexes)."""
    import random

    from compactlog.records.batch import build_batch

    rng = random.Random(seed)
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("ts", 1, {"segment.bytes": "700"})
        part = cl.partition("ts", 0)
        assert part.max_timestamp() is None
        for _ in range(40):
            n = rng.randint(1, 6)
            stamps = [rng.choice((rng.randint(1000, 1050), 1050, 2000 + rng.randint(0, 3))) for _ in range(n)]
            part.append(build_batch([None] * n, [b"v" * 20] * n, stamps))
        assert part.max_timestamp() == _brute_max(part)
        top = part.max_timestamp()
        cl.delete_records("ts", 0, top[1] + rng.randint(0, 2))  # the largest ones (maybe) gone
        assert part.max_timestamp() == _brute_max(part)
    with compactlog.open(tmp_path) as cl:
        part = cl.partition("ts", 0)
        assert part.max_timestamp() == _brute_max(part)
        cl.delete_records("ts", 0, part.log_end_offset)
        assert part.max_timestamp() is None


def test_a_topic_id_names_its_topic_only_while_that_topic_lives(tmp_path):
    """Fetch v13+ finds topics by id on every request: a deleted topic's id names nothing, even when a
    topic of the same name is made again (with a new id)."""
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1)
        first = cl.topic_id("t")
        assert cl.topic_with_id(first) == "t"
        cl.delete_topic("t")
        assert cl.topic_with_id(first) is None
        cl.create_topic("t", 1)
        second = cl.topic_id("t")
        assert second != first
        assert (cl.topic_with_id(first), cl.topic_with_id(second)) == (None, "t")
        assert cl.topic_with_id("no-such-id") is None
