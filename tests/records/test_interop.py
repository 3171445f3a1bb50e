"""The bytes are Kafka's: our batches parse with kafka-python's and aiokafka's record readers, and the
batches their builders write parse with ours, for every codec.

Codec libraries the clients need (test extras): kafka-python imports ``snappy`` (python-snappy), ``lz4``
and ``zstandard``; aiokafka uses ``cramjam`` for snappy, lz4 and zstd.
"""

from __future__ import annotations

import aiokafka.codec
import kafka.codec
import pytest
from aiokafka.record import default_records as aio_default
from aiokafka.record import memory_records as aio_memory
from kafka.record.default_records import DefaultRecordBatch as KpBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder
from kafka.record.memory_records import MemoryRecords as KpMemoryRecords
from kafka.record.memory_records import MemoryRecordsBuilder as KpMemoryRecordsBuilder

from compactlog.records import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    BatchInfo,
    Codec,
    RecordBatch,
    build_batch,
    build_empty_batch,
    iter_batches,
)

CODECS = [Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD]
codecs = pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.config_name)

# (batch reader, multi-batch reader) per client implementation. aiokafka's default is its Cython build;
# its pure-Python twin is what runs where the extension is missing, so it is pinned as well.
READERS = {
    "kafka-python": (KpBatch, KpMemoryRecords),
    "aiokafka": (aio_default.DefaultRecordBatch, aio_memory.MemoryRecords),
    "aiokafka-py": (aio_default._DefaultRecordBatchPy, aio_memory._MemoryRecordsPy),
}
readers = pytest.mark.parametrize("reader", list(READERS))

TS = 1_700_000_000_000
RECORDS = [
    (b"p3", b"10", TS, [("source", b"shop")]),
    (None, b"keyless", TS + 1, []),
    (b"p5", None, TS + 2, [("h", None)]),  # a tombstone with a null header value
    (b"big", b"x" * 1_000_000, TS - 7, []),  # ~1 MB value; timestamps need not be ordered
    (b"", b"", -1, [("a", b""), ("b", b"2"), ("\u00e9t\u00e9", b"\x00\xff")]),
]
GOLDEN = bytes.fromhex(
    "000000000000000000000055ffffffff02e58cf1ff00000000000100000000000454c300000000000454c3ffffffffffffffff"
    "ffffffffffff0000000220000000086b6579310c76616c756531002400e1bf2202086b6579320c76616c75653200"
)


def ours(codec: Codec, info: BatchInfo = BatchInfo(), **kwargs) -> bytes:
    return build_batch(
        [r[0] for r in RECORDS], [r[1] for r in RECORDS], [r[2] for r in RECORDS],
        headers=[r[3] for r in RECORDS], codec=codec, info=info, **kwargs,
    )


def expected(base: int = 0, deltas=None, timestamp=None) -> list[tuple]:
    deltas = range(len(RECORDS)) if deltas is None else deltas
    return [(base + d, r[2] if timestamp is None else timestamp, r[0], r[1], list(r[3])) for d, r in zip(deltas, RECORDS)]


def their_records(batch) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, [(k, v) for k, v in r.headers]) for r in batch]


def our_records(batch: RecordBatch) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch.records()]


def their_batches(reader: str, data: bytes) -> list:
    memory_records = READERS[reader][1](data)
    out = []
    while (b := memory_records.next_batch()) is not None:
        out.append(b)
    return out


def test_client_codec_libraries_are_installed():
    missing = [pkg for pkg, ok in [
        ("python-snappy (kafka-python's snappy)", kafka.codec.has_snappy()),
        ("lz4 (kafka-python's lz4)", kafka.codec.has_lz4()),
        ("zstandard (kafka-python's zstd)", kafka.codec.has_zstd()),
        ("cramjam (aiokafka's snappy/lz4/zstd)",
         aiokafka.codec.has_snappy() and aiokafka.codec.has_lz4() and aiokafka.codec.has_zstd()),
    ] if not ok]
    assert not missing, f"pip install {' '.join(p.split()[0] for p in missing)}"


# -- they read ours --------------------------------------------------------------------------------


@readers
def test_clients_read_the_golden_vector(reader):
    batch = READERS[reader][0](GOLDEN)
    assert batch.validate_crc() and batch.crc == 3851219455
    assert their_records(batch) == [(0, 283843, b"key1", b"value1", []), (1, 1234, b"key2", b"value2", [])]


@readers
@codecs
def test_clients_read_our_batches(reader, codec):
    info = BatchInfo(base_offset=42, producer_id=7, producer_epoch=1, base_sequence=3, partition_leader_epoch=5,
                     is_transactional=True)
    data = ours(codec, info)
    batch = READERS[reader][0](data)
    assert batch.validate_crc()
    assert (batch.base_offset, batch.last_offset_delta, batch.compression_type) == (42, 4, int(codec))
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 1, 3)
    assert batch.is_transactional and not batch.is_control_batch
    assert (batch.timestamp_type, batch.first_timestamp, batch.max_timestamp) == (CREATE_TIME, TS, TS + 2)
    if hasattr(batch, "leader_epoch"):
        assert batch.leader_epoch == 5
    assert their_records(batch) == expected(42)


@readers
@pytest.mark.parametrize("codec, level", [
    (Codec.GZIP, 1), (Codec.GZIP, 9), (Codec.LZ4, 1), (Codec.LZ4, 17), (Codec.ZSTD, -5), (Codec.ZSTD, 19),
], ids=str)
def test_clients_read_every_compression_level(reader, codec, level):
    batch = READERS[reader][0](ours(codec, level=level))
    assert batch.validate_crc() and their_records(batch) == expected()


