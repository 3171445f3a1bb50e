"""Cleaner: one cleaning round of one log (Kafka's ``Cleaner.doClean``).

1. Build the offset map over the dirty section ``[first_dirty, first_uncleanable)``; if the map fills,
   the round ends at the last mapped offset (partial cleaning, finished in later rounds).
2. Group every segment below that end offset (the clean prefix too) by size.
3. Rewrite each group into one ``.cleaned`` segment through the survival rule, then swap it in with the
   log's crash-safe ``replace_segments``.

Offsets never change: surviving batches keep their base offset and extent, dropped records leave gaps.
"""

from __future__ import annotations

import logging
import time as _time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..clock import SYSTEM, Time
from ..records import kernels
from ..records.batch import LOG_APPEND_TIME, BatchInfo, RecordBatch, build_batch, build_empty_batch
from ..storage import files
from ..storage.log import Log
from ..storage.segment import LogSegment
from .grouping import SegmentSize, group_segments_by_size
from .offset_map import OffsetMap
from .survival import BatchDecision, batch_decision, needs_delete_horizon, record_versions, retained

log = logging.getLogger(__name__)


class CleaningAbortedError(Exception):
    """Raised inside a round when its partition was asked to stop (deleted, truncated, paused)."""


@dataclass
class CleanerStats:
    """What one round read, mapped and wrote; drives the stats line and the cleaner metrics."""

    bytes_read: int = 0
    bytes_written: int = 0
    map_bytes_read: int = 0
    map_messages_read: int = 0
    messages_read: int = 0
    messages_written: int = 0
    invalid_messages: int = 0
    buffer_utilization: float = 0.0
    start_size: int = 0
    end_size: int = 0
    start_messages: int = 0
    started: float = field(default_factory=_time.monotonic)
    map_done: float = 0.0
    ended: float = 0.0

    @property
    def elapsed(self) -> float:
        return max(self.ended - self.started, 1e-9)

    @property
    def map_seconds(self) -> float:
        return max(self.map_done - self.started, 0.0)

    @property
    def clean_seconds(self) -> float:
        return max(self.ended - self.map_done, 0.0)


