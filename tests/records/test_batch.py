"""RecordBatch v2 bytes: golden vector, header fields, patching, empty batches, iteration, corruption.

The layout is Kafka's (spec §1); every test here pins bytes or facts a Kafka reader or writer relies on.
"""

from __future__ import annotations

import struct

import google_crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactlog.errors import CorruptRecordError
from compactlog.records import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    BatchInfo,
    Codec,
    RecordBatch,
    build_batch,
    build_empty_batch,
    iter_batches,
    patch_header,
)
from compactlog.records import kernels
from compactlog.records.batch import BatchSummary
from compactlog.records.columns import Chunk

CODECS = list(Codec)
codec_ids = pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.config_name)

# Spec §1.8 (Kafka's MemoryRecordsTest.testChecksum): two records, CRC 3851219455, 97 bytes.
GOLDEN = bytes.fromhex(
    "000000000000000000000055ffffffff02e58cf1ff00000000000100000000000454c300000000000454c3ffffffffffffffff"
    "ffffffffffff0000000220000000086b6579310c76616c756531002400e1bf2202086b6579320c76616c75653200"
)
GOLDEN_CRC = 3851219455


def with_crc(buf: bytearray) -> bytes:
    """Recompute the CRC with an independent CRC-32C, so a field can be changed without the CRC catching it."""
    struct.pack_into(">I", buf, 17, google_crc32c.value(bytes(buf[21:])))
    return bytes(buf)


def plain(batch: RecordBatch) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in batch.records()]


# -- the header's layout, in one home ----------------------------------------------------------------


def test_field_offsets_are_kafkas_and_the_peeks_read_what_the_view_parses():
    """Every offset comes from the header's field table; Kafka's DefaultRecordBatch names the same numbers."""
    from compactlog.records.batch import FIELD_OFFSETS, HEADER_SIZE, batch_size_at, producer_id_at

    assert FIELD_OFFSETS == {
        "baseOffset": 0, "batchLength": 8, "partitionLeaderEpoch": 12, "magic": 16, "crc": 17, "attributes": 21,
        "lastOffsetDelta": 23, "baseTimestamp": 27, "maxTimestamp": 35, "producerId": 43, "producerEpoch": 51,
        "baseSequence": 53, "recordsCount": 57,
    }
    assert HEADER_SIZE == 61
    raw = b"pad" + build_batch([b"k"], [b"v"], info=BatchInfo(producer_id=2**40 + 7, producer_epoch=3, base_sequence=11))
    b = RecordBatch(raw[3:])
    assert batch_size_at(raw, 3) == b.size == len(raw) - 3
    assert producer_id_at(raw, 3) == b.producer_id == 2**40 + 7
    assert producer_id_at(GOLDEN) == -1 and batch_size_at(GOLDEN[:12]) == len(GOLDEN)


def test_no_module_reads_the_producer_fields_by_hand():
    """The producer id, epoch and sequence are read through the header view or ``producer_id_at``, never
    by slicing their byte numbers (which once lived in three places)."""
    import re
    from pathlib import Path

    import compactlog

    by_hand = re.compile(r"\[(43|51|53|57):|slice\((43|51|53|57)\b")
    src = Path(compactlog.__file__).parent
    found = [f"{path.relative_to(src)}:{i}" for path in src.rglob("*.py")
             for i, line in enumerate(path.read_text().splitlines(), 1) if by_hand.search(line)]
    assert found == []


# -- golden vector ---------------------------------------------------------------------------------


def test_golden_vector_is_built_byte_for_byte():
    assert build_batch([b"key1", b"key2"], [b"value1", b"value2"], [283843, 1234]) == GOLDEN
    assert len(GOLDEN) == 97
    assert google_crc32c.value(GOLDEN[21:]) == GOLDEN_CRC == struct.unpack_from(">I", GOLDEN, 17)[0]


def test_golden_vector_parses():
    b = RecordBatch(GOLDEN)
    b.ensure_valid()
    assert b.is_valid()
    assert (b.base_offset, b.batch_length, b.partition_leader_epoch, b.magic, b.crc) == (0, 85, -1, 2, GOLDEN_CRC)
    assert (b.attributes, b.last_offset_delta, b.base_timestamp, b.max_timestamp) == (0, 1, 283843, 283843)
    assert (b.producer_id, b.producer_epoch, b.base_sequence, b.record_count) == (-1, -1, -1, 2)
    assert (b.size, b.last_offset, b.next_offset, b.codec, b.timestamp_type) == (97, 1, 2, Codec.NONE, CREATE_TIME)
    assert not (b.is_transactional or b.is_control or b.has_delete_horizon)
    records = b.records("t", 3)
    assert [(r.topic, r.partition, r.timestamp_type) for r in records] == [("t", 3, CREATE_TIME)] * 2
    assert plain(b) == [(0, 283843, b"key1", b"value1", ()), (1, 1234, b"key2", b"value2", ())]


# -- header fields ---------------------------------------------------------------------------------

INFOS = {
    "plain": BatchInfo(),
    "idempotent": BatchInfo(base_offset=2**40, producer_id=2**50, producer_epoch=32767, base_sequence=2**31 - 2,
                            partition_leader_epoch=2**31 - 1),
    "transactional": BatchInfo(base_offset=17, producer_id=9, producer_epoch=2, base_sequence=5,
                               partition_leader_epoch=3, is_transactional=True),
    "control": BatchInfo(base_offset=300, producer_id=9, producer_epoch=2, base_sequence=-1,
                         partition_leader_epoch=0, is_transactional=True, is_control=True),
}