@readers
@codecs
def test_clients_read_log_append_time(reader, codec):
    data = ours(codec, BatchInfo(timestamp_type=LOG_APPEND_TIME), max_timestamp=TS + 500)
    batch = READERS[reader][0](data)
    assert batch.validate_crc() and batch.timestamp_type == LOG_APPEND_TIME
    assert their_records(batch) == expected(timestamp=TS + 500)
    assert {r.timestamp_type for r in READERS[reader][0](data)} == {LOG_APPEND_TIME}


@readers
@codecs
def test_clients_read_a_cleaned_log(reader, codec):
    """What the cleaner writes: offset gaps, a kept extent, a delete horizon, a retained empty batch."""
    deltas = [0, 2, 3, 7, 8]
    gapped = ours(codec, BatchInfo(base_offset=100), offset_deltas=deltas, last_offset_delta=11)
    horizon = ours(codec, BatchInfo(base_offset=112), delete_horizon=TS + 86_400_000)
    empty = build_empty_batch(RecordBatch(ours(codec, BatchInfo(base_offset=117, producer_id=3, producer_epoch=0,
                                                                base_sequence=0))))
    tail = ours(codec, BatchInfo(base_offset=122))
    log = gapped + horizon + empty + tail
    batches = their_batches(reader, log)
    assert [b.base_offset for b in batches] == [100, 112, 117, 122]
    assert all(b.validate_crc() for b in batches)
    assert [b.next_offset for b in batches] == [112, 117, 122, 127]
    theirs = [their_records(b) for b in batches]  # their batches iterate once
    assert theirs[0] == expected(100, deltas)
    assert theirs[1] == expected(112)  # absolute timestamps despite the horizon in the base timestamp
    assert theirs[2] == [] and batches[2].producer_id == 3
    assert theirs[3] == expected(122)
    # And they agree with our reading of the same bytes.
    assert [our_records(b) for _, b in iter_batches(log)] == theirs


# -- we read theirs --------------------------------------------------------------------------------


def _fill(builder, offsets=None) -> bytes:
    offsets = range(len(RECORDS)) if offsets is None else offsets
    for off, (k, v, ts, h) in zip(offsets, RECORDS):
        assert builder.append(off, timestamp=ts, key=k, value=v, headers=h) is not None
    return bytes(builder.build())


BUILDERS = {
    "kafka-python": lambda codec, txn, pid, epoch, seq: KpBuilder(
        magic=2, compression_type=int(codec), is_transactional=txn, producer_id=pid, producer_epoch=epoch,
        base_sequence=seq, batch_size=10_000_000),
    "aiokafka": lambda codec, txn, pid, epoch, seq: aio_default.DefaultRecordBatchBuilder(
        2, int(codec), txn, pid, epoch, seq, 10_000_000),
    "aiokafka-py": lambda codec, txn, pid, epoch, seq: aio_default._DefaultRecordBatchBuilderPy(
        2, int(codec), txn, pid, epoch, seq, 10_000_000),
}


def _check_ours(data: bytes, codec: Codec, expect: list[tuple]) -> RecordBatch:
    batch = RecordBatch(data)
    batch.ensure_valid()
    assert batch.size == len(data) and batch.codec is codec
    assert batch.record_count == len(expect) and batch.last_offset == expect[-1][0]
    assert batch.timestamp_type == CREATE_TIME
    assert our_records(batch) == expect
    assert [(p, b.size) for p, b in iter_batches(data)] == [(0, len(data))]
    return batch


@pytest.mark.parametrize("builder", list(BUILDERS))
@codecs
def test_we_read_client_batches(builder, codec):
    batch = _check_ours(_fill(BUILDERS[builder](codec, 0, -1, -1, -1)), codec, expected(0))
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.is_transactional) == (-1, -1, -1, False)
    assert batch.max_timestamp == TS + 2


@pytest.mark.parametrize("builder", list(BUILDERS))
@codecs
def test_we_read_idempotent_transactional_client_batches(builder, codec):
    batch = _check_ours(_fill(BUILDERS[builder](codec, 1, 99, 4, 1000)), codec, expected(0))
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.is_transactional) == (99, 4, 1000, True)


@codecs
def test_we_read_kafka_python_memory_records(codec):
    builder = KpMemoryRecordsBuilder(2, int(codec), 10_000_000, offset=500)
    for i, (k, v, ts, h) in enumerate(RECORDS):
        if i == 2:
            builder.skip(3)  # the gap a compacted log leaves
        assert builder.append(ts, k, v, h) is not None
    builder.set_producer_state(12, 3, 40, False)
    builder.close()
    data = bytes(builder.buffer())
    batch = _check_ours(data, codec, expected(0, [500, 501, 505, 506, 507]))
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (12, 3, 40)
    assert batch.summarize()[3] is False  # offset deltas are not 0..n-1: the validator must rebuild


@codecs
def test_client_batches_append_in_place_or_rebuilt(tmp_path, codec):
    """A client's batch stored under compression.type=producer keeps its bytes; under zstd it is rebuilt."""
    import compactlog

    data = _fill(BUILDERS["kafka-python"](codec, 0, -1, -1, -1))
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("keep", 1, {"max.message.bytes": "2000000"})
        cl.create_topic("zstd", 1, {"compression.type": "zstd", "max.message.bytes": "2000000"})
        cl.append_batch("keep", 0, data)
        cl.append_batch("zstd", 0, data)
        kept = next(iter(cl.log("keep").batches(0)))
        assert bytes(kept.buffer)[61:] == data[61:]
        rebuilt = next(iter(cl.log("zstd").batches(0)))
        assert rebuilt.codec is Codec.ZSTD
        for b in (kept, rebuilt):
            assert their_records(KpBatch(bytes(b.buffer))) == expected(0)
