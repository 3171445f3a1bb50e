"""What the pages show about topics, partitions and segments, read through the embedded API.

Every function here touches the disk (segment headers) and runs on the console's threads. What each
segment holds comes from ``Partition.segment_summaries`` (closed segments read once, the active one read
on from the last look: ``compactlog.segment_summaries``); the cleaner's view of a partition (checkpoint,
first dirty offset, dirty ratio, state) is ``compactlog.cleaning``'s, the figures the cleaner itself
computes, so the page and the cleaner cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import segment_summaries
from ..cleaning import ABORTED, IN_PROGRESS, NONE, PAUSED, UNCLEANABLE, partition_cleaning, segment_kind
from ..errors import CompactLogError


@dataclass(frozen=True)
class SegmentSummary(segment_summaries.SegmentSummary):
    """One segment file as the strip shows it: its summary and the cleaner's word for it."""

    kind: str = ""  # clean, dirty, uncleanable (below the compaction lag), active


@dataclass(frozen=True)
class PartitionFacts:
    topic: str
    partition: int
    log_start_offset: int
    log_end_offset: int
    size: int
    records: int  # readable ones: at or above the log start offset (the segments may hold more)
    checkpoint: int | None  # the cleaner's checkpoint (first dirty offset it recorded), None if none
    first_dirty_offset: int | None  # compacted topics only
    first_uncleanable_offset: int | None
    dirty_ratio: float | None
    cleaner_state: str  # none, in-progress, paused, aborted, uncleanable
    uncleanable_reason: str | None
    segments: list[SegmentSummary] = field(default_factory=list)
    last_stable_offset: int = -1  # below it every transaction is decided; the high watermark when none is open


@dataclass(frozen=True)
class TopicFacts:
    name: str
    partitions: list[PartitionFacts]
    cleanup_policy: str
    compression_type: str
    min_cleanable_dirty_ratio: float

    @property
    def size(self) -> int:
        return sum(p.size for p in self.partitions)

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions)

    @property
    def dirty_ratio(self) -> float | None:
        ratios = [p.dirty_ratio for p in self.partitions if p.dirty_ratio is not None]
        return max(ratios) if ratios else None

    @property
    def cleaner_state(self) -> str:
        """The most telling partition state: uncleanable over in-progress over paused over none."""
        order = [UNCLEANABLE, IN_PROGRESS, ABORTED, PAUSED, NONE]
        states = {p.cleaner_state for p in self.partitions}
        return next((s for s in order if s in states), NONE)


def partition_facts(cl, topic: str, partition: int, with_segments: bool = True) -> PartitionFacts:
    """The figures of one partition: offsets, size, records, the cleaner's view and, optionally, its segments."""
    part = cl.partition(topic, partition)
    lso = part.last_stable_offset  # first: never above the end read after it
    start, end = part.log_start_offset, part.log_end_offset
    cleaning = partition_cleaning(cl, topic, partition)
    summaries = [SegmentSummary(**vars(s), kind=segment_kind(s, cleaning)) for s in part.segment_summaries()]
    readable = sum(s.records for s in summaries) - part.records_below_start()  # as consumers count them
    return PartitionFacts(
        topic, partition, start, end, sum(s.size for s in summaries), readable,
        cleaning.checkpoint, cleaning.first_dirty_offset, cleaning.first_uncleanable_offset, cleaning.dirty_ratio,
        cleaning.state, cleaning.uncleanable_reason, summaries if with_segments else [], lso,
    )


def topic_facts(cl, topic: str, with_segments: bool = False) -> TopicFacts:
    n = cl.partitions_for(topic)
    c = cl.topic_config(topic)
    return TopicFacts(topic, [partition_facts(cl, topic, p, with_segments) for p in range(n)],
                      ",".join(c.cleanup_policy), c.compression_type, c.min_cleanable_dirty_ratio)


def all_topics(cl) -> list[TopicFacts]:
    """Every topic, skipping one deleted while we looked."""
    out = []
    for name in cl.list_topics():
        try:
            out.append(topic_facts(cl, name))
        except CompactLogError:
            continue
    return out
