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
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

from ..clock import SYSTEM, Time
from ..records.batch import RecordBatch
from ..records.columns import CHUNK_RECORDS, Chunk, by_buffer
from ..storage.log import Log
from ..storage.rewrite import write_cleaned
from ..storage.segment import LogSegment
from .grouping import SegmentSize, group_segments_by_size
from .offset_map import OffsetMap
from .survival import filter_batches, lookup, map_keys
from .throttler import Throttler
from .transactions import AbortedRanges, CleanedTransactions, last_records

log = logging.getLogger(__name__)


READ_BUFFER_BYTES = 262144  # source bytes per append to a cleaned segment (sets its index granularity)
SCAN_BYTES = 1 << 20  # source bytes scanned and filtered together (whole appends of the above; larger
# runs of column work leave the cache: 4 MiB was slower here than 1 MiB, 256 KiB no faster)


Group = tuple[list[RecordBatch], int, int]  # consecutive batches, their stored bytes, their records


def gathered(batches: Iterable[RecordBatch], group_bytes: int, run_bytes: int) -> Iterator[list[Group]]:
    """The batches in the groups ``columns.chunks`` makes of them (``group_bytes`` stored bytes or
    ``CHUNK_RECORDS`` records each), gathered into runs of consecutive groups of up to ``run_bytes``
    stored bytes or ``CHUNK_RECORDS`` records (each group alone when ``run_bytes`` is 0)."""
    run: list[Group] = []
    group: list[RecordBatch] = []
    size = records = run_size = run_records = 0
    for b in batches:
        group.append(b)
        size += b.size
        records += b.record_count
        if size >= group_bytes or records >= CHUNK_RECORDS:
            run.append((group, size, records))
            run_size, run_records = run_size + size, run_records + records
            group, size, records = [], 0, 0
            if run_size >= run_bytes or run_records >= CHUNK_RECORDS:
                yield run
                run, run_size, run_records = [], 0, 0
    if group:
        run.append((group, size, records))
    if run:
        yield run


def _end_of(lg: Log, segs: list[LogSegment]) -> int:
    """Where the last of ``segs`` ends: the next segment's base offset, else the log end."""
    after = [s.base_offset for s in lg.segments if s.base_offset > segs[-1].base_offset]
    return after[0] if after else lg.log_end_offset


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


# (log name, phase, source bytes read): how far a cleaning or compaction run has got, for progress bars.
IoObserver = Callable[[str, str, int], None]


