"""Producer state snapshots: Kafka's ``.snapshot`` bytes (ProducerSnapshot v1) written by hand here and
compared byte for byte, atomic writes, every damaged header field named, and the mapping onto the
idempotent producer state kept today."""

from __future__ import annotations

import struct

import google_crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactlog.storage import files
from compactlog.storage.producer_snapshot import (
    HEADER_SIZE,
    CorruptSnapshotError,
    SnapshotEntry,
    decode,
    encode,
    entries_from_state,
    read_snapshot,
    snapshot_offset,
    state_from_entries,
    write_snapshot,
)
from compactlog.storage.producer_state import BatchSeq, ProducerStateManager

ENTRIES = [
    SnapshotEntry(producer_id=1000, epoch=3, last_sequence=41, last_offset=517, offset_delta=9,
                  timestamp=1_700_000_000_123, coordinator_epoch=7, current_txn_first_offset=500),
    SnapshotEntry(producer_id=2001, epoch=0),  # a producer with no batch: Kafka's -1s and delta 0
]


def _kafka_bytes(entries: list[SnapshotEntry]) -> bytes:
    """The file as Kafka's ProducerStateManager.writeSnapshot lays it out, built field by field."""
    body = struct.pack(">i", len(entries))  # ProducerEntries: int32 array length (not flexible)
    for e in entries:
        body += struct.pack(">q", e.producer_id)  # ProducerId int64
        body += struct.pack(">h", e.epoch)  # Epoch int16
        body += struct.pack(">i", e.last_sequence)  # LastSequence int32
        body += struct.pack(">q", e.last_offset)  # LastOffset int64
        body += struct.pack(">i", e.offset_delta)  # OffsetDelta int32
        body += struct.pack(">q", e.timestamp)  # Timestamp int64
        body += struct.pack(">i", e.coordinator_epoch)  # CoordinatorEpoch int32
        body += struct.pack(">q", e.current_txn_first_offset)  # CurrentTxnFirstOffset int64
    crc = google_crc32c.value(body)  # CRC-32C of everything after the crc field
    return struct.pack(">h", 1) + struct.pack(">I", crc) + body  # version int16 = 1, Crc uint32


def test_file_name_is_the_offset_in_20_digits(tmp_path):
    path = files.producer_snapshot_file(tmp_path, 517)
    assert path.name == "00000000000000000517.snapshot"
    assert snapshot_offset(path) == 517


def test_bytes_are_kafkas_layout(tmp_path):
    expected = _kafka_bytes(ENTRIES)
    assert len(expected) == 2 + 4 + 4 + 2 * 46
    assert encode(ENTRIES) == expected
    path = files.producer_snapshot_file(tmp_path, 518)
    write_snapshot(path, ENTRIES)
    assert path.read_bytes() == expected
    assert read_snapshot(path) == ENTRIES


def test_a_snapshot_written_by_hand_is_read(tmp_path):
    path = files.producer_snapshot_file(tmp_path, 9)
    path.write_bytes(_kafka_bytes(ENTRIES[::-1]))
    assert read_snapshot(path) == ENTRIES[::-1]


def test_empty_snapshot(tmp_path):
    path = files.producer_snapshot_file(tmp_path, 0)
    write_snapshot(path, [])
    assert path.read_bytes() == _kafka_bytes([])
    assert len(path.read_bytes()) == HEADER_SIZE
    assert read_snapshot(path) == []


def test_write_replaces_atomically_and_leaves_no_temporary_file(tmp_path):
    path = files.producer_snapshot_file(tmp_path, 5)
    write_snapshot(path, ENTRIES)
    write_snapshot(path, ENTRIES[:1])
    assert read_snapshot(path) == ENTRIES[:1]
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_a_field_out_of_range_is_refused_before_anything_is_written(tmp_path):
    path = files.producer_snapshot_file(tmp_path, 5)
    with pytest.raises(ValueError, match="outside its type's range"):
        write_snapshot(path, [SnapshotEntry(1, epoch=40000)])  # epoch is an int16
    assert list(tmp_path.iterdir()) == []


# --- damage ---------------------------------------------------------------------------------------
def _flip(data: bytes, position: int, mask: int = 0x01) -> bytes:
    out = bytearray(data)
    out[position] ^= mask
    return bytes(out)


@pytest.mark.parametrize("position", range(len(_kafka_bytes(ENTRIES))))
def test_any_flipped_byte_is_caught(position):
    with pytest.raises(CorruptSnapshotError):
        decode(_flip(_kafka_bytes(ENTRIES), position))


@pytest.mark.parametrize("byte,mask", [(0, 0x80), (1, 0x01), (1, 0x02)])
def test_a_damaged_version_is_named(byte, mask):
    bad = _flip(_kafka_bytes(ENTRIES), byte, mask)
    version = struct.unpack(">h", bad[:2])[0]
    with pytest.raises(CorruptSnapshotError) as e:
        decode(bad, "producer snapshot x.snapshot")
    assert str(e.value) == f"producer snapshot x.snapshot contained an unknown file version {version} (expected 1)"


