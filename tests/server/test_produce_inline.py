"""Which produce requests are appended on the event loop (``produce.cheap``): small ones whose batches'
framing bounds what they inflate to, so that no request can hold the loop for long, and the common
librdkafka batch skips the hop to a worker thread."""

from __future__ import annotations

import struct
from types import SimpleNamespace

import lz4.frame
import pytest

import compactlog
from compactlog.records.batch import BatchInfo, build_batch
from compactlog.records.codecs import Codec, compress, decompress
from compactlog.server.produce import INLINE_BYTES, cheap


def request(*batches: bytes):
    """The parts of a Produce request the rule reads: topics with their partitions' records."""
    parts = [SimpleNamespace(index=i, records=b) for i, b in enumerate(batches)]
    return [SimpleNamespace(name="t", partition_data=parts)], sum(len(b) for b in batches) + 100


def records(n: int, value: bytes, codec: Codec, producer_id: int = -1) -> bytes:
    return build_batch([b"k%d" % i for i in range(n)], [value] * n, codec=codec,
                       info=BatchInfo(producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                                      base_sequence=0 if producer_id >= 0 else -1))


@pytest.fixture
def broker(tmp_path):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 4)
        yield SimpleNamespace(cl=cl)


@pytest.mark.parametrize("codec, n", [(Codec.NONE, 500), (Codec.LZ4, 5_000), (Codec.ZSTD, 5_000),
                                      (Codec.SNAPPY, 5_000)])
def test_a_small_request_is_appended_on_the_loop(broker, codec, n):
    topics, size = request(records(n, b"price=12.50;" * 8, codec))  # about half a librdkafka batch
    assert size <= INLINE_BYTES
    assert cheap(broker, topics, size)


def test_gzip_says_nothing_of_its_inflated_size_so_it_goes_to_a_thread(broker):
    topics, size = request(records(10, b"x", Codec.GZIP))
    assert not cheap(broker, topics, size)


@pytest.mark.parametrize("codec", [Codec.LZ4, Codec.ZSTD])
def test_a_small_request_that_inflates_past_a_mebibyte_goes_to_a_thread(broker, codec):
    topics, size = request(records(100, b"\0" * 30_000, codec))  # 3 MB in a few kilobytes
    assert size <= INLINE_BYTES
    assert not cheap(broker, topics, size)


def test_the_bound_counts_every_partition_of_the_request(broker):
    one = records(60, b"\0" * 10_000, Codec.LZ4)  # 600 KB inflated, by its framing at most 640 KiB
    assert cheap(broker, *request(one))
    assert not cheap(broker, *request(one, one))


def test_a_request_over_64_kb_goes_to_a_thread(broker):
    topics, size = request(records(700, b"x" * 100, Codec.NONE))
    assert size > INLINE_BYTES
    assert not cheap(broker, topics, size)


def test_an_idempotent_batch_before_the_partitions_producer_state_is_loaded_goes_to_a_thread(broker):
    topics, size = request(records(10, b"x", Codec.LZ4, producer_id=7))
    assert not broker.cl.partition("t", 0).producer_state_loaded
    assert not cheap(broker, topics, size)


def test_a_batch_that_rolls_the_segment_goes_to_a_thread(tmp_path):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1, {"segment.bytes": "3000"})
        broker = SimpleNamespace(cl=cl)
        batch = records(20, b"x" * 50, Codec.LZ4)
        assert cheap(broker, *request(batch))
        while cl.partition("t", 0).active_segment_room >= len(batch):
            cl.partition("t", 0).append(batch)
        assert not cheap(broker, *request(batch))  # this one would close the segment, with an fsync


@pytest.mark.parametrize("codec", [Codec.LZ4, Codec.ZSTD, Codec.SNAPPY])
def test_a_batch_of_many_tiny_blocks_goes_to_a_thread(broker, codec):
    """A hostile frame of thousands of 1-byte blocks inflates to little, but walking it costs a Python
    step per block: past INLINE_BLOCKS it is not walked on the loop."""
    body = b"x" * 3000
    if codec is Codec.LZ4:  # stored 1-byte blocks: a 4-byte size with the high bit, then the byte
        header = lz4.frame.compress(b"", block_linked=False, content_checksum=False)[:7]
        section = header + b"".join(struct.pack("<I", 1 | 0x80000000) + b"x" for _ in body) + b"\0\0\0\0"
    elif codec is Codec.ZSTD:  # raw 1-byte blocks: a 3-byte header (type 0, size 1), the last one flagged
        heads = [(1 << 3) | (i == len(body) - 1) for i in range(len(body))]
        section = (bytes.fromhex("28b52ffd") + b"\x00\x00"  # no checksum, window descriptor
                   + b"".join(h.to_bytes(3, "little") + b"x" for h in heads))
    else:  # snappy-java stream of 3000 one-byte raw blocks
        one = compress(Codec.SNAPPY, b"x")
        section = one[:16] + b"".join(one[16:] for _ in body)
    batch = bytearray(records(1, b"x", codec))
    data = bytes(batch[:61]) + section
    data = data[:8] + struct.pack(">i", len(data) - 12) + data[12:]  # the batch length covers the new section
    assert decompress(codec, section) == body  # a valid stream
    topics, size = request(data)
    assert size <= INLINE_BYTES
    assert not cheap(broker, topics, size)