@codec_ids
@pytest.mark.parametrize("name", list(INFOS))
def test_header_fields_round_trip(codec, name):
    info = INFOS[name]
    raw = build_batch([b"a", None, b"c"], [b"1", b"2", None], [10, 30, 20], codec=codec, info=info,
                      headers=[[("h", b"v")], [], [("n", None)]])
    b = RecordBatch(raw)
    b.ensure_valid()
    assert b.size == len(raw) and b.magic == 2 and b.codec is codec and b.record_count == 3
    assert (b.base_offset, b.last_offset_delta, b.last_offset, b.next_offset) == (
        info.base_offset, 2, info.base_offset + 2, info.base_offset + 3)
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (info.producer_id, info.producer_epoch, info.base_sequence)
    assert b.partition_leader_epoch == info.partition_leader_epoch
    assert (b.is_transactional, b.is_control) == (info.is_transactional, info.is_control)
    assert b.attributes == int(codec) | (0x10 if info.is_transactional else 0) | (0x20 if info.is_control else 0)
    assert (b.base_timestamp, b.max_timestamp, b.first_timestamp) == (10, 30, 10)
    assert b.timestamp_type == CREATE_TIME and not b.has_delete_horizon and b.delete_horizon_ms is None
    o = info.base_offset
    assert plain(b) == [(o, 10, b"a", b"1", (("h", b"v"),)), (o + 1, 30, None, b"2", ()), (o + 2, 20, b"c", None, (("n", None),))]


def test_control_marker_batch():
    # An end-transaction marker: key = version 0 + type 1 (COMMIT), value = version 0 + coordinator epoch.
    key, value = struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 12)
    info = BatchInfo(base_offset=55, producer_id=4, producer_epoch=0, is_transactional=True, is_control=True)
    b = RecordBatch(build_batch([key], [value], [1000], info=info))
    assert b.is_control and b.is_transactional and b.is_valid()
    assert plain(b) == [(55, 1000, key, value, ())]


@codec_ids
def test_log_append_time_batches_read_the_max_timestamp(codec):
    info = BatchInfo(timestamp_type=LOG_APPEND_TIME)
    b = RecordBatch(build_batch([b"a", b"b"], [b"1", b"2"], [10, 20], info=info, codec=codec, max_timestamp=999))
    assert b.timestamp_type == LOG_APPEND_TIME and b.attributes & 0x08 and b.max_timestamp == 999
    assert [(r.timestamp, r.timestamp_type) for r in b.records()] == [(999, LOG_APPEND_TIME)] * 2
    # Without an override the max timestamp is the records' max, and still what every record reads.
    b = RecordBatch(build_batch([b"a", b"b"], [b"1", b"2"], [50, 20], info=info, codec=codec))
    assert [r.timestamp for r in b.records()] == [50, 50]


def test_create_time_records_keep_their_own_timestamps():
    b = RecordBatch(build_batch([b"a", b"b", b"c"], [b"1", b"2", b"3"], [-1, 5, 3]))
    assert [(r.timestamp, r.timestamp_type) for r in b.records()] == [(-1, 0), (5, 0), (3, 0)]
    assert (b.base_timestamp, b.max_timestamp) == (-1, 5)


@codec_ids
@pytest.mark.parametrize("horizon", [5000, 3, 0])
def test_delete_horizon_keeps_absolute_record_timestamps(codec, horizon):
    b = RecordBatch(build_batch([b"a", b"b"], [None, b"2"], [10, 20], delete_horizon=horizon, codec=codec))
    assert b.is_valid()
    assert b.has_delete_horizon and b.attributes & 0x40 and b.delete_horizon_ms == horizon
    assert b.base_timestamp == horizon and b.max_timestamp == 20
    assert [r.timestamp for r in b.records()] == [10, 20]
    assert b.first_timestamp == 10
    lo_hi = b.summarize()[1:3]
    assert lo_hi == (10, 20)


@codec_ids
def test_offset_gaps_and_kept_extent(codec):
    info = BatchInfo(base_offset=10)
    b = RecordBatch(build_batch([b"a", b"c", b"d"], [b"1", b"3", b"4"], [1, 1, 1], offset_deltas=[1, 3, 7],
                                info=info, codec=codec))
    assert [r.offset for r in b.records()] == [11, 13, 17]
    assert (b.last_offset_delta, b.last_offset, b.next_offset, b.record_count) == (7, 17, 18, 3)
    # A cleaned batch keeps its original extent even when its last record is gone.
    b = RecordBatch(build_batch([b"a", b"c"], [b"1", b"3"], [1, 1], offset_deltas=[0, 2], last_offset_delta=9,
                                info=info, codec=codec))
    assert [r.offset for r in b.records()] == [10, 12]
    assert (b.last_offset_delta, b.last_offset, b.next_offset, b.record_count) == (9, 19, 20, 2)
    assert b.summarize()[3] is False  # deltas are not 0..n-1


# -- empty batches ---------------------------------------------------------------------------------


