"""Kafka's producer state snapshot files: ``<offset, 20 digits>.snapshot`` in a partition directory.

Who uses it: ``producer_recovery.py``, for the log. The idempotent producer state (``producer_state.py``)
survives restarts without reading whole logs: a snapshot is written as a segment rolls and at a clean
close; the newest good one is loaded and the log replayed from its offset; with none usable the state
is rebuilt by scanning the log's tail. Each producer's open transaction (its first offset) and the
coordinator epoch of its last marker are kept in its entry, so a load reopens the transactions open then.

On disk (Kafka's ``ProducerSnapshot`` message, version 1, as ``ProducerStateManager`` writes it), all
big-endian::

    version           int16   1
    crc               uint32  CRC-32C of every byte after this field (the count and the entries)
    entry count       int32   (the message's array length)
    then per producer, 46 bytes:
      producer id               int64
      epoch                     int16
      last sequence             int32   of its last batch; -1 with no batch
      last offset               int64   of its last batch; -1 with no batch
      offset delta              int32   last offset - first offset of that batch
      timestamp                 int64   max timestamp of that batch; -1 (none)
      coordinator epoch         int32   of the last transaction marker; -1 (none)
      current txn first offset  int64   first offset of its open transaction; -1 (none)

As in Kafka, only the producer's last batch is kept (a loaded producer has one batch to compare
retries with, not five). Unlike Kafka, the file is written atomically (a temporary file, fsync, rename,
fsync of the directory), so a crash leaves the old snapshot or the new one, never half of one; and a
snapshot is read with its length checked exactly, so a torn or padded file is named as such before its
CRC is.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from ..errors import CorruptRecordError
from ..records.batch import crc32c
from . import files
from .producer_state import EXPIRATION_MS, SEQUENCES, BatchSeq, ProducerEntry, ProducerStateManager

VERSION = 1  # ProducerSnapshot's only version
HEADER = struct.Struct(">hIi")  # version, crc, entry count
HEADER_SIZE = HEADER.size  # 10
CRC_START = 6  # the CRC covers the file from here (the entry count) to its end
ENTRY = struct.Struct(">qhiqiqiq")
ENTRY_SIZE = ENTRY.size  # 46
NO_VALUE = -1  # Kafka's "none" for the last sequence, offsets, timestamp and coordinator epoch
MAX_SNAPSHOT_BYTES = 1 << 30  # a file claiming more is refused before it is read


class CorruptSnapshotError(CorruptRecordError):
    """A producer snapshot fails its version, length or CRC check; the caller rebuilds from the log."""


@dataclass(frozen=True, slots=True)
class SnapshotEntry:
    """One producer's line of a snapshot (Kafka's ``ProducerSnapshot.ProducerEntry``)."""

    producer_id: int
    epoch: int
    last_sequence: int = NO_VALUE
    last_offset: int = NO_VALUE
    offset_delta: int = 0
    timestamp: int = NO_VALUE
    coordinator_epoch: int = NO_VALUE
    current_txn_first_offset: int = NO_VALUE


def encode(entries: Iterable[SnapshotEntry]) -> bytes:
    """The whole file's bytes, with its CRC."""
    rows = list(entries)
    body = bytearray(HEADER_SIZE + ENTRY_SIZE * len(rows))
    HEADER.pack_into(body, 0, VERSION, 0, len(rows))
    for i, e in enumerate(rows):
        try:
            ENTRY.pack_into(body, HEADER_SIZE + i * ENTRY_SIZE, e.producer_id, e.epoch, e.last_sequence,
                            e.last_offset, e.offset_delta, e.timestamp, e.coordinator_epoch,
                            e.current_txn_first_offset)
        except struct.error:
            raise ValueError(f"producer snapshot entry {e} has a field outside its type's range") from None
    struct.pack_into(">I", body, 2, crc32c(memoryview(body)[CRC_START:]))
    return bytes(body)


