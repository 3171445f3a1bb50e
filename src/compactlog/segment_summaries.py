"""What each segment of a partition holds, read from its batch headers: records, batches, codecs and
time range (what a picture of the log, such as the console's segment strip, shows).

Only batch headers are read (records stay compressed). A closed segment never changes under its name
(cleaning writes new files), so its summary is read once and kept by file identity (``_Summaries``);
the active segment, the one still growing, is read on from where the last look stopped (``_Growing``):
reading it whole on every look would cost up to segment.bytes (1 GB by default) per partition each
time. ``Partition.segment_summaries`` is the way in; the functions here take the storage's segments.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass

from .errors import CompactLogError
from .records.codecs import Codec

CACHE_SEGMENTS = 50_000  # segment summaries kept (a few hundred bytes each)


@dataclass(frozen=True)
class SegmentSummary:
    """One segment file: its offsets, size and what its batch headers say."""

    base_offset: int
    next_offset: int  # the next segment's base (or the log end for the active one)
    size: int
    batches: int
    records: int
    codecs: tuple[str, ...]  # the codecs its batches use, in order of first use
    first_timestamp: int  # -1 when empty
    max_timestamp: int
    active: bool = False  # the last segment, the one appends go to

    @property
    def codec(self) -> str:
        return "/".join(self.codecs) if self.codecs else "-"


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
        s = summarize(seg, next_offset)
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
        return _summary(seg, next_offset, size, part, active=True)


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


def summarize(seg, next_offset: int) -> SegmentSummary:
    """One walk over a closed segment's batch headers (records stay compressed: only headers are read)."""
    return _summary(seg, next_offset, seg.size, _read_on(seg, _Partial(0, None), seg.size))


def _summary(seg, next_offset: int, size: int, part: _Partial, active: bool = False) -> SegmentSummary:
    return SegmentSummary(seg.base_offset, next_offset, size, part.batches, part.records, part.codecs,
                          part.first_timestamp, part.max_timestamp, active)


def summaries(segments, log_end_offset: int) -> list[SegmentSummary]:
    """Every segment of a log (``segments`` in order, the last one active), oldest first. A segment
    deleted or swapped out while we looked is shown as it was listed, empty."""
    out = []
    for i, seg in enumerate(segments):
        active = i == len(segments) - 1
        nxt = log_end_offset if active else segments[i + 1].base_offset
        try:
            s = GROWING.get(seg, nxt) if active else SUMMARIES.get(seg, nxt)
        except (CompactLogError, OSError):
            s = SegmentSummary(seg.base_offset, nxt, 0, 0, 0, (), -1, -1, active)
        out.append(s)
    return out