@codec_ids
@pytest.mark.parametrize("ts_type", [CREATE_TIME, LOG_APPEND_TIME])
def test_empty_batch_keeps_what_kafka_keeps(codec, ts_type):
    info = BatchInfo(base_offset=50, timestamp_type=ts_type, producer_id=4, producer_epoch=1, base_sequence=9,
                     partition_leader_epoch=2, is_transactional=True, is_control=True)
    src = RecordBatch(build_batch([b"a", b"b", b"c"], [b"1", None, b"3"], [7, 8, 6], codec=codec, info=info,
                                  offset_deltas=[0, 1, 4], last_offset_delta=6, delete_horizon=100_000))
    raw = build_empty_batch(src)
    assert len(raw) == 61
    e = RecordBatch(raw)
    e.ensure_valid()
    assert (e.size, e.batch_length, e.record_count, e.codec) == (61, 49, 0, Codec.NONE)
    assert (e.base_offset, e.last_offset_delta, e.last_offset) == (50, 6, 56)
    assert (e.base_timestamp, e.max_timestamp) == (-1, src.max_timestamp)
    assert (e.producer_id, e.producer_epoch, e.base_sequence, e.partition_leader_epoch) == (4, 1, 9, 2)
    assert e.is_transactional and e.is_control and e.timestamp_type == ts_type
    assert not e.has_delete_horizon
    assert e.attributes == src.attributes & 0x38
    assert e.records() == [] and e.scan()[1].shape[0] == 0


def test_build_batch_without_records_is_the_61_byte_batch():
    raw = build_batch([], [], [], codec=Codec.GZIP, info=BatchInfo(base_offset=8), last_offset_delta=3, max_timestamp=77)
    b = RecordBatch(raw)
    assert len(raw) == 61 and b.is_valid() and b.codec is Codec.NONE
    assert (b.base_offset, b.last_offset, b.base_timestamp, b.max_timestamp, b.record_count) == (8, 11, -1, 77, 0)


# -- patch_header ----------------------------------------------------------------------------------

PREFIX = b"\xaa" * 13  # some other bytes in front of the patched batch, to prove position is honoured


def _patch_target(codec=Codec.GZIP, ts_type=CREATE_TIME):
    raw = build_batch([b"a", b"b", b"c"], [b"1", b"2", b"3"], [5, 9, 6], codec=codec,
                      info=BatchInfo(timestamp_type=ts_type, producer_id=3, producer_epoch=0, base_sequence=0))
    return raw, bytearray(PREFIX + raw + GOLDEN)


@codec_ids
def test_patch_header_assigns_offsets_in_place(codec):
    raw, buf = _patch_target(codec)
    p = len(PREFIX)
    patch_header(buf, p, base_offset=1000, partition_leader_epoch=4)
    assert buf[:p] == PREFIX and buf[p + len(raw):] == GOLDEN
    out = bytes(buf[p : p + len(raw)])
    # Only baseOffset and partitionLeaderEpoch changed: length, magic, CRC, attributes and records are untouched.
    assert out[8:12] == raw[8:12] and out[16:] == raw[16:]
    b = RecordBatch(out)
    b.ensure_valid()
    assert (b.base_offset, b.partition_leader_epoch, b.crc) == (1000, 4, RecordBatch(raw).crc)
    assert [r.offset for r in b.records()] == [1000, 1001, 1002]


def test_patch_header_leaves_the_crc_alone_when_nothing_it_covers_changes():
    raw, buf = _patch_target()
    p = len(PREFIX)
    buf[p + len(raw) - 1] ^= 0x01  # corrupt the records: an in-place patch must not make this look valid
    patch_header(buf, p, base_offset=7, partition_leader_epoch=1, max_timestamp=9)  # 9 is already the max
    b = RecordBatch(bytes(buf[p : p + len(raw)]))
    assert b.crc == RecordBatch(raw).crc and not b.is_valid()


@codec_ids
def test_patch_header_max_timestamp_recomputes_the_crc(codec):
    raw, buf = _patch_target(codec)
    p = len(PREFIX)
    patch_header(buf, p, base_offset=20, max_timestamp=12345)
    out = bytes(buf[p : p + len(raw)])
    b = RecordBatch(out)
    b.ensure_valid()
    assert b.crc != RecordBatch(raw).crc and b.max_timestamp == 12345 and b.attributes == RecordBatch(raw).attributes
    assert out[61:] == raw[61:] and out[23:35] == raw[23:35] and out[43:61] == raw[43:61]
    assert [(r.offset, r.timestamp) for r in b.records()] == [(20, 5), (21, 9), (22, 6)]
    assert buf[:p] == PREFIX and buf[p + len(raw):] == GOLDEN


@codec_ids
def test_patch_header_log_append_time(codec):
    raw, buf = _patch_target(codec)
    p = len(PREFIX)
    patch_header(buf, p, base_offset=0, max_timestamp=77, log_append_time=True)
    out = bytes(buf[p : p + len(raw)])
    b = RecordBatch(out)
    b.ensure_valid()
    assert b.timestamp_type == LOG_APPEND_TIME and b.attributes == int(codec) | 0x08 and b.max_timestamp == 77
    assert out[61:] == raw[61:]
    assert {r.timestamp for r in b.records()} == {77}


def test_patch_header_log_append_time_already_set_keeps_the_crc():
    raw, buf = _patch_target(ts_type=LOG_APPEND_TIME)
    p = len(PREFIX)
    buf[p + 70] ^= 0x01  # records corrupted; nothing covered by the CRC is patched, so it must stay wrong
    patch_header(buf, p, base_offset=3, max_timestamp=9, log_append_time=True)
    assert not RecordBatch(bytes(buf[p : p + len(raw)])).is_valid()


