"""What the pages show about topics, partitions and segments, read from the live logs.

Every function here touches the disk (segment headers, the cleaner's figures) and runs on the
console's threads. A closed segment never changes under its name (cleaning writes new files), so its
summary -- records, batches, codecs, time range -- is read once and kept by file identity; the active
segment, the one still growing, is read on from where the last look stopped (``_Growing``): reading it
whole on every look cost the overview up to segment.bytes (1 GB by default) per partition each time.
The cleaner's view of a partition (first dirty offset, dirty ratio) is the same ``LogToClean`` the
cleaner itself computes, so the page and the cleaner cannot disagree.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field, replace

from ..cleaner.manager import NONE
from ..errors import CompactLogError
from ..records.codecs import Codec

CACHE_SEGMENTS = 50_000  # segment summaries kept (a few hundred bytes each)


@dataclass(frozen=True)
class SegmentSummary:
    """One segment file as the strip shows it."""

    base_offset: int
    next_offset: int  # the next segment's base (or the log end for the active one)
    size: int
    batches: int
    records: int
    codecs: tuple[str, ...]  # the codecs its batches use, in order of first use
    first_timestamp: int  # -1 when empty
    max_timestamp: int
    kind: str = ""  # clean, dirty, uncleanable (below the compaction lag), active

    @property
    def codec(self) -> str:
        return "/".join(self.codecs) if self.codecs else "-"


@dataclass(frozen=True)
class PartitionFacts:
    topic: str
    partition: int
    log_start_offset: int
    log_end_offset: int
    size: int
    records: int
    checkpoint: int | None  # the cleaner's checkpoint (first dirty offset it recorded), None if none
    first_dirty_offset: int | None  # compacted topics only
    first_uncleanable_offset: int | None
    dirty_ratio: float | None
    cleaner_state: str  # none, in-progress, paused, aborted, uncleanable
    uncleanable_reason: str | None
    segments: list[SegmentSummary] = field(default_factory=list)


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
        order = ["uncleanable", "in-progress", "aborted", "paused", NONE]
        states = {p.cleaner_state for p in self.partitions}
        return next((s for s in order if s in states), NONE)


class _Summaries:
    """Closed segments' summaries by (path, inode, size, mtime); LRU-bounded."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cache: OrderedDict[tuple, SegmentSummary] = OrderedDict()

    def get(self, seg, next_offset: int) -> SegmentSummary:
        try:
            st = os.stat(seg.log_path)
            key = (str(seg.log_path), st.st_ino, st.st_size, st.st_mtime_ns, next_offset)
        except OSError:
            key = None
        if key is not None:
            with self._lock:
                hit = self._cache.get(key)
                if hit is not None:
                    self._cache.move_to_end(key)
                    return hit
        s = _summarize(seg, next_offset)
        if key is not None:
            with self._lock:
                self._cache[key] = s
                while len(self._cache) > CACHE_SEGMENTS:
                    self._cache.popitem(last=False)
        return s


SUMMARIES = _Summaries()


@dataclass(frozen=True)
class _Partial:
    """What the headers up to ``position`` of a growing segment add up to."""

    position: int  # the next batch starts here
    last: tuple[int, int, int] | None  # (position, base offset, size) of the last batch counted
    batches: int = 0
    records: int = 0
    codecs: tuple[str, ...] = ()
    first_timestamp: int = -1
    max_timestamp: int = -1