def decode(data: bytes, where: str = "producer snapshot") -> list[SnapshotEntry]:
    """The entries of a snapshot's bytes; CorruptSnapshotError naming ``where`` and what is wrong."""
    if len(data) < HEADER_SIZE:
        raise CorruptSnapshotError(f"{where} is {len(data)} bytes, shorter than its {HEADER_SIZE}-byte header")
    version, stored_crc, count = HEADER.unpack_from(data, 0)
    if version != VERSION:
        raise CorruptSnapshotError(f"{where} contained an unknown file version {version} (expected {VERSION})")
    if count < 0:
        raise CorruptSnapshotError(f"{where} has a negative entry count {count}")
    expected = HEADER_SIZE + count * ENTRY_SIZE
    if len(data) != expected:
        raise CorruptSnapshotError(
            f"{where} is {len(data)} bytes, but its header counts {count} entries, which take {expected} bytes"
        )
    computed = crc32c(memoryview(data)[CRC_START:])
    if computed != stored_crc:
        raise CorruptSnapshotError(
            f"{where} is corrupt (CRC is no longer valid). Stored crc: {stored_crc}. Computed crc: {computed}"
        )
    return [SnapshotEntry(*row) for row in ENTRY.iter_unpack(memoryview(data)[HEADER_SIZE:])]


def write_snapshot(path: Path, entries: Iterable[SnapshotEntry], sync_dir: bool = True) -> None:
    """Write ``path`` atomically: ``<name>.tmp``, fsync, rename over ``path``, fsync the directory (unless
    ``sync_dir`` is False: the caller's own fsync of it follows; a rename lost to a crash before that
    leaves the older snapshot and a ``.tmp`` that the next open removes)."""
    path = Path(path)
    data = encode(entries)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        files.write_fully(fd, [data], 0)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    os.replace(tmp, path)
    if sync_dir:
        files.fsync_dir(path.parent)


def read_snapshot(path: Path) -> list[SnapshotEntry]:
    """The entries of the snapshot at ``path``; CorruptSnapshotError (naming the file) if damaged."""
    path = Path(path)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > MAX_SNAPSHOT_BYTES:
            raise CorruptSnapshotError(f"producer snapshot {path} is {size} bytes, more than {MAX_SNAPSHOT_BYTES}")
        data = f.read(MAX_SNAPSHOT_BYTES + 1)
    return decode(data, f"producer snapshot {path}")


def snapshot_offset(path: Path) -> int:
    """The offset a snapshot was taken at, from its name (``00000000000000001234.snapshot`` -> 1234)."""
    return files.base_offset_of(path)


# mapping onto the state kept today ------------------------------------------------------------------
def entries_from_state(state: ProducerStateManager) -> list[SnapshotEntry]:
    """One entry per producer ``state`` knows, by producer id, from its last batch, with its last batch's
    max timestamp, coordinator epoch and open transaction's first offset (-1: none open)."""
    rows = []
    for pid in sorted(state.producers):
        entry = state.producers[pid]
        if entry.batches:
            last = entry.batches[-1]
            rows.append(SnapshotEntry(pid, entry.epoch, last.last_seq, last.last_offset,
                                      last.last_offset - last.first_offset, entry.last_timestamp,
                                      entry.coordinator_epoch, entry.current_txn_first_offset))
        else:
            rows.append(SnapshotEntry(pid, entry.epoch, timestamp=entry.last_timestamp,
                                      coordinator_epoch=entry.coordinator_epoch,
                                      current_txn_first_offset=entry.current_txn_first_offset))
    return rows


def state_from_entries(entries: Iterable[SnapshotEntry], expiration_ms: int = EXPIRATION_MS) -> ProducerStateManager:
    """A ProducerStateManager holding what the entries say: each producer's epoch and last batch (its
    first sequence and offset recovered from the offset delta, sequences wrapping at 2^31 as Kafka's
    do), its timestamp, coordinator epoch and open transaction's first offset. ``loaded`` stays False:
    the caller replays the log from the snapshot's offset first, then drops the expired producers."""
    state = ProducerStateManager(expiration_ms)
    for e in entries:
        entry = state.producers[e.producer_id] = ProducerEntry(e.epoch, last_timestamp=e.timestamp,
                                                               coordinator_epoch=e.coordinator_epoch,
                                                               current_txn_first_offset=e.current_txn_first_offset)
        if e.current_txn_first_offset >= 0:
            state.track_open(e.current_txn_first_offset, e.producer_id)
        if e.last_offset >= 0:
            entry.batches.append(BatchSeq((e.last_sequence - e.offset_delta) % SEQUENCES, e.last_sequence,
                                          e.last_offset - e.offset_delta, e.last_offset))
    return state
