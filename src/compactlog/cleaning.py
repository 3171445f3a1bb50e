"""Log cleaning and Pulsar-style compaction as the adapters see them: the cleaner's view of each
partition (its checkpoint, dirty ratio, cleanable range, state and why it is uncleanable), the cleaner's
threads, metrics and last rounds, each partition's compaction status, and what a run would read.

The figures are those the cleaner itself computes (the cleaner manager's ``to_clean``, over segment
sizes and the cleaner's checkpoint), so a status page and the cleaner cannot disagree; none of them reads
a segment. The broker's console and the command line show them; the cleaner and the compaction service
stay below the embedded API.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .cleaner.log_cleaner import CleanResult, ThreadState
from .cleaner.manager import ABORTED, IN_PROGRESS, NONE, PAUSED
from .cleaner.selection import eligible
from .compaction.service import CompactionStatus, backlog_bytes
from .compaction.state import CompactionState, read_state
from .errors import CompactLogError

if TYPE_CHECKING:
    from .api import CompactLog
    from .segment_summaries import SegmentSummary

UNCLEANABLE = "uncleanable"  # a partition whose cleaning failed (KIP-346), until reopened or deleted
STATES = (NONE, IN_PROGRESS, PAUSED, ABORTED, UNCLEANABLE)
# the cleaner's word for a segment, by where it lies against the partition's cleanable range
CLEAN, DIRTY, NOT_YET, ACTIVE = "clean", "dirty", "uncleanable", "active"


@dataclass(frozen=True)
class PartitionCleaning:
    """The cleaner's view of one partition. The offsets and the ratio are None for a topic that is not
    compacted (or whose figures could not be had: deleted or swapped while we looked)."""

    topic: str
    partition: int
    checkpoint: int | None  # the cleaner's checkpoint (first dirty offset it recorded), None if none
    first_dirty_offset: int | None  # cleanable range: [first dirty, first uncleanable)
    first_uncleanable_offset: int | None  # segments from here on wait for min.compaction.lag.ms (or are active)
    dirty_ratio: float | None  # cleanable bytes over the bytes up to the first uncleanable offset
    state: str  # none, in-progress, paused, aborted, uncleanable
    uncleanable_reason: str | None


@dataclass(frozen=True)
class CleanerStatus:
    """The cleaner as a whole: its threads, Kafka's metrics, its last rounds and its byte totals."""

    enabled: bool  # log.cleaner.enable
    metrics: dict[str, float]  # Kafka's cleaner metrics, by their names
    threads: list[ThreadState]
    runs: list[CleanResult]  # the last rounds, newest first
    uncleanable: list[tuple[str, int, str]]  # (topic, partition, why), sorted
    bytes_read_total: int  # by cleaning rounds since the cleaner started
    bytes_written_total: int


def partition_cleaning(cl: "CompactLog", topic: str, partition: int) -> PartitionCleaning:
    """The cleaner's view of one partition; ``UnknownTopicOrPartitionError`` when there is none."""
    lg = cl.manager.get_log(topic, partition)
    cm = cl.cleaner.manager
    tp = (topic, partition)
    first_dirty = first_uncleanable = ratio = None
    if lg.config.compact:
        try:
            ltc = cm.to_clean(tp, lg, cl.cleaner.time.milliseconds())
            first_dirty, first_uncleanable, ratio = ltc.first_dirty_offset, ltc.first_uncleanable_offset, ltc.dirty_ratio
        except (CompactLogError, OSError, ValueError):
            pass
    reason = cm.uncleanable.get(tp)
    return PartitionCleaning(topic, partition, cm.checkpoints.get(tp), first_dirty, first_uncleanable, ratio,
                             UNCLEANABLE if reason is not None else cm.state(tp)[0], reason)


def segment_kind(seg: "SegmentSummary", cleaning: PartitionCleaning) -> str:
    """The cleaner's word for a segment: active, clean (below the checkpoint), uncleanable (from the first
    uncleanable offset on: min.compaction.lag.ms), dirty; "" for a topic that is not compacted."""
    if seg.active:
        return ACTIVE
    if cleaning.first_dirty_offset is None:
        return ""
    if seg.next_offset <= cleaning.first_dirty_offset:
        return CLEAN
    if cleaning.first_uncleanable_offset is not None and seg.base_offset >= cleaning.first_uncleanable_offset:
        return NOT_YET
    return DIRTY


def dirty_ratios(cl: "CompactLog") -> dict[tuple[str, int], float]:
    """The dirty ratio of every compacted partition, from segment sizes and checkpoints only (no segment
    is read); a partition deleted or swapped while we looked is left out."""
    now = cl.cleaner.time.milliseconds()
    cm = cl.cleaner.manager
    out = {}
    for tp, lg in list(cl.manager.logs.items()):
        if not lg.config.compact:
            continue
        try:
            out[tp] = cm.to_clean(tp, lg, now).dirty_ratio
        except (CompactLogError, OSError, ValueError, IndexError):
            continue
    return out


def cleaner_status(cl: "CompactLog") -> CleanerStatus:
    c = cl.cleaner
    return CleanerStatus(c.enabled, c.metrics(), c.threads(), list(reversed(list(c.last_stats))),
                         sorted((t, p, why) for (t, p), why in dict(c.manager.uncleanable).items()),
                         c.bytes_read_total, c.bytes_written_total)


def clean_estimate(cl: "CompactLog", topic: str | None = None) -> int:
    """Bytes a cleaner run (``CompactLog.clean``) will read: each eligible log's dirty section (mapped)
    and every segment up to its end (rewritten)."""
    cm = cl.cleaner.manager
    now = cl.cleaner.time.milliseconds()
    logs = {tp: lg for tp, lg in list(cl.manager.logs.items())
            if lg.config.compact and (topic is None or tp[0] == topic)}
    candidates = []
    for tp, lg in logs.items():
        try:
            candidates.append(cm.to_clean(tp, lg, now))
        except (CompactLogError, OSError, ValueError, IndexError):
            continue
    return sum(c.cleanable_bytes + c.total_bytes
               for c in eligible(candidates, lambda tp: logs[tp].config.min_cleanable_dirty_ratio))


def compaction_status(cl: "CompactLog", topic: str, partition: int) -> CompactionStatus:
    """One partition's compaction: NOT_RUN / RUNNING / SUCCESS / ERROR, and the published horizon and figures."""
    return cl.compaction.status(topic, partition)


def compaction_estimate(cl: "CompactLog", topic: str) -> int:
    """Bytes a compaction run (``CompactLog.compact_topic``) reads: the previous side log and the live log
    beyond its horizon, twice (phase one maps keys, phase two copies the survivors)."""
    total = 0
    for p in range(cl.manager.partitions_for(topic)):
        lg = cl.manager.get_log(topic, p)
        st = read_state(lg.dir)
        total += 2 * ((st.bytes_after if st else 0) + backlog_bytes(lg, st.horizon if st else lg.log_start_offset))
    return total


__all__ = ["ABORTED", "ACTIVE", "CLEAN", "CleanResult", "CleanerStatus", "CompactionState", "CompactionStatus",
           "DIRTY", "IN_PROGRESS", "NONE", "NOT_YET", "PAUSED", "PartitionCleaning", "STATES", "ThreadState",
           "UNCLEANABLE", "clean_estimate", "cleaner_status", "compaction_estimate", "compaction_status",
           "dirty_ratios", "partition_cleaning", "segment_kind"]
