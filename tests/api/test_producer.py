"""The producer plan (compactlog.producer) through the API: batches that fit the topic, Kafka's sticky
partitioning of keyless records, and the codec a producer that knows the topic builds with."""

from __future__ import annotations

import os
import random

import numpy as np
import pytest

import compactlog
from compactlog.errors import RecordBatchTooLargeError, RecordTooLargeError, UnsupportedCompressionTypeError
from compactlog.producer import BuiltInPartitioner, compression_for, cut, lengths, record_sizes
from compactlog.records import Codec, build_batch
from compactlog.records.batch import HEADER_SIZE
from compactlog.storage.log_config import LogConfig

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def stored(cl, topic: str, partition: int = 0):
    return [b for seg in cl.log(topic, partition).segments for _, b in seg.batches(0)]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("limit", ["segment.bytes", "max.message.bytes"])
def test_batches_fit_a_topic_whose_limit_is_smaller_than_a_batch(tmp_path, codec, limit):
    """10 KB of records for a topic that takes 1000 bytes at a time: ~16 KB batches would all be refused.
    Random values do not compress, so compressed batches come out larger than their estimate and are split."""
    rng = random.Random(5)
    rows = [(b"k%d" % i, rng.randbytes(rng.randrange(20, 180))) for i in range(100)]
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1, {limit: "1000"})
        res = cl.produce_batch("t", rows, compression=codec)
        assert (res[0].first_offset, res[0].last_offset) == (0, 99) and res[0].batches > 10
        assert max(b.size for b in stored(cl, "t")) <= 1000
        assert [(r.key, r.value) for r in cl.consume("t", from_beginning=True)] == rows


def test_a_record_that_cannot_fit_alone_is_refused_before_anything_is_written(tmp_path):
    rows = [(b"k%d" % i, b"v" * 100) for i in range(10)]
    rows[5] = (b"big", os.urandom(2000))
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("seg", 1, {"segment.bytes": "1000"})
        cl.create_topic("msg", 1, {"max.message.bytes": "1000"})
        with pytest.raises(RecordBatchTooLargeError, match=r"^Message batch size is 2073 bytes in append to partition "
                           r"seg-0 which exceeds the maximum configured segment size of 1000\. Record 5 alone makes a "
                           r"batch that large\.$"):
            cl.produce_batch("seg", rows)
        with pytest.raises(RecordTooLargeError, match=r"^The record batch size in the append to msg-0 is 2073 bytes "
                           r"which exceeds the maximum configured value of 1000\. Record 5 alone"):
            cl.produce_batch("msg", rows)
        assert cl.end_offsets("seg") == cl.end_offsets("msg") == {0: 0}
        with pytest.raises(RecordBatchTooLargeError, match="maximum configured segment size of 1000.$"):
            cl.produce("seg", rows[5][1], key=b"big")
        cl.produce_batch("seg", [(b"big", b"x" * 5000)], compression="zstd")  # compressed, it fits
        assert stored(cl, "seg")[0].codec is Codec.ZSTD


def runs(partitions: list[int]) -> list[tuple[int, int]]:
    """(partition, length) of each run of equal partitions."""
    out: list[tuple[int, int]] = []
    for p in partitions:
        if out and out[-1][0] == p:
            out[-1] = (p, out[-1][1] + 1)
        else:
            out.append((p, 1))
    return out