@pytest.mark.parametrize("byte", [2, 3, 4, 5])
def test_a_damaged_crc_is_named_with_both_values(byte):
    good = _kafka_bytes(ENTRIES)
    bad = _flip(good, byte)
    with pytest.raises(CorruptSnapshotError) as e:
        decode(bad)
    stored = struct.unpack(">I", bad[2:6])[0]
    computed = struct.unpack(">I", good[2:6])[0]
    assert str(e.value) == (
        f"producer snapshot is corrupt (CRC is no longer valid). Stored crc: {stored}. Computed crc: {computed}"
    )


@pytest.mark.parametrize("count,message", [
    (3, "is 102 bytes, but its header counts 3 entries, which take 148 bytes"),
    (1, "is 102 bytes, but its header counts 1 entries, which take 56 bytes"),
    (-1, "has a negative entry count -1"),
    (0x7FFFFFFF, "is 102 bytes, but its header counts 2147483647 entries, which take 98784247772 bytes"),
])
def test_a_damaged_entry_count_is_named(count, message):
    bad = bytearray(_kafka_bytes(ENTRIES))
    struct.pack_into(">i", bad, 6, count)
    with pytest.raises(CorruptSnapshotError) as e:
        decode(bytes(bad))
    assert str(e.value) == f"producer snapshot {message}"


@pytest.mark.parametrize("size", [0, 1, 9, 10, 55, 101])
def test_a_torn_file_is_named(tmp_path, size):
    path = files.producer_snapshot_file(tmp_path, 1)
    path.write_bytes(_kafka_bytes(ENTRIES)[:size])
    with pytest.raises(CorruptSnapshotError) as e:
        read_snapshot(path)
    assert str(path) in str(e.value)
    if size < 10:
        assert f"is {size} bytes, shorter than its 10-byte header" in str(e.value)
    else:
        assert f"is {size} bytes, but its header counts 2 entries, which take 102 bytes" in str(e.value)


def test_trailing_bytes_are_named(tmp_path):
    path = files.producer_snapshot_file(tmp_path, 1)
    path.write_bytes(_kafka_bytes(ENTRIES) + b"\x00")
    with pytest.raises(CorruptSnapshotError, match="is 103 bytes, but its header counts 2 entries"):
        read_snapshot(path)


# --- mapping onto the state kept today ------------------------------------------------------------
def test_state_round_trip_keeps_each_producers_epoch_and_last_batch():
    state = ProducerStateManager()
    for i in range(7):  # more than the five batches kept: only the last goes into the snapshot
        state.record(10, 2, 5 * i, 5 * i + 4, 100 + 5 * i, 104 + 5 * i)
    state.record(11, 0, 2147483645, 3, 200, 206)  # the sequence wraps inside the batch
    state.producers[12] = type(state.producers[10])(epoch=4)  # an epoch with no batch yet
    entries = entries_from_state(state)
    assert entries == [
        SnapshotEntry(10, 2, last_sequence=34, last_offset=134, offset_delta=4),
        SnapshotEntry(11, 0, last_sequence=3, last_offset=206, offset_delta=6),
        SnapshotEntry(12, 4),
    ]
    loaded = state_from_entries(decode(encode(entries)))
    assert loaded.loaded is False
    assert {pid: (e.epoch, list(e.batches)) for pid, e in loaded.producers.items()} == {
        10: (2, [BatchSeq(30, 34, 130, 134)]),
        11: (0, [BatchSeq(2147483645, 3, 200, 206)]),
        12: (4, []),
    }
    # the loaded state judges retries and the next batch as the original does
    assert loaded.duplicate_of(10, 2, 30, 34, "t-0") == BatchSeq(30, 34, 130, 134)
    assert loaded.duplicate_of(10, 2, 35, 39, "t-0") is None
    assert loaded.duplicate_of(11, 0, 4, 4, "t-0") is None


I64, I32, I16 = st.integers(-(2**63), 2**63 - 1), st.integers(-(2**31), 2**31 - 1), st.integers(-(2**15), 2**15 - 1)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.builds(SnapshotEntry, I64, I16, I32, I64, I32, I64, I32, I64), max_size=20))
def test_any_entries_round_trip_in_kafkas_bytes(entries):
    data = encode(entries)
    assert data == _kafka_bytes(entries)
    assert decode(data) == entries


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2), st.integers(0, 2**31 - 1), st.integers(0, 20)),
                max_size=30))
def test_any_state_keeps_each_producers_epoch_and_last_batch(batches):
    state, offset = ProducerStateManager(), 0
    for pid, epoch, first_seq, delta in batches:
        state.record(pid, epoch, first_seq, (first_seq + delta) % 2**31, offset, offset + delta)
        offset += delta + 1
    loaded = state_from_entries(decode(encode(entries_from_state(state))))
    assert {pid: (e.epoch, list(e.batches)[-1:]) for pid, e in state.producers.items()} == \
        {pid: (e.epoch, list(e.batches)) for pid, e in loaded.producers.items()}
