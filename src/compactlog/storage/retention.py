"""Which segments retention deletes (``cleanup.policy=delete`` and the delete half of ``compact,delete``).

Pure rules over segment facts, applied oldest first and stopping at the first segment that must stay:

(a) log start offset: a segment goes when the *next* segment's base offset is <= the log start offset;
(b) ``retention.bytes`` (-1 = off): while the log is over the limit by at least a segment's size;
(c) ``retention.ms`` (-1 = off): while ``now - segment.largest_timestamp > retention.ms``.

A segment is only deletable once every offset in it is below the high watermark (one node: the log end
offset), and an empty last segment is never deleted. Pass (a) always runs; (b) and (c) only when the
policy includes ``delete``. If every segment goes, the log rolls a fresh active segment first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class SegmentFacts:
    base_offset: int
    size: int
    largest_timestamp: int


@dataclass(frozen=True)
class RetentionDecision:
    count: int  # how many of the oldest segments to delete
    reason: str  # "log-start-offset", "retention.bytes" or "retention.ms"


def _deletable_prefix(segs: Sequence[SegmentFacts], log_end_offset: int, high_watermark: int, predicate) -> int:
    n = 0
    for i, seg in enumerate(segs):
        upper = segs[i + 1].base_offset if i + 1 < len(segs) else log_end_offset
        is_last = i + 1 == len(segs)
        if high_watermark < upper or (is_last and seg.size == 0) or not predicate(i, seg):
            break
        n += 1
    return n


def segments_to_delete(
    segs: Sequence[SegmentFacts],
    *,
    log_start_offset: int,
    log_end_offset: int,
    now: int,
    retention_ms: int,
    retention_bytes: int,
    delete_policy: bool,
    high_watermark: int | None = None,
) -> RetentionDecision | None:
    """The oldest segments to delete now, and why; None when nothing goes."""
    hw = log_end_offset if high_watermark is None else high_watermark

    def below_start(i: int, seg: SegmentFacts) -> bool:
        return i + 1 < len(segs) and segs[i + 1].base_offset <= log_start_offset

    n = _deletable_prefix(segs, log_end_offset, hw, below_start)
    if n:
        return RetentionDecision(n, "log-start-offset")
    if not delete_policy:
        return None
    if retention_bytes >= 0:
        total = sum(s.size for s in segs)
        excess = [total - retention_bytes]

        def over_size(i: int, seg: SegmentFacts) -> bool:
            if excess[0] - seg.size >= 0:
                excess[0] -= seg.size
                return True
            return False

        if total >= retention_bytes:
            n = _deletable_prefix(segs, log_end_offset, hw, over_size)
            if n:
                return RetentionDecision(n, "retention.bytes")
    if retention_ms >= 0:
        n = _deletable_prefix(segs, log_end_offset, hw, lambda i, s: now - s.largest_timestamp > retention_ms)
        if n:
            return RetentionDecision(n, "retention.ms")
    return None