@codec_ids
def test_patch_header_on_a_detached_header(codec):
    """The validator patches only the 61-byte header and passes the records for the CRC (``crc_of``)."""
    raw, _ = _patch_target(codec)
    full = bytearray(raw)
    patch_header(full, 0, base_offset=40, partition_leader_epoch=2, max_timestamp=50, log_append_time=True)
    header = bytearray(raw[:61])
    patch_header(header, 0, base_offset=40, partition_leader_epoch=2, max_timestamp=50, log_append_time=True,
                 crc_of=memoryview(raw)[21:])
    assert bytes(header) + raw[61:] == bytes(full)
    RecordBatch(bytes(full)).ensure_valid()


# -- iter_batches ----------------------------------------------------------------------------------


def _log() -> tuple[bytes, list[bytes]]:
    batches = [
        GOLDEN,
        build_batch([b"x"] * 3, [b"y" * 100] * 3, [1, 2, 3], codec=Codec.ZSTD, info=BatchInfo(base_offset=2)),
        build_empty_batch(RecordBatch(build_batch([b"k"], [b"v"], [4], info=BatchInfo(base_offset=5)))),
        build_batch([b"z"], [None], [5], codec=Codec.SNAPPY, info=BatchInfo(base_offset=6)),
    ]
    return b"".join(batches), batches


def test_iter_batches_yields_every_whole_batch():
    log, batches = _log()
    got = list(iter_batches(log))
    positions = [0]
    for b in batches[:-1]:
        positions.append(positions[-1] + len(b))
    assert [p for p, _ in got] == positions
    assert [bytes(b.buffer) for _, b in got] == batches
    assert [b.base_offset for _, b in got] == [0, 2, 5, 6]
    # Starting mid-log and stopping at a batch boundary.
    assert [p for p, _ in iter_batches(log, positions[1], positions[3])] == positions[1:3]
    # An end past the buffer is the buffer's end.
    assert [p for p, _ in iter_batches(log, 0, len(log) + 1000)] == positions


@pytest.mark.parametrize("tail", [1, 11, 12, 16, 17, 60, 61, 96])
def test_iter_batches_stops_quietly_at_a_partial_tail(tail):
    log, batches = _log()
    got = list(iter_batches(log + GOLDEN[:tail]))
    assert [bytes(b.buffer) for _, b in got] == batches
    # The same with an explicit end cutting the last whole batch.
    got = list(iter_batches(log, 0, len(log) - len(batches[-1]) + min(tail, len(batches[-1]) - 1)))
    assert [bytes(b.buffer) for _, b in got] == batches[:-1]


@pytest.mark.parametrize("length", [-1, 0, 14, 48, -(2**31)])
def test_iter_batches_rejects_an_impossible_length(length):
    bad = bytearray(GOLDEN)
    struct.pack_into(">i", bad, 8, length)
    log = GOLDEN + bytes(bad)
    it = iter_batches(log)
    assert next(it)[0] == 0  # the good batch before it is still served
    with pytest.raises(CorruptRecordError, match=f"position 97 has an impossible length {length}"):
        next(it)


def test_iter_batches_accepts_the_minimum_length():
    empty = build_empty_batch(RecordBatch(GOLDEN))
    assert struct.unpack_from(">i", empty, 8)[0] == 49
    assert [b.record_count for _, b in iter_batches(empty + empty)] == [0, 0]


# -- validation ------------------------------------------------------------------------------------

VICTIM = build_batch([b"key", None, b"k3"], [b"value", b"v2", None], [1_700_000_000_000, 1_700_000_000_005, 1],
                     headers=[[("trace", b"abc")], [], []], info=BatchInfo(base_offset=4242))
VICTIM_CRC = RecordBatch(VICTIM).crc


@pytest.mark.parametrize("pos", range(21, len(VICTIM)))
def test_any_flipped_byte_from_the_attributes_on_is_caught(pos):
    buf = bytearray(VICTIM)
    buf[pos] ^= 0x01
    computed = google_crc32c.value(bytes(buf[21:]))
    b = RecordBatch(bytes(buf))
    assert not b.is_valid()
    with pytest.raises(CorruptRecordError) as info:
        b.ensure_valid()
    msg = str(info.value)
    assert "offset 4242" in msg and f"stored crc = {VICTIM_CRC}, computed crc = {computed}" in msg


@pytest.mark.parametrize("pos", list(range(0, 8)) + list(range(12, 16)))
def test_base_offset_and_leader_epoch_are_outside_the_crc(pos):
    buf = bytearray(VICTIM)
    buf[pos] ^= 0xFF
    b = RecordBatch(bytes(buf))
    b.ensure_valid()
    assert b.is_valid() and b.crc == VICTIM_CRC


def test_flipping_the_stored_crc_is_caught():
    buf = bytearray(VICTIM)
    buf[18] ^= 0x10
    with pytest.raises(CorruptRecordError, match=f"computed crc = {VICTIM_CRC}"):
        RecordBatch(bytes(buf)).ensure_valid()


