"""RecordBatch v2 bytes: golden vector, header fields, patching, empty batches, corruption."""

from __future__ import annotations

import struct

import pytest

from compactlog.errors import CorruptRecordError
from compactlog.records import BatchInfo, Codec, RecordBatch, build_batch, build_empty_batch, iter_batches, patch_header

GOLDEN = bytes.fromhex(
    "000000000000000000000055ffffffff02e58cf1ff00000000000100000000000454c300000000000454c3ffffffffffffffff"
    "ffffffffffff0000000220000000086b6579310c76616c756531002400e1bf2202086b6579320c76616c75653200"
)


def test_golden_vector():
    b = build_batch([b"key1", b"key2"], [b"value1", b"value2"], [283843, 1234])
    assert b == GOLDEN
    batch = RecordBatch(GOLDEN)
    assert batch.crc == 3851219455 and batch.size == 97 and batch.is_valid()
    assert [(r.offset, r.timestamp, r.key, r.value) for r in batch.records()] == [
        (0, 283843, b"key1", b"value1"), (1, 1234, b"key2", b"value2")]


def test_header_fields_round_trip():
    info = BatchInfo(base_offset=100, producer_id=9, producer_epoch=2, base_sequence=5, partition_leader_epoch=3,
                     is_transactional=True)
    b = RecordBatch(build_batch([b"a", b"b"], [b"1", b"2"], [10, 30], info=info, codec=Codec.LZ4))
    assert (b.base_offset, b.last_offset, b.producer_id, b.producer_epoch, b.base_sequence) == (100, 101, 9, 2, 5)
    assert b.partition_leader_epoch == 3 and b.is_transactional and not b.is_control
    assert b.max_timestamp == 30 and b.first_timestamp == 10 and b.codec is Codec.LZ4


def test_log_append_time_batches_read_the_max_timestamp():
    b = RecordBatch(build_batch([b"a", b"b"], [b"1", b"2"], [10, 20], info=BatchInfo(timestamp_type=1), max_timestamp=999))
    assert [r.timestamp for r in b.records()] == [999, 999]
    assert all(r.timestamp_type == 1 for r in b.records())


def test_delete_horizon_keeps_absolute_record_timestamps():
    b = RecordBatch(build_batch([b"a", b"b"], [None, b"2"], [10, 20], delete_horizon=5000))
    assert b.has_delete_horizon and b.delete_horizon_ms == 5000 and b.base_timestamp == 5000
    assert [r.timestamp for r in b.records()] == [10, 20]
    assert b.first_timestamp == 10


def test_offset_gaps_and_kept_extent():
    b = RecordBatch(build_batch([b"a", b"c"], [b"1", b"3"], [1, 1], offset_deltas=[0, 2], last_offset_delta=4,
                                info=BatchInfo(base_offset=10)))
    assert [r.offset for r in b.records()] == [10, 12]
    assert b.last_offset == 14 and b.record_count == 2


def test_empty_batch_keeps_what_kafka_keeps():
    src = RecordBatch(build_batch([b"a", b"b"], [b"1", b"2"], [7, 8], codec=Codec.ZSTD,
                                  info=BatchInfo(base_offset=50, producer_id=4, producer_epoch=1, base_sequence=9,
                                                 partition_leader_epoch=2, is_transactional=True)))
    e = RecordBatch(build_empty_batch(src))
    assert e.size == 61 and e.record_count == 0 and e.codec is Codec.NONE and e.is_valid()
    assert (e.base_offset, e.last_offset, e.max_timestamp, e.base_timestamp) == (50, 51, 8, -1)
    assert (e.producer_id, e.producer_epoch, e.base_sequence, e.partition_leader_epoch) == (4, 1, 9, 2)
    assert e.is_transactional and not e.has_delete_horizon and e.records() == []


def test_patch_header_assigns_offsets_without_touching_records():
    raw = build_batch([b"a", b"b"], [b"1", b"2"], [5, 6], codec=Codec.GZIP)
    buf = bytearray(raw)
    patch_header(buf, 0, base_offset=1000, partition_leader_epoch=4)
    b = RecordBatch(bytes(buf))
    assert b.base_offset == 1000 and b.partition_leader_epoch == 4
    assert b.crc == RecordBatch(raw).crc and bytes(buf[61:]) == raw[61:] and b.is_valid()
    patch_header(buf, 0, base_offset=1000, max_timestamp=77, log_append_time=True)
    b = RecordBatch(bytes(buf))
    assert b.is_valid() and b.crc != RecordBatch(raw).crc and b.timestamp_type == 1
    assert {r.timestamp for r in b.records()} == {77}


def test_leader_epoch_is_outside_the_crc():
    buf = bytearray(GOLDEN)
    buf[13] ^= 0xFF
    RecordBatch(bytes(buf)).ensure_valid()


@pytest.mark.parametrize("pos", [21, 30, 60, 61, 80, 96])
def test_any_flipped_byte_after_the_crc_is_caught(pos):
    buf = bytearray(GOLDEN)
    buf[pos] ^= 0x01
    with pytest.raises(CorruptRecordError, match=r"stored crc = 3851219455, computed crc = \d+"):
        RecordBatch(bytes(buf)).ensure_valid()


def test_bad_magic_truncation_and_unknown_codec():
    buf = bytearray(GOLDEN)
    buf[16] = 1
    with pytest.raises(CorruptRecordError, match="magic 1"):
        RecordBatch(bytes(buf)).ensure_valid()
    with pytest.raises(CorruptRecordError, match="declares 97 bytes"):
        RecordBatch(GOLDEN[:80]).ensure_valid()
    buf = bytearray(GOLDEN)
    struct.pack_into(">h", buf, 21, 5)
    with pytest.raises(CorruptRecordError, match="Unknown compression type id: 5"):
        RecordBatch(bytes(buf)).codec


def test_iter_batches_stops_at_partial_tail_and_rejects_impossible_lengths():
    two = GOLDEN + GOLDEN
    assert [p for p, _ in iter_batches(two)] == [0, 97]
    assert [p for p, _ in iter_batches(two[:150])] == [0]
    assert [p for p, _ in iter_batches(two + b"\x00" * 16)] == [0, 97]
    bad = bytearray(GOLDEN)
    struct.pack_into(">i", bad, 8, 10)
    with pytest.raises(CorruptRecordError, match="impossible length"):
        list(iter_batches(bytes(bad)))
