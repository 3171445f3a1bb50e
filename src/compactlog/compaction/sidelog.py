"""A side log: Kafka segments holding a partition's compacted records under their original offsets.

It is written once by a compaction run and then only read, so it needs no recovery: a run that did not
finish never published it (see ``state.py``). Batches keep their base offsets and offset extents, so
a Kafka-style reader steps over the gaps left by removed records.
"""

from __future__ import annotations

import bisect
import os
from pathlib import Path
from typing import Iterable, Iterator

from ..records.batch import RecordBatch
from ..storage import files
from ..storage.segment import LogSegment, SegmentParams


class SideLogWriter:
    """Appends kept batches into segments of at most ``segment_bytes`` each."""

    def __init__(self, directory: Path, params: SegmentParams, segment_bytes: int) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=False)
        self.params = params
        self.segment_bytes = segment_bytes
        self.segments: list[LogSegment] = []
        self.bytes = 0
        self.records = 0

    def append(self, out: list[tuple[bytes, int, int]], records: int) -> None:
        """``out``: (batch bytes, max timestamp, last offset) per kept batch, in offset order, holding
        ``records`` records; written with one append (a new segment first if it would overflow)."""
        if not out:
            return
        data = b"".join(o for o, _, _ in out)
        seg = self.segments[-1] if self.segments else None
        if seg is None or (seg.size and seg.size + len(data) > self.segment_bytes):
            if seg is not None:
                seg.on_become_inactive()
            seg = LogSegment(self.dir, RecordBatch(out[0][0]).base_offset, self.params)
            self.segments.append(seg)
        max_ts, at = max((ts, last) for _, ts, last in out)
        seg.append(out[-1][2], max_ts, at, data)
        self.bytes += len(data)
        self.records += records

    def finish(self) -> None:
        """Everything on disk and fsynced, files closed."""
        for seg in self.segments:
            seg.on_become_inactive()
            seg.flush()
            seg.close_handlers()
        files.fsync_dir(self.dir)


class SideLog:
    """Read-only view of a published side log."""

    def __init__(self, directory: Path) -> None:
        self.dir = Path(directory)
        bases = sorted(files.base_offset_of(n) for n in os.listdir(self.dir)
                       if files.is_segment_file(n) and n.endswith(files.LOG_SUFFIX))
        self.segments = [LogSegment(self.dir, b, read_only=True) for b in bases]
        self.bases = bases

    @property
    def size(self) -> int:
        return sum(s.size for s in self.segments)

    def batches(self, start: int = 0, end: int | None = None) -> Iterator[RecordBatch]:
        """Whole batches holding offsets in [start, end)."""
        i = max(bisect.bisect_right(self.bases, start) - 1, 0)
        for seg in self.segments[i:]:
            if end is not None and seg.base_offset >= end:
                return
            found = seg.translate_offset(start)
            if found is None:
                continue
            for _, b in seg.batches(found[0]):
                if end is not None and b.base_offset >= end:
                    return
                if b.last_offset >= start:
                    yield b

    def close(self) -> None:
        for s in self.segments:
            s.close_handlers()

    def __enter__(self) -> "SideLog":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