class _Growing:
    """Active segments' running totals by (path, inode, base offset), read on from the last position.

    A segment only grows at its end, except when the log is truncated (a replica's or ``truncate``'s
    cut): the last counted batch is read again (one header) and, unless it is still there, the
    segment is counted from the start."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cache: OrderedDict[tuple, _Partial] = OrderedDict()

    def get(self, seg, next_offset: int) -> SegmentSummary:
        key = (str(seg.log_path), os.stat(seg.log_path).st_ino, seg.base_offset)
        size = seg.size
        with self._lock:
            part = self._cache.get(key)
        if part is None or not _still_there(seg, part, size):
            part = _Partial(0, None)
        part = _read_on(seg, part, size)
        with self._lock:
            self._cache[key] = part
            self._cache.move_to_end(key)
            while len(self._cache) > CACHE_SEGMENTS:
                self._cache.popitem(last=False)
        return _summary(seg, next_offset, size, part)


def _still_there(seg, part: _Partial, size: int) -> bool:
    if part.position > size:
        return False
    if part.last is None:
        return True
    pos, base, length = part.last
    found = next(iter(seg.batches(pos, pos + length)), None)
    return found is not None and found[1].base_offset == base and found[1].size == length


def _read_on(seg, part: _Partial, size: int) -> _Partial:
    """``part`` plus the batch headers from its position to ``size`` (records stay compressed)."""
    batches, records, first_ts, max_ts = part.batches, part.records, part.first_timestamp, part.max_timestamp
    codecs = list(part.codecs)
    position, last = part.position, part.last
    for pos, b in seg.batches(part.position, size):
        batches += 1
        records += b.record_count
        name = Codec(b.codec).name.lower()
        if name not in codecs:
            codecs.append(name)
        if first_ts < 0:
            first_ts = b.first_timestamp
        max_ts = max(max_ts, b.max_timestamp)
        position, last = pos + b.size, (pos, b.base_offset, b.size)
    return _Partial(position, last, batches, records, tuple(codecs), first_ts, max_ts)


GROWING = _Growing()


def _summarize(seg, next_offset: int) -> SegmentSummary:
    """One walk over a closed segment's batch headers (records stay compressed: only headers are read)."""
    return _summary(seg, next_offset, seg.size, _read_on(seg, _Partial(0, None), seg.size))


def _summary(seg, next_offset: int, size: int, part: _Partial) -> SegmentSummary:
    return SegmentSummary(seg.base_offset, next_offset, size, part.batches, part.records, part.codecs,
                          part.first_timestamp, part.max_timestamp)


def _kind(s: SegmentSummary, active: bool, first_dirty: int | None, first_uncleanable: int | None) -> str:
    if active:
        return "active"
    if first_dirty is None:
        return ""
    if s.next_offset <= first_dirty:
        return "clean"
    if first_uncleanable is not None and s.base_offset >= first_uncleanable:
        return "uncleanable"
    return "dirty"


def partition_facts(cl, topic: str, partition: int, with_segments: bool = True) -> PartitionFacts:
    """The figures of one partition: offsets, size, records, the cleaner's view and, optionally, its segments."""
    lg = cl.manager.get_log(topic, partition)
    cm = cl.cleaner.manager
    tp = (topic, partition)
    segs = lg.segments
    end = lg.log_end_offset
    first_dirty = first_uncleanable = ratio = None
    if lg.config.compact:
        try:
            ltc = cm.to_clean(tp, lg, cl.cleaner.time.milliseconds())
            first_dirty, first_uncleanable, ratio = ltc.first_dirty_offset, ltc.first_uncleanable_offset, ltc.dirty_ratio
        except (CompactLogError, OSError, ValueError):
            pass
    summaries = []
    for i, seg in enumerate(segs):
        nxt = segs[i + 1].base_offset if i + 1 < len(segs) else end
        active = i == len(segs) - 1
        try:
            s = GROWING.get(seg, nxt) if active else SUMMARIES.get(seg, nxt)
        except (CompactLogError, OSError):  # deleted or swapped under us: shown as it was listed
            s = SegmentSummary(seg.base_offset, nxt, 0, 0, 0, (), -1, -1)
        summaries.append(replace(s, kind=_kind(s, active, first_dirty, first_uncleanable)))
    state = cm.state(tp)[0]
    reason = cm.uncleanable.get(tp)
    return PartitionFacts(
        topic, partition, lg.log_start_offset, end, sum(s.size for s in summaries), sum(s.records for s in summaries),
        cm.checkpoints.get(tp), first_dirty, first_uncleanable, ratio,
        "uncleanable" if reason is not None else state, reason, summaries if with_segments else [],
    )


def topic_facts(cl, topic: str, with_segments: bool = False) -> TopicFacts:
    n = cl.manager.partitions_for(topic)
    c = cl.manager.log_config(topic)
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
