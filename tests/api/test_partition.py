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
    with pytest.raises(InvalidRequestError, match="read_committed"):
        cl.partition("t", 1).records(isolation="read_committed")
    with pytest.raises(InvalidRequestError, match="read_committed"):
        cl.consume("t", 1, from_beginning=True, isolation_level="read_committed")
    with pytest.raises(InvalidRequestError, match="view"):
        cl.partition("t", 1).records(view="sideways")
