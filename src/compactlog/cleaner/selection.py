"""Which part of a log is cleanable and which log is filthiest (Kafka's ``LogCleanerManager`` rules).

Pure functions over plain facts, so the rules can be tested without files and shared by every caller.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, Sequence


@dataclass(frozen=True)
class SegmentFacts:
    base_offset: int
    size: int
    largest_timestamp: int  # max record timestamp, or the file's mtime when none
    first_batch_timestamp: int  # max timestamp of the segment's first batch (-1 when empty)


@dataclass(frozen=True)
class LogToClean:
    key: Hashable
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    compaction_delay_ms: int  # > 0 when max.compaction.lag.ms forces a clean
    checkpoint_reset: bool  # the checkpoint was outside the log and must be rewritten

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def dirty_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0

    @property
    def needs_compaction_now(self) -> bool:
        return self.compaction_delay_ms > 0


def _segment_index_containing(segs: Sequence[SegmentFacts], offset: int) -> int:
    idx = 0
    for i, s in enumerate(segs):
        if s.base_offset <= offset:
            idx = i
        else:
            break
    return idx


def log_to_clean(
    key: Hashable,
    segs: Sequence[SegmentFacts],
    *,
    log_start_offset: int,
    log_end_offset: int,
    checkpoint: int | None,
    min_compaction_lag_ms: int,
    max_compaction_lag_ms: int,
    now: int,
    last_stable_offset: int | None = None,
) -> LogToClean:
    """Bounds and sizes of a log's dirty section. ``segs`` are in order; the last one is active.
    Cleaning never reaches the ``last_stable_offset`` (the first offset of an open transaction): the
    round ends at the start of the segment holding it."""
    first_dirty = log_start_offset if checkpoint is None else checkpoint
    reset = False
    if first_dirty < log_start_offset or first_dirty > log_end_offset:
        first_dirty, reset = log_start_offset, checkpoint is not None
    active = len(segs) - 1
    bound = segs[active].base_offset
    dirty_idx = _segment_index_containing(segs, first_dirty)
    if min_compaction_lag_ms > 0:
        for i in range(dirty_idx, active):
            if segs[i].largest_timestamp > now - min_compaction_lag_ms:
                bound = min(bound, segs[i].base_offset)
                break
    if last_stable_offset is not None:
        bound = min(bound, last_stable_offset)
    bound = max(first_dirty, bound)
    unclean_idx = _segment_index_containing(segs, bound)
    first_uncleanable = segs[unclean_idx].base_offset
    clean = sum(s.size for s in segs if s.base_offset < first_dirty)
    cleanable = sum(s.size for s in segs[dirty_idx:unclean_idx])
    delay = 0
    if max_compaction_lag_ms < 2**63 - 1:
        firsts = [s.first_batch_timestamp for s in segs[dirty_idx:active] if s.first_batch_timestamp > 0]
        if firsts:
            delay = max(0, now - max_compaction_lag_ms - min(firsts))
    return LogToClean(key, first_dirty, first_uncleanable, clean, cleanable, delay, reset)


def eligible(candidates: Sequence[LogToClean], min_ratio_of) -> list[LogToClean]:
    """The logs worth a round: dirty ratio strictly above their ``min.cleanable.dirty.ratio``, or
    max-lag forces them and they have cleanable bytes."""
    return [
        c for c in candidates
        if c.total_bytes > 0 and ((c.needs_compaction_now and c.cleanable_bytes > 0) or c.dirty_ratio > min_ratio_of(c.key))
    ]


def filthiest(candidates: Sequence[LogToClean], min_ratio_of) -> LogToClean | None:
    """The eligible log with the highest dirty ratio (a cleaner thread's next log)."""
    return max(eligible(candidates, min_ratio_of), key=lambda c: c.dirty_ratio, default=None)
