"""A side log: Kafka segments holding a partition's compacted records under their original offsets.

It is written once by a compaction run and then only read (as a ``PartitionSnapshot`` of its
directory), so it needs no recovery: a run that did not finish never published it (see ``state.py``). Batches keep their base offsets and offset extents, so
a Kafka-style reader steps over the gaps left by removed records.
"""

from __future__ import annotations

from pathlib import Path

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