class Cleaner:
    """Cleans one log at a time with its own offset map."""

    def __init__(self, offset_map: OffsetMap, time: Time = SYSTEM,
                 check_abort: Callable[[Log], None] | None = None, read_buffer: int = READ_BUFFER_BYTES,
                 throttler: Throttler | None = None) -> None:
        self.map = offset_map
        self.throttle = throttler.maybe_throttle if throttler is not None else (lambda _n: 0.0)
        self.time = time
        self.check_abort = check_abort or (lambda _log: None)
        self.read_buffer = read_buffer  # source bytes per append to the cleaned segment (index granularity)
        self.first_dirty = 0
        self.strategy = "offset"
        self.on_io: IoObserver = lambda _name, _phase, _n: None  # phases "mapping" and "cleaning"

    def _use_map_for(self, strategy: str) -> None:
        """Switch the map between Kafka's plain layout and the versioned one the strategy needs."""
        self.strategy = strategy
        versioned = strategy != "offset"
        if self.map.versioned != versioned:
            self.map = OffsetMap(self.map.memory, self.map.load_factor, versioned)

    # -- 1. the offset map ----------------------------------------------------------------------
    def build_offset_map(self, lg: Log, start: int, end: int, stats: CleanerStats) -> int:
        """Map keys of ``[start, end)``, but those of aborted transactions; returns the end offset of
        this round (last mapped + 1)."""
        m = self.map
        m.clear()
        segs = lg.segments
        aborted = AbortedRanges(lg.aborted_txns(start, end))
        for i, seg in enumerate(segs):
            nxt = segs[i + 1].base_offset if i + 1 < len(segs) else lg.log_end_offset
            if nxt <= start:
                continue
            if seg.base_offset >= end:
                break
            def account(group: list[RecordBatch], chunk: Chunk) -> None:
                self.check_abort(lg)
                stats.map_messages_read += len(chunk.cols)
                read = sum(b.size for b in group)
                stats.map_bytes_read += read
                self.throttle(read)
                self.on_io(lg.name, "mapping", read)

            with seg.mapped():  # every byte from ``start`` on is read: through a map, not copied
                found = seg.translate_offset(start)
                batches = (b for _, b in seg.batches(found[0] if found else seg.size) if b.base_offset < end)
                if not map_keys(m, batches, start, self.strategy, account, aborted):
                    return m.latest_offset + 1
            m.latest_offset = min(nxt, end) - 1
        return m.latest_offset + 1

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
        # the round's walk over transactions, from its first segment on, carried from group to group
        txn = CleanedTransactions(lg.aborted_txns(segs[0].base_offset, _end_of(lg, segs)) if segs else (),
                                  last_records(lg.last_records_of_active_producers()))
        facts = [SegmentSize(s.base_offset, s.size, s.offset_index.size_in_bytes, s.time_index.size_in_bytes) for s in segs]
        for group in group_segments_by_size(facts, cfg.segment_bytes, cfg.segment_index_bytes, first_uncleanable):
            self.clean_segments(lg, [segs[i] for i in group], first_uncleanable, now, stats, txn)
        stats.end_size = lg.size
        stats.ended = _time.monotonic()
        return end, stats

    def clean_segments(self, lg: Log, sources: list[LogSegment], upper_bound: int, now: int, stats: CleanerStats,
                       txn: CleanedTransactions | None = None) -> None:
        """Rewrite ``sources`` into one ``.cleaned`` segment and swap it in; ``txn`` is the round's walk
        over transactions (a fresh one when not given), advanced over these segments."""
        retention = lg.config.delete_retention_ms
        txn = txn if txn is not None else CleanedTransactions()

        # Kafka's rule: each key's map entry is final before the rewrite starts, so consecutive appends can
        # be scanned and filtered together (far fewer calls per batch). A versioned map may still move a
        # key's entry to a clean record while it is read (``lookup``): there, one append at a time.
        scan_bytes = SCAN_BYTES if self.strategy == "offset" else 0

        def filtered():
            for src in sources:
                with src.mapped():
                    yield from rewritten(src)

        def rewritten(src: LogSegment):
            for groups in gathered((b for _, b in src.batches(0)), self.read_buffer, scan_bytes):
                self.check_abort(lg)
                batches = groups[0][0] if len(groups) == 1 else [b for g, _, _ in groups for b in g]
                # each run of one read buffer is scanned where it lies
                out = [kept for run in by_buffer(batches) for kept in
                       self.filter_chunk(Chunk.scan(run, verify=True), upper_bound, now, retention, stats, txn)]
                lasts = [last for _, _, last in out]  # kept batches in order: their last offsets grow
                at = 0
                for group, read, records in groups:  # each group of ``read_buffer`` source bytes is one append
                    end = bisect_right(lasts, group[-1].last_offset, at)
                    part, at = out[at:end], end
                    stats.bytes_read += read
                    stats.messages_read += records
                    self.throttle(read + sum(len(data) for data, _, _ in part))
                    self.on_io(lg.name, "cleaning", read)
                    yield part

        dest, written = write_cleaned(lg.dir, sources[0].base_offset, lg.segment_params(), filtered(),
                                      sources[-1].last_modified_ms, self.time, txn.take_index_entries)
        dest.close_handlers()
        if not lg.adopt_cleaned(dest.base_offset, [(s.base_offset, s.size) for s in sources]):
            # retention or a truncation changed the sources meanwhile: nothing was swapped, so the
            # round must not count as done (the checkpoint stays where it was)
            raise CleaningAbortedError(f"segments of {lg.name} changed while they were cleaned")
        stats.bytes_written += written

    def filter_chunk(self, chunk: Chunk, upper_bound: int, now: int, delete_retention_ms: int,
                     stats: CleanerStats, txn: CleanedTransactions | None = None) -> list[tuple[bytes, int, int]]:
        """The surviving bytes of each batch of a chunk, the map's answers fed to :func:`filter_batches`."""
        mapped, exact = lookup(self.map, chunk, self.first_dirty, self.strategy)
        return filter_batches(chunk, mapped, exact, self.map.latest_offset, upper_bound, now, delete_retention_ms, stats,
                              txn=txn)
