"""Reading the compacted view: the side log below the horizon, the live log from it on.

The (horizon, side log) pair is read once when a read starts, and the side log's files are opened
then, so a compaction publishing a new pair meanwhile changes nothing for this read. Positions always
advance: once the side log has nothing more below the horizon, reading goes on at the horizon (or at
the log start offset, if retention has removed live records beyond it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from ..records.batch import RecordBatch
from ..storage.reader import PartitionView
from ..storage.snapshot import PartitionSnapshot
from .state import CompactionState, read_state, side_log_dir


def pinned_view(partition_dir: Path, attempts: int = 5) -> tuple[CompactionState | None, PartitionSnapshot | None]:
    """The published (horizon, side log) pair with the side log's files open, or (None, None) when no
    compaction of the partition is published. The caller closes the snapshot; once it holds it, a
    compaction publishing a new pair changes nothing for its read. Every reader of the compacted view
    pins it here."""
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


def compacted_batches(live: PartitionView, start: int, end: int | None = None, attempts: int = 5,
                      check_crcs: bool = True) -> Iterator[RecordBatch]:
    """Batches of the compacted view holding offsets in [start, end). ``live`` is the live log, the
    owner's Log or another process's snapshot; both the side log and it are read by the checked reader."""
    log_start_offset = live.log_start_offset
    state, side = pinned_view(live.dir, attempts)
    if state is None:
        yield from live.batches(max(start, log_start_offset), end, check_crcs=check_crcs)
        return
    with side:
        hi = state.horizon if end is None else min(end, state.horizon)
        if start < hi:
            yield from side.batches(start, hi, check_crcs=check_crcs)
    if end is None or end > state.horizon:
        yield from live.batches(max(start, state.horizon, log_start_offset), end, check_crcs=check_crcs)