def test_keyless_records_stick_to_a_partition_for_a_batch_size_then_move(tmp_path):
    value = b"x" * 100
    per_record = int(record_sizes(lengths([None]), lengths([value]))[0])
    batch_records = (16384 - HEADER_SIZE) // per_record  # records per full 16 KB batch
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 4)
        cl.produce_batch("t", [(None, b"%05d" % i + value[5:]) for i in range(24 * batch_records)])
        placed = sorted((int(r.value[:5]), r.partition) for r in cl.consume("t", from_beginning=True))
        stays = runs([p for _, p in placed])
        # Each stay is whole batches with at least batch.size bytes between them: two full ones here
        # (a full batch falls just short of 16384), unless the random choice picked the same partition again.
        assert all(n % (2 * batch_records) == 0 for _, n in stays) and sum(n for _, n in stays) == 24 * batch_records
        assert len({p for p, _ in stays}) > 1, "twelve random choices all fell on one partition"
        for p in range(4):  # the sticky partition's records make whole batches
            assert all(b.record_count == batch_records for b in stored(cl, "t", p))
        singles = [cl.produce("t", value).partition for _ in range(3 * batch_records)]
    switch = -(-16384 // (HEADER_SIZE + per_record))  # one-record batches: a switch once 16384 bytes went out
    assert all(n % switch == 0 for _, n in runs(singles)[:-1])


def test_the_sticky_partition_carries_over_calls_and_is_chosen_at_random():
    sizes = np.full(10, 100)
    part = BuiltInPartitioner(3, random.Random(1))
    first = part.partition([None] * 10, sizes, 16384)
    assert len(set(first.tolist())) == 1  # 1,610 bytes: no switch yet
    assert part.partition([None] * 10, sizes, 16384)[0] == first[0]  # the next call stays
    keyed = part.partition([b"a", None, b"b"], np.full(3, 100), 16384, explicit=np.array([-1, -1, 2]))
    assert keyed.tolist()[1:] == [first[0], 2]  # keys hash, an explicit partition wins, keyless stick
    chosen = [BuiltInPartitioner(3, random.Random(seed)).sticky_partition() for seed in range(60)]
    assert set(chosen) == {0, 1, 2}
    every = BuiltInPartitioner(5, random.Random(2)).partition([None] * 200, np.full(200, 10), 0)
    assert len(set(every.tolist())) == 5  # batch.size 0: a new choice for every record, as Kafka's 1 byte


def test_the_batch_cutter_fills_batches_in_order():
    assert cut(np.array([10] * 10), HEADER_SIZE + 25).tolist() == [2, 4, 6, 8, 10]
    assert cut(np.array([100, 5, 5, 50]), HEADER_SIZE + 10).tolist() == [1, 3, 4]  # a large record goes alone
    assert cut(np.array([100, 5, 5]), 0).tolist() == [1, 2, 3]
    assert cut(np.array([], dtype=np.int64), 100).tolist() == []


@pytest.mark.parametrize("seed", range(20))
def test_record_sizes_bound_the_encoded_records(seed):
    rng = random.Random(seed)
    n = rng.randrange(1, 80)
    keys = [None if rng.random() < 0.2 else rng.randbytes(rng.randrange(300)) for _ in range(n)]
    values = [None if rng.random() < 0.2 else rng.randbytes(rng.randrange(20000)) for _ in range(n)]
    timestamps = [rng.choice([0, 1_700_000_000_000]) + rng.randrange(10**6) for _ in range(n)]
    encoded = len(build_batch(keys, values, timestamps)) - HEADER_SIZE
    est = int(record_sizes(lengths(keys), lengths(values), timestamps=np.array(timestamps)).sum())
    # offset deltas below 64 take one byte, counted as two, which may lengthen a record's length varint
    assert encoded <= est <= encoded + 2 * n


@pytest.mark.parametrize("topic, asked, level, expected", [
    ({}, None, None, (Codec.NONE, None)),
    ({}, "gzip", 5, (Codec.GZIP, 5)),  # compression.type=producer: the producer's codec and level
    ({"compression.type": "zstd"}, None, None, (Codec.ZSTD, 3)),  # the topic's, at its level
    ({"compression.type": "zstd", "compression.zstd.level": "9"}, "lz4", 12, (Codec.ZSTD, 9)),
    ({"compression.type": "zstd", "compression.zstd.level": "9"}, "zstd", 1, (Codec.ZSTD, 1)),  # kept in place
    ({"compression.type": "uncompressed"}, "snappy", None, (Codec.NONE, None)),
    ({"compression.type": "gzip"}, "none", None, (Codec.GZIP, -1)),
])
def test_batches_are_built_in_the_codec_the_topic_stores(topic, asked, level, expected):
    assert compression_for(LogConfig(topic), asked, level) == expected


def test_the_producers_own_codec_and_level_are_checked_whatever_the_topic_stores(tmp_path):
    with pytest.raises(UnsupportedCompressionTypeError, match="Unknown compression name: brotli"):
        compression_for(LogConfig({"compression.type": "zstd"}), "brotli")
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1, {"compression.type": "zstd"})
        with pytest.raises(Exception, match="gzip"):
            cl.produce_batch("t", [(b"k", b"v")], compression="gzip", level=42)
        cl.produce_batch("t", [(b"k", b"v" * 100)] * 10, compression="gzip")
        assert [b.codec for b in stored(cl, "t")] == [Codec.ZSTD]


@pytest.mark.parametrize("key, value, headers", [
    (None, None, None), (b"k", b"v" * 100, None), (b"k" * 200, None, [("h", b"x"), ("\u00e9", None)]),
    (None, b"v" * 70000, [(b"raw", b"y" * 300)] * 3),
])
def test_one_record_size_is_record_sizes_for_one_record(key, value, headers):
    """The per-record produce sizes a record without numpy; it must agree with the batch path."""
    from compactlog.producer import record_sizes_of
    from compactlog.producer import one_record_size

    assert one_record_size(key, value, headers) == int(record_sizes_of([key], [value], [headers] if headers else None)[0])