@pytest.mark.parametrize("cut", [61, 62, 80, len(VICTIM) - 1])
def test_truncated_batch(cut):
    b = RecordBatch(VICTIM[:cut])
    assert not b.is_valid()
    with pytest.raises(CorruptRecordError, match=f"offset 4242 declares {len(VICTIM)} bytes but only {cut}"):
        b.ensure_valid()
    for read in (b.scan, b.records, b.summarize):
        with pytest.raises(CorruptRecordError, match="offset 4242"):
            read()


@pytest.mark.parametrize("cut", [0, 17, 60])
def test_shorter_than_a_header(cut):
    with pytest.raises(CorruptRecordError, match="shorter than the 61-byte header"):
        RecordBatch(VICTIM[:cut])


def test_declared_length_below_the_header():
    buf = bytearray(VICTIM)
    struct.pack_into(">i", buf, 8, 40)
    b = RecordBatch(bytes(buf))
    assert not b.is_valid()
    with pytest.raises(CorruptRecordError, match="offset 4242 is 52 bytes, less than the 61-byte header"):
        b.ensure_valid()


@pytest.mark.parametrize("magic", [0, 1, 3, -1])
def test_bad_magic(magic):
    buf = bytearray(VICTIM)
    struct.pack_into(">b", buf, 16, magic)
    with pytest.raises(CorruptRecordError, match=f"magic {magic} at offset 4242"):
        RecordBatch(bytes(buf)).ensure_valid()


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec_id(codec_id):
    buf = bytearray(VICTIM)
    struct.pack_into(">h", buf, 21, codec_id)
    b = RecordBatch(with_crc(buf))
    b.ensure_valid()  # the CRC is right; the records cannot be read
    for read in (lambda: b.codec, b.payload, b.scan, b.records, b.summarize):
        with pytest.raises(CorruptRecordError, match=f"offset 4242: Unknown compression type id: {codec_id}"):
            read()


@pytest.mark.parametrize("count, why", [
    (4, "premature EOF"), (2, "still remaining"), (0, "still remaining"), (-1, "invalid record count -1"),
    (2**31 - 1, "premature EOF"),
])
@codec_ids
def test_record_count_must_match_the_records(codec, count, why):
    raw = build_batch([b"key", None, b"k3"], [b"value", b"v2", None], [1, 2, 3], codec=codec, info=BatchInfo(base_offset=4242))
    buf = bytearray(raw)
    struct.pack_into(">i", buf, 57, count)
    b = RecordBatch(with_crc(buf))
    b.ensure_valid()
    for read in (b.scan, b.records, b.summarize):
        with pytest.raises(CorruptRecordError, match=f"offset 4242: .*{why}"):
            read()


