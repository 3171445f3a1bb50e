"""The latest record of one key through the compacted view, found newest first, by columns, within a bound.

The compacted view of a partition (docs/compaction.md) is the side log below the published horizon H
plus the live log from H on. The latest record of a key is therefore the last one in the live tail
``[H, end)`` if it has one, else the one record the side log keeps for it (a side log holds each key
once and never a tombstone). Without a published compaction the view is the whole live log.

Each part is searched from its end backwards in windows of offsets, so a key written recently is found
after reading little. A window's batches are scanned into a column table (``records.columns.Chunk``)
and keys are matched with numpy over that table: no Python work per record. At most ``SCAN_BYTES`` of
stored batches are read; a search that reaches the bound says how far back it got.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ..compaction.state import CompactionState, read_state, side_log_dir
from ..records import kernels
from ..records.batch import Record, RecordBatch
from ..records.columns import Chunk, chunks
from ..storage.reader import PartitionView
from ..storage.snapshot import PartitionSnapshot

SCAN_BYTES = 256 * 1024 * 1024  # stored bytes one lookup may read
CHUNK_BYTES = 4 * 1024 * 1024  # batches scanned into one column table
FIRST_WINDOW = 1024  # offsets in the first (newest) window; later windows grow while they are light
MATCH_CELLS = 1 << 22  # key bytes compared per numpy step (bounds the comparison's memory)
LIVE, COMPACTED = "live log", "compacted view"


@dataclass(frozen=True)
class Lookup:
    """What a lookup found in one partition, and what it read to find it."""

    partition: int
    record: Record | None  # the key's latest record (its value None: a tombstone), or None: not found
    source: str | None  # LIVE or COMPACTED: where the record was
    state: CompactionState | None  # the published compaction, or None: the live log was read
    scanned_bytes: int
    searched_from: int  # every offset of the view from here to the end was searched
    complete: bool  # False: the bound stopped the search before the start of the view
    live_start: int  # the live log's start offset (browsing reads the live log from here)

    @property
    def deleted(self) -> bool:
        return self.record is not None and self.record.value is None


class Budget:
    """Stored bytes a lookup may still read."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.spent = 0

    def take(self, n: int) -> bool:
        """Spend ``n`` bytes, unless that would pass the limit (the first read is always allowed)."""
        if self.spent and self.spent + n > self.limit:
            return False
        self.spent += n
        return True


def rows_with_key(data, cols: np.ndarray, key: bytes) -> np.ndarray:
    """Rows of a column table whose key is exactly ``key``, in row order: lengths first, then the
    bytes of the rows of that length, compared in blocks of at most ``MATCH_CELLS`` bytes."""
    n = len(key)
    rows = np.flatnonzero(cols[:, kernels.C_KEY_LEN] == n)
    if rows.size == 0 or n == 0:
        return rows
    buf = np.frombuffer(data, dtype=np.uint8)
    want = np.frombuffer(key, dtype=np.uint8)
    pos = cols[rows, kernels.C_KEY_POS]
    first = buf[pos] == want[0]  # one byte first: most rows of the right length go here
    rows, pos = rows[first], pos[first]
    if n == 1 or rows.size == 0:
        return rows
    step = max(1, MATCH_CELLS // n)
    span = np.arange(n, dtype=np.int64)
    keep = [rows[i : i + step][(buf[pos[i : i + step, None] + span] == want).all(axis=1)]
            for i in range(0, rows.size, step)]
    return np.concatenate(keep)


def last_in(batches: Iterable[RecordBatch], lo: int, hi: int, key: bytes,
            budget: Budget) -> tuple[tuple[RecordBatch, int] | None, bool, int]:
    """The last record with ``key`` and an offset in [lo, hi): (its batch and offset, or None; whether
    the whole range was read; bytes read)."""
    found = None
    read = 0
    for group in chunks(batches, CHUNK_BYTES):
        size = sum(b.size for b in group)
        if not budget.take(size):
            return None, False, read
        read += size
        chunk = Chunk.scan(group)
        rows = rows_with_key(chunk.data, chunk.cols, key)
        if rows.size:
            offsets = chunk.offsets[rows]
            rows = rows[(offsets >= lo) & (offsets < hi)]  # a batch may straddle the window's edges
        if rows.size:
            r = int(rows[-1])
            i = int(np.searchsorted(chunk.rows, r, side="right")) - 1
            found = (group[i], int(chunk.offsets[r]))
    return found, True, read


def newest(view: PartitionView, lo: int, hi: int, key: bytes, budget: Budget,
           topic: str, partition: int) -> tuple[Record | None, int, bool]:
    """The last record with ``key`` in [lo, hi) of ``view``, searched from ``hi`` backwards: (the
    record or None, the lowest offset searched, whether the search reached ``lo``)."""
    window = FIRST_WINDOW
    b = hi
    while b > lo:
        a = max(lo, b - window)
        found, whole, read = last_in(view.batches(a, b), a, b, key, budget)
        if not whole:
            return None, b, False
        if found is not None:
            batch, offset = found
            record = next(r for r in batch.records(topic, partition) if r.offset == offset)
            return record, a, True
        b = a
        if read < CHUNK_BYTES:  # a light window: the next may be larger (sparse or compacted offsets)
            window *= 4
        elif read > 4 * CHUNK_BYTES:
            window = max(FIRST_WINDOW, window // 2)
    return None, lo, True


def pinned_view(partition_dir) -> tuple[CompactionState | None, PartitionSnapshot | None]:
    """The published (horizon, side log) pair with the side log's files open, so that a compaction
    publishing a new pair meanwhile changes nothing for this read (as ``compaction.reader`` pins it)."""
    attempts = 5
    for attempt in range(attempts):
        state = read_state(partition_dir)
        if state is None:
            return None, None
        try:
            return state, PartitionSnapshot.of_directory(side_log_dir(partition_dir, state.side_log), eager=True)
        except FileNotFoundError:  # replaced by a newer run between reading the state and opening it
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def find_latest(cl, topic: str, key: bytes, scan_bytes: int = SCAN_BYTES) -> Lookup:
    """The latest record of ``key`` in the partition the default partitioner gives it (murmur2)."""
    partition = cl.partition_for(topic, key)
    lg = cl.log(topic, partition)
    end, start = lg.log_end_offset, lg.log_start_offset
    state, side = pinned_view(lg.dir)
    budget = Budget(scan_bytes)
    try:
        live_lo = start if state is None else min(max(state.horizon, start), end)
        record, low, complete = newest(lg, live_lo, end, key, budget, topic, partition)
        if record is not None:
            return Lookup(partition, record, LIVE, state, budget.spent, low, True, start)
        if complete and state is not None and side is not None:
            hi = min(state.horizon, side.log_end_offset)
            record, low, complete = newest(side, side.log_start_offset, hi, key, budget, topic, partition)
            if record is not None:
                return Lookup(partition, record, COMPACTED, state, budget.spent, low, True, start)
        return Lookup(partition, None, None, state, budget.spent, low, complete, start)
    finally:
        if side is not None:
            side.close()
