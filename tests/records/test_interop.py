"""Our batches parse with kafka-python's and aiokafka's record readers, and theirs parse with ours,
for every codec: the bytes on disk are Kafka's."""

from __future__ import annotations

import pytest
from aiokafka.record.default_records import DefaultRecordBatch as AioBatch
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from kafka.record.default_records import DefaultRecordBatch as KpBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder

from compactlog.records import BatchInfo, Codec, RecordBatch, build_batch

TS = 1_700_000_000_000
RECORDS = [
    (b"p3", b"10", TS, [("source", b"shop")]),
    (None, b"keyless", TS + 1, []),
    (b"p5", None, TS + 2, [("h", None)]),  # a tombstone
    (b"big", b"x" * 1_000_000, TS + 3, []),
    (b"", b"", TS + 4, [("a", b""), ("b", b"2")]),
]
CODECS = [Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD]


def ours(codec: Codec) -> bytes:
    return build_batch(
        [r[0] for r in RECORDS], [r[1] for r in RECORDS], [r[2] for r in RECORDS],
        headers=[r[3] for r in RECORDS], codec=codec, info=BatchInfo(base_offset=42, producer_id=7, producer_epoch=1, base_sequence=3),
    )


def expected(base: int = 42):
    return [(base + i, r[2], r[0], r[1], [(k, v) for k, v in r[3]]) for i, r in enumerate(RECORDS)]


def their_records(batch) -> list:
    return [(r.offset, r.timestamp, r.key, r.value, [(k, v) for k, v in r.headers]) for r in batch]


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.config_name)
def test_kafka_python_reads_our_batches(codec):
    data = ours(codec)
    batch = KpBatch(data)
    assert batch.validate_crc()
    assert batch.base_offset == 42 and batch.producer_id == 7 and batch.base_sequence == 3
    assert batch.compression_type == int(codec)
    assert their_records(batch) == expected()


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.config_name)
def test_aiokafka_reads_our_batches(codec):
    data = ours(codec)
    batch = AioBatch(data)
    assert batch.validate_crc()
    assert their_records(batch) == expected()


def _fill(builder) -> bytes:
    for i, (k, v, ts, h) in enumerate(RECORDS):
        assert builder.append(i, timestamp=ts, key=k, value=v, headers=h) is not None
    return bytes(builder.build())


def _check_ours(data: bytes, codec: Codec) -> None:
    batch = RecordBatch(data)
    batch.ensure_valid()
    assert batch.codec is codec
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch.records()]
    assert got == expected(0)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.config_name)
def test_we_read_kafka_python_batches(codec):
    _check_ours(_fill(KpBuilder(magic=2, compression_type=int(codec), is_transactional=0, producer_id=-1,
                                producer_epoch=-1, base_sequence=-1, batch_size=10_000_000)), codec)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.config_name)
def test_we_read_aiokafka_batches(codec):
    _check_ours(_fill(AioBuilder(2, int(codec), 0, -1, -1, -1, 10_000_000)), codec)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.config_name)
def test_client_batches_append_in_place_or_rebuilt(tmp_path, codec):
    """A client's batch stored under compression.type=producer keeps its bytes; under zstd it is rebuilt."""
    import compactlog

    data = _fill(KpBuilder(2, int(codec), 0, -1, -1, -1, 10_000_000))
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