class Cleaner:
    """Cleans one log at a time with its own offset map."""

    def __init__(self, offset_map: OffsetMap, time: Time = SYSTEM,
                 check_abort: Callable[[Log], None] | None = None) -> None:
        self.map = offset_map
        self.first_dirty = 0
        self.time = time
        self.check_abort = check_abort or (lambda _log: None)

    # -- 1. the offset map ----------------------------------------------------------------------
    def build_offset_map(self, lg: Log, start: int, end: int, stats: CleanerStats) -> int:
        """Map keys of ``[start, end)``; returns the end offset of this round (last mapped + 1)."""
        m = self.map
        m.clear()
        segs = lg.segments
        for i, seg in enumerate(segs):
            nxt = segs[i + 1].base_offset if i + 1 < len(segs) else lg.log_end_offset
            if nxt <= start:
                continue
            if seg.base_offset >= end:
                break
            found = seg.translate_offset(start)
            for _, batch in seg.batches(found[0] if found else seg.size):
                if batch.base_offset >= end:
                    break
                self.check_abort(lg)
                if not batch.is_control:
                    data, cols = batch.scan()
                    stats.map_messages_read += len(cols)
                    stats.map_bytes_read += batch.size
                    versions = self._versions(batch, data, cols)
                    if not m.put_batch(data, cols, batch.base_offset, start, versions):
                        return m.latest_offset + 1
                if batch.last_offset >= start:
                    m.latest_offset = batch.last_offset
            m.latest_offset = min(nxt, end) - 1
        return m.latest_offset + 1

    strategy = "offset"

    def _versions(self, batch: RecordBatch, data, cols: np.ndarray) -> np.ndarray | None:
        if self.strategy == "timestamp" and batch.timestamp_type == LOG_APPEND_TIME:
            return np.full(len(cols), batch.max_timestamp, dtype=np.int64)
        return record_versions(self.strategy, batch.base_timestamp, cols, data, kernels.header_versions)

    def _use_map_for(self, strategy: str) -> None:
        """Switch the map between Kafka's plain layout and the versioned one the strategy needs."""
        self.strategy = strategy
        versioned = strategy != "offset"
        if self.map.versioned != versioned:
            self.map = OffsetMap(self.map.memory, self.map.load_factor, versioned)

    # -- 2 and 3. grouping and rewriting ------------------------------------------------------------
    def clean(self, lg: Log, first_dirty: int, first_uncleanable: int) -> tuple[int, CleanerStats]:
        """One round; returns (the new first dirty offset for the checkpoint, stats)."""
        now = self.time.milliseconds()
        self._use_map_for(lg.config.compaction_strategy)
        self.first_dirty = first_dirty
        stats = CleanerStats(start_size=lg.size)
        end = self.build_offset_map(lg, first_dirty, first_uncleanable, stats)
        stats.map_done = _time.monotonic()
        stats.buffer_utilization = self.map.utilization
        cfg = lg.config
        segs = [s for s in lg.segments if s.base_offset < end and s is not lg.active_segment]
        facts = [SegmentSize(s.base_offset, s.size, s.offset_index.size_in_bytes, s.time_index.size_in_bytes) for s in segs]
        for group in group_segments_by_size(facts, cfg.segment_bytes, cfg.segment_index_bytes, first_uncleanable):
            self.clean_segments(lg, [segs[i] for i in group], first_uncleanable, now, stats)
        stats.end_size = lg.size
        stats.ended = _time.monotonic()
        return end, stats

    def clean_segments(self, lg: Log, sources: list[LogSegment], upper_bound: int, now: int, stats: CleanerStats) -> None:
        """Rewrite ``sources`` into one ``.cleaned`` segment and swap it in; on any error delete it."""
        base = sources[0].base_offset
        for suffix in files.SEGMENT_SUFFIXES:
            files.segment_file(lg.dir, base, suffix, files.CLEANED_SUFFIX).unlink(missing_ok=True)
        dest = LogSegment(lg.dir, base, lg.segment_params(), self.time, temp_suffix=files.CLEANED_SUFFIX)
        try:
            for src in sources:
                for _, batch in src.batches(0):
                    self.check_abort(lg)
                    stats.bytes_read += batch.size
                    stats.messages_read += batch.record_count
                    out = self.filter_batch(batch, upper_bound, now, lg.config.delete_retention_ms, stats)
                    if out is not None:
                        data, kept = out
                        stats.bytes_written += len(data)
                        stats.messages_written += kept
                        written = RecordBatch(data)
                        dest.append(written.last_offset, written.max_timestamp, written.last_offset, data)
            dest.on_become_inactive()
            dest.flush()
            dest.set_last_modified(sources[-1].last_modified_ms)
            lg.replace_segments([dest], sources)
        except BaseException:
            dest.delete_files()
            raise

    def filter_batch(self, batch: RecordBatch, upper_bound: int, now: int, delete_retention_ms: int,
                     stats: CleanerStats) -> tuple[bytes, int] | None:
        """The bytes to keep of one batch (verbatim, rebuilt or an empty header) and its record count."""
        decision = batch_decision(batch.next_offset, upper_bound, batch.is_control)
        if batch.is_control:
            return bytes(batch.buffer), batch.record_count
        data, cols = batch.scan()
        offsets = batch.base_offset + cols[:, kernels.C_OFFSET_DELTA]
        has_key = cols[:, kernels.C_KEY_LEN] >= 0
        tomb = cols[:, kernels.C_VAL_LEN] < 0
        mapped, mapped_versions = self.map.get_batch(data, cols)
        if mapped_versions is not None and batch.base_offset < self.first_dirty:
            # A record cleaned in an earlier round can outrank every dirty record of its key (it has a
            # higher version): it stays, and the map now points at it so the dirty ones go.
            versions = self._versions(batch, data, cols)
            wins = has_key & (mapped >= 0) & (offsets < self.first_dirty) & (versions > mapped_versions)
            if wins.any():
                rows = np.flatnonzero(wins)
                self.map.set_rows(data, cols, rows, offsets[rows], versions[rows])
                mapped[rows] = offsets[rows]
        keep = retained(offsets, mapped, has_key, tomb, self.map.latest_offset, batch.delete_horizon_ms, now,
                        exact=mapped_versions is not None)
        stats.invalid_messages += int((~has_key & (offsets <= self.map.latest_offset)).sum())
        kept = int(keep.sum())
        add_horizon = needs_delete_horizon(batch.has_delete_horizon, int((tomb & keep).sum()))
        if kept == len(keep) and not add_horizon:
            return bytes(batch.buffer), kept
        if kept == 0:
            return (build_empty_batch(batch), 0) if decision is BatchDecision.RETAIN_EMPTY else None
        return self._rebuild(batch, keep, cols, now + delete_retention_ms if add_horizon else batch.delete_horizon_ms), kept

    @staticmethod
    def _rebuild(batch: RecordBatch, keep: np.ndarray, cols: np.ndarray, horizon: int | None) -> bytes:
        """Same codec (default level), same header facts, the kept records at their original offsets."""
        recs = batch.records()
        idx = np.flatnonzero(keep).tolist()
        kept = [recs[i] for i in idx]
        info = BatchInfo(batch.base_offset, batch.timestamp_type, batch.producer_id, batch.producer_epoch,
                         batch.base_sequence, batch.partition_leader_epoch, batch.is_transactional, batch.is_control)
        return build_batch(
            [r.key for r in kept], [r.value for r in kept], [r.timestamp for r in kept],
            headers=[r.headers for r in kept], codec=batch.codec, info=info,
            offset_deltas=cols[keep, kernels.C_OFFSET_DELTA].tolist(), last_offset_delta=batch.last_offset_delta,
            delete_horizon=horizon,
            max_timestamp=batch.max_timestamp if batch.timestamp_type == LOG_APPEND_TIME else None,
        )