@pytest.mark.parametrize("codec", [c for c in CODECS if c is not Codec.NONE], ids=lambda c: c.config_name)
def test_undecodable_compressed_records_are_corrupt(codec):
    raw = build_batch([b"key"] * 5, [b"value" * 50] * 5, [1] * 5, codec=codec)
    buf = bytearray(raw[:61] + b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x05junk!")
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    b = RecordBatch(with_crc(buf))
    b.ensure_valid()
    for read in (b.scan, b.records):
        with pytest.raises(CorruptRecordError):
            read()


def test_record_length_mismatch_is_corrupt():
    buf = bytearray(GOLDEN)
    assert buf[61] == 0x20  # first record's length varint: 16
    buf[61] = 0x22  # claims 17
    b = RecordBatch(with_crc(buf))
    with pytest.raises(CorruptRecordError, match="offset 0"):
        b.records()


# -- bounded decompression -------------------------------------------------------------------------

BIG = [b"value %06d " % i * 20 for i in range(200)]  # about 48 KB of records, compressible


def _big(codec: Codec) -> bytes:
    return build_batch([b"k%d" % i for i in range(200)], BIG, [7] * 200, codec=codec, info=BatchInfo(base_offset=4242))


@pytest.mark.parametrize("codec", [c for c in CODECS if c is not Codec.NONE], ids=lambda c: c.config_name)
def test_every_reader_bounds_what_the_records_decompress_to(codec):
    b = RecordBatch(_big(codec))
    size = len(b.payload())
    assert size > 40_000
    assert len(b.payload(max_size=size)) == size and len(b.records(max_size=size)) == 200
    assert b.summarize(max_size=size).null_keys == 0 and len(b.scan(max_size=size)[1]) == 200
    assert len(Chunk.scan([b], max_size=size).cols) == 200
    message = f"^batch at offset 4242: records decompress to more than {size - 1} bytes \\(the limit for one batch\\)$"
    for read in (b.payload, b.scan, b.summarize, lambda max_size: b.records("t", 0, max_size),
                 lambda max_size: Chunk.scan([b], max_size=max_size)):
        with pytest.raises(CorruptRecordError, match=message):
            read(max_size=size - 1)
    assert len(b.payload()) == size  # None: the default bound


def test_a_chunk_checks_record_counts_before_sizing_its_columns():
    """A count the records cannot hold is refused before anything is allocated for it."""
    import tracemalloc

    for count, why in ((2**31 - 1, "premature EOF: 2147483647 records cannot fit in 48 bytes of records"),
                       (-5, "invalid record count -5")):
        buf = bytearray(VICTIM)
        struct.pack_into(">i", buf, 57, count)
        tracemalloc.start()
        try:
            with pytest.raises(CorruptRecordError, match=f"^batch at offset 4242: {why}$"):
                Chunk.scan([RecordBatch(GOLDEN), RecordBatch(with_crc(buf))], verify=True)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 1_000_000, peak


# -- timestamps outside int64 ------------------------------------------------------------------------

def _with_base_timestamp(raw: bytes, base: int) -> RecordBatch:
    buf = bytearray(raw)
    struct.pack_into(">q", buf, 27, base)
    return RecordBatch(with_crc(buf))


@codec_ids
def test_a_timestamp_outside_int64_is_a_corrupt_batch(codec):
    raw = build_batch([b"a", b"b"], [b"1", b"2"], [0, 100], codec=codec, info=BatchInfo(base_offset=4242))
    high, low = _with_base_timestamp(raw, 2**63 - 50), _with_base_timestamp(raw, -(2**63))
    base = 2**63 - 50
    with pytest.raises(CorruptRecordError, match=f"^batch at offset 4242: base timestamp {base} \\+ timestamp delta 100 "
                                                 "is outside the int64 range$"):
        high.summarize()
    for read in (high.records, lambda: Chunk.scan([RecordBatch(GOLDEN), high]).timestamps()):
        with pytest.raises(CorruptRecordError, match=f"^batch at offset 4242: base timestamp {base} \\+ timestamp delta "
                                                     "100 of record 1 is outside the int64 range$"):
            read()
    # the same deltas from the bottom of the range are fine, and so is the last representable timestamp
    assert [r.timestamp for r in low.records()] == [-(2**63), -(2**63) + 100]
    assert Chunk.scan([low]).timestamps().tolist() == [-(2**63), -(2**63) + 100]
    assert low.summarize()[1:3] == (-(2**63), -(2**63) + 100)
    top = _with_base_timestamp(raw, 2**63 - 101)
    assert top.summarize().max_timestamp == 2**63 - 1 == top.records()[1].timestamp
    assert Chunk.scan([top]).timestamps().tolist() == [2**63 - 101, 2**63 - 1]


def test_a_negative_delta_below_int64_is_corrupt_too():
    raw = build_batch([b"a", b"b"], [b"1", b"2"], [100, 0], info=BatchInfo(base_offset=7))
    b = _with_base_timestamp(raw, -(2**63) + 50)
    with pytest.raises(CorruptRecordError, match="^batch at offset 7: base timestamp .* \\+ timestamp delta -100 is"):
        b.summarize()
    with pytest.raises(CorruptRecordError, match="delta -100 of record 1 is outside the int64 range"):
        b.records()
    with pytest.raises(CorruptRecordError, match="delta -100 of record 1 is outside the int64 range"):
        Chunk.scan([b]).timestamps()


def test_first_timestamp_under_a_delete_horizon_stays_in_int64():
    raw = build_batch([b"a"], [b"1"], [1000], delete_horizon=900, info=BatchInfo(base_offset=3))
    assert RecordBatch(raw).first_timestamp == 1000
    with pytest.raises(CorruptRecordError, match="^batch at offset 3: base timestamp 9223372036854775807 \\+ "
                                                 "timestamp delta 100 is outside the int64 range$"):
        _with_base_timestamp(raw, 2**63 - 1).first_timestamp


def test_log_append_time_batches_add_no_deltas():
    raw = build_batch([b"a", b"b"], [b"1", b"2"], [0, 100], info=BatchInfo(timestamp_type=LOG_APPEND_TIME))
    b = _with_base_timestamp(raw, 2**63 - 50)
    assert [r.timestamp for r in b.records()] == [100, 100]  # maxTimestamp, not base + delta
    assert Chunk.scan([b]).timestamps().tolist() == [100, 100]


# -- header keys -------------------------------------------------------------------------------------

@codec_ids
def test_a_header_key_that_is_not_utf8_is_read_and_counted(codec):
    headers = [[(b"ok", b"1")], [(b"caf\xe9", b"2"), (b"\xed\xa0\x80", None)], [], [("é", b"3")]]
    raw = build_batch([b"a", b"b", b"c", b"d"], [b"1", b"2", b"3", b"4"], [5, 6, 7, 8], headers=headers, codec=codec)
    b = RecordBatch(raw)
    assert b.summarize() == BatchSummary(0, 5, 8, True, 1)
    assert [r.headers for r in b.records()] == [
        (("ok", b"1"),), (("caf\ufffd", b"2"), ("\ufffd\ufffd\ufffd", None)), (), (("é", b"3"),)]


def test_an_append_with_a_header_key_that_is_not_utf8_is_refused():
    from compactlog.errors import InvalidRecordError
    from compactlog.storage.log_config import LogConfig
    from compactlog.storage.validator import validate_and_assign_offsets

    now = 1_700_000_000_000
    good = build_batch([b"a", b"b"], [b"1", b"2"], [now, now], headers=[[("h", b"1")], [("ü", None)]])
    assert validate_and_assign_offsets(good, 0, LogConfig(), now, "t-0").record_count == 2
    bad = build_batch([b"a", b"b", b"c"], [b"1", b"2", b"3"], [now] * 3,
                      headers=[[(b"\xff", b"1")], [("h", None)], [(b"h", None), (b"\xc0\x80", b"")]], codec=Codec.LZ4)
    with pytest.raises(InvalidRecordError) as exc:
        validate_and_assign_offsets(bad, 0, LogConfig(), now, "t-0")
    assert str(exc.value) == ("2 record(s) of the batch in the append to t-0 have a header key that is not valid UTF-8 "
                              "(Kafka header keys are strings)")


# -- where an error happened ------------------------------------------------------------------------

ORIGIN = "t-0/00000000000000000000.log position 4096"
AT = "batch at offset 4242 \\(t-0/00000000000000000000.log position 4096\\)"


def _victim(patch=None, crc=True, **kwargs) -> RecordBatch:
    buf = bytearray(build_batch([b"key", None], [b"value", b"v2"], [1, 2], info=BatchInfo(base_offset=4242), **kwargs))
    if patch:
        patch(buf)
    return RecordBatch(with_crc(buf) if crc else bytes(buf), origin=ORIGIN)


def test_errors_name_the_batch_origin():
    cases = [
        (_victim(lambda b: b.__setitem__(70, b[70] ^ 1), crc=False).ensure_valid,
         f"^{AT} is corrupt \\(stored crc = \\d+, computed crc = \\d+\\)$"),
        (_victim(lambda b: struct.pack_into(">i", b, 8, 40)).ensure_valid, f"^{AT} is 52 bytes, less than the 61-byte header$"),
        (lambda: RecordBatch(_victim().buffer[:-1], origin=ORIGIN).ensure_valid(), f"^{AT} declares \\d+ bytes but only"),
        (_victim(lambda b: struct.pack_into(">b", b, 16, 1)).ensure_valid, f"^{AT}: unsupported batch magic 1 \\(only v2"),
        (lambda: _victim(lambda b: struct.pack_into(">h", b, 21, 6)).codec, f"^{AT}: Unknown compression type id: 6$"),
        (_victim(lambda b: struct.pack_into(">i", b, 57, 9)).records, f"^{AT}: premature EOF: 9 records cannot fit"),
        (_victim(lambda b: struct.pack_into(">i", b, 57, 1)).summarize, f"^{AT}: \\d+ bytes still remaining after 1 records$"),
        (_victim(lambda b: struct.pack_into(">i", b, 57, 3)).scan, f"^{AT}: premature EOF: expected 3 records, found 2$"),
        (lambda: _victim(codec=Codec.GZIP).payload(max_size=3), f"^{AT}: records decompress to more than 3 bytes"),
        (lambda: _victim(lambda b: struct.pack_into(">q", b, 27, 2**63 - 1)).summarize(),
         f"^{AT}: base timestamp 9223372036854775807 \\+ timestamp delta 1 is outside the int64 range$"),
        (lambda: Chunk.scan([RecordBatch(GOLDEN), _victim(lambda b: struct.pack_into(">i", b, 57, 3))]),
         f"^{AT}: premature EOF: expected 3 records, found 2$"),
        (lambda: Chunk.scan([_victim(lambda b: b.__setitem__(70, b[70] ^ 1), crc=False)], verify=True), f"^{AT} is corrupt"),
        (lambda: Chunk.scan([_victim(lambda b: struct.pack_into(">q", b, 27, 2**63 - 1))]).timestamps(),
         f"^{AT}: base timestamp 9223372036854775807 \\+ timestamp delta 1 of record 1 is outside the int64 range$"),
    ]
    for call, message in cases:
        with pytest.raises(CorruptRecordError, match=message):
            call()
    with pytest.raises(CorruptRecordError, match=f"^batch of 60 bytes \\({ORIGIN}\\) is shorter than the 61-byte header$"):
        RecordBatch(VICTIM[:60], origin=ORIGIN)


FAULTS = {  # byte patches of one batch, each a fault the scan must name
    "none": None,
    "crc": lambda b: b.__setitem__(70, b[70] ^ 1),
    "magic": lambda b: struct.pack_into(">b", b, 16, 1),
    "count": lambda b: struct.pack_into(">i", b, 57, 9),
    "count too low": lambda b: struct.pack_into(">i", b, 57, 2),
}


@pytest.mark.parametrize("second", list(FAULTS))
@pytest.mark.parametrize("first", ["none", "count"])
@pytest.mark.parametrize("verify", [True, False])
def test_a_chunk_scanned_where_it_lies_reads_and_fails_as_a_copied_one(first, second, verify):
    """Batches in one buffer (a segment read) are scanned in place; batches in buffers of their own are
    copied together first. Same rows, offsets and timestamps, and the same error for the same damage."""
    raw = [bytearray(build_batch([b"k%d" % i, None, b"k"], [b"v", b"w", None], [i, i + 5, i + 1],
                                 info=BatchInfo(base_offset=10 * i), headers=[[("h", b"1")], [], []]))
           for i in range(3)]
    raw.append(bytearray(build_batch([], [], info=BatchInfo(base_offset=30, is_control=True), last_offset_delta=0)))
    for buf, fault in ((raw[0], first), (raw[1], second)):
        if FAULTS[fault]:
            FAULTS[fault](buf)
            if fault != "crc":
                with_crc(buf)
    log = b"".join(bytes(b) for b in raw)
    in_place = [b for _, b in iter_batches(log)]
    copied = [RecordBatch(bytes(b)) for b in raw]
    outcomes = []
    for batches in (in_place, copied):
        try:
            chunk = Chunk.scan(batches, verify=verify)
        except CorruptRecordError as exc:
            outcomes.append(str(exc))
            continue
        keys = [None if n < 0 else bytes(memoryview(chunk.data)[p : p + n]) for p, n in
                chunk.cols[:, [kernels.C_KEY_POS, kernels.C_KEY_LEN]].tolist()]
        outcomes.append((keys, chunk.offsets.tolist(), chunk.timestamps().tolist(), chunk.rows.tolist()))
    assert outcomes[0] == outcomes[1]
    if first == second == "none":
        assert not isinstance(outcomes[0], str) and len(outcomes[0][0]) == 9
        assert Chunk.scan(in_place).data is log  # nothing was copied


def test_origin_defaults_to_none_and_a_reader_may_set_it_later():
    b = RecordBatch(VICTIM)
    assert b.origin is None and b.where == "batch at offset 4242"
    b.origin = ORIGIN
    assert b.where == f"batch at offset 4242 ({ORIGIN})"
    buf = bytearray(VICTIM)
    struct.pack_into(">i", buf, 57, 9)
    b = RecordBatch(with_crc(buf))
    with pytest.raises(CorruptRecordError, match="^batch at offset 4242: premature EOF"):
        b.records()
    b.origin = ORIGIN
    with pytest.raises(CorruptRecordError, match=f"^{AT}: premature EOF"):
        b.records()


# -- property --------------------------------------------------------------------------------------

timestamps = st.one_of(st.just(-1), st.integers(0, 2**63 - 2))
nullable = st.one_of(st.none(), st.binary(max_size=80))
header = st.tuples(st.text(max_size=12), st.one_of(st.none(), st.binary(max_size=20)))
record = st.tuples(nullable, nullable, timestamps, st.lists(header, max_size=3))


@settings(max_examples=250, deadline=None)
@given(
    records=st.lists(record, min_size=1, max_size=25),
    codec=st.sampled_from(CODECS),
    base_offset=st.integers(0, 2**62),
    gaps=st.lists(st.integers(1, 1000), min_size=25, max_size=25),
    first_delta=st.integers(0, 1000),
    log_append=st.booleans(),
    horizon=st.one_of(st.none(), st.integers(0, 2**62)),
)
def test_records_round_trip(records, codec, base_offset, gaps, first_delta, log_append, horizon):
    n = len(records)
    deltas = [first_delta]
    for g in gaps[: n - 1]:
        deltas.append(deltas[-1] + g)
    keys, values, tss, hdrs = (list(col) for col in zip(*records))
    info = BatchInfo(base_offset=base_offset, timestamp_type=LOG_APPEND_TIME if log_append else CREATE_TIME)
    raw = build_batch(keys, values, tss, headers=hdrs, codec=codec, info=info, offset_deltas=deltas,
                      delete_horizon=horizon)
    b = RecordBatch(raw)
    b.ensure_valid()
    assert (b.codec, b.record_count, b.last_offset, b.max_timestamp) == (codec, n, base_offset + deltas[-1], max(tss))
    assert b.delete_horizon_ms == horizon
    got = b.records()
    assert [r.offset for r in got] == [base_offset + d for d in deltas]
    assert [r.key for r in got] == keys and [r.value for r in got] == values
    assert [list(r.headers) for r in got] == hdrs
    assert [r.timestamp for r in got] == ([max(tss)] * n if log_append else tss)
    summary = b.summarize()
    assert summary.null_keys == keys.count(None) and summary.sequential_offsets == (deltas == list(range(n)))
    assert (summary.min_timestamp, summary.max_timestamp) == (min(tss), max(tss))
    assert summary.invalid_header_keys == 0
    # The scan columns agree with the decoded records.
    assert len(b.scan()[1]) == n


@pytest.mark.parametrize("codec", [Codec.NONE, Codec.LZ4])
def test_a_prechecked_append_gives_what_a_full_one_gives_and_still_checks_the_crc_and_header(codec):
    """A staged batch that passed in its task is appended without walking its records again: the result is
    the full validation's, and a damaged byte or a header rule (here: a batch already holding offsets)
    is still refused."""
    from compactlog.errors import InvalidRecordError
    from compactlog.storage.log_config import LogConfig
    from compactlog.storage.validator import validate_and_assign_offsets

    now = 1_700_000_000_000
    batch = build_batch([b"a", None, b"c"], [b"1", b"2", None], [now - 5, now, now - 9], codec=codec)
    full = validate_and_assign_offsets(batch, 40, LogConfig(), now, "t-0")
    quick = validate_and_assign_offsets(batch, 40, LogConfig(), now, "t-0", prechecked=True)
    assert (quick.first_offset, quick.last_offset, quick.max_timestamp, quick.record_count) == (
        full.first_offset, full.last_offset, full.max_timestamp, full.record_count) == (40, 42, now, 3)
    stored = b"".join(bytes(p) for p in (quick.records if isinstance(quick.records, tuple) else (quick.records,)))
    assert stored == b"".join(bytes(p) for p in (full.records if isinstance(full.records, tuple) else (full.records,)))
    damaged = bytearray(batch)
    damaged[-3] ^= 0x10
    with pytest.raises(CorruptRecordError, match="is corrupt"):
        validate_and_assign_offsets(bytes(damaged), 40, LogConfig(), now, "t-0", prechecked=True)
    moved = bytearray(batch)
    struct.pack_into(">q", moved, 0, 7)  # a base offset other than 0 (outside the CRC)
    with pytest.raises(InvalidRecordError, match="should be 0"):
        validate_and_assign_offsets(bytes(moved), 40, LogConfig(), now, "t-0", prechecked=True)
