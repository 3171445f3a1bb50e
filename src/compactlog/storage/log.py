"""Log: one topic-partition's ordered segments, with append, read, roll, retention, truncation and swap.

Concurrency: every change (append, roll, delete, swap, truncate) holds ``self.lock``; readers never do.
They take the current segment view, an immutable (bases, segments) pair replaced whole on each change,
and read through file descriptors that stay open after a segment is renamed to ``.deleted``; the files
are closed and unlinked only after ``file.delete.delay.ms``. A reader therefore sees the old segments or
the new ones, never a gap.

Failures: every change runs under the data directory's failure guard (``failure.py``). A failed write
leaves the segment ending after its last complete batch and takes the directory offline, so nothing is
acknowledged that a reopen would not find, and no offset is handed out twice.
"""

from __future__ import annotations

import bisect
import logging
import random
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from ..clock import SYSTEM, Time
from ..errors import CompactLogError, CorruptRecordError, OffsetOutOfRangeError
from ..records.batch import RecordBatch, iter_batches
from ..records.runs import BatchRun
from . import files, producer_recovery
from .failure import LogDirFailure
from .loader import load_log
from .log_producers import ProducerStateLog
from .producer_state import EXPIRATION_MS, ProducerStateManager, last_sequence
from .reader import fixed, read_batches, read_runs
from .transactions import apply_stored, is_abort_marker
from .retention import SegmentFacts, segments_to_delete
from .rewrite import move_cleaned
from .integrity import Bounds
from .segment import LogSegment, SegmentParams
from .validator import ValidatedAppend, check_fits_segment, validate_and_assign_offsets

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FetchData:
    """Raw bytes of whole (or, at the end, partial) batches starting at or before ``offset``."""

    offset: int
    records: bytes
    high_watermark: int
    log_start_offset: int


class Log(ProducerStateLog):
    """A partition directory ``<topic>-<partition>`` and everything stored in it (its producer state and
    transactions: ``log_producers.py``)."""

    def __init__(
        self,
        directory: Path,
        config,
        *,
        time: Time = SYSTEM,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        clean_shutdown: bool = False,
        failure: LogDirFailure | None = None,
        gaps_allowed_below: int | None = None,
        full_recovery: bool = False,
        used_below: int = 0,
        producer_id_expiration_ms: int = EXPIRATION_MS,
    ) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        parsed = files.parse_partition_dir(self.dir.name)
        if parsed is None:
            raise ValueError(f"{self.dir.name} is not a partition directory name (<topic>-<partition>)")
        self.topic, self.partition = parsed
        self.name = self.dir.name
        self.config = config
        self.time = time
        self.lock = threading.RLock()
        self.producer_state = ProducerStateManager(producer_id_expiration_ms)
        self.failure = failure if failure is not None else LogDirFailure(self.dir)
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self.gaps_below = 0
        loaded = load_log(self.dir, self.segment_params(), time, recovery_point, log_start_offset, clean_shutdown,
                          gaps_allowed_below, full_recovery, used_below)
        self.gaps_below = loaded.gaps_below
        self._publish(loaded.segments)
        self._next_offset = loaded.next_offset
        self.recovery_point = loaded.recovery_point
        self.log_start_offset = loaded.log_start_offset
        self.truncated_on_load = loaded.truncated_bytes
        self.damage_on_load = loaded.damage
        self._unflushed = 0
        self._last_flush_ms = time.milliseconds()
        # whether .snapshot files are here, kept as they are written and removed (a roll then lists nothing)
        self._has_snapshots = producer_recovery.tidy_at_open(self.dir, [s.base_offset for s in self.segments],
                                                             self.log_start_offset, self._next_offset)
        if loaded.txn_rebuild:  # recovered segments holding markers: their .txnindex entries, and the state
            self.producer_state = producer_recovery.rebuild_txn_indexes(
                self.dir, self.segments, loaded.txn_rebuild, self._next_offset, producer_id_expiration_ms,
                time.milliseconds())

    # segment view -------------------------------------------------------------------------------
    def segment_params(self, jitter: bool = False) -> SegmentParams:
        c = self.config
        roll_jitter = 0
        if jitter and c.segment_jitter_ms > 0:
            roll_jitter = random.randrange(min(c.segment_jitter_ms, c.segment_ms))
        return SegmentParams(c.index_interval_bytes, c.segment_index_bytes, roll_jitter, c.preallocate)

    def _publish(self, segments: list[LogSegment]) -> None:
        """Make ``segments`` the view readers take, each told what the log knows of its offsets (the
        next segment's base, where cleaning may have left gaps; a size readers see ends a whole batch), against which
        readers check the header fields the CRC does not cover."""
        segs = tuple(sorted(segments, key=lambda s: s.base_offset))
        for i, seg in enumerate(segs):
            seg.bounds = Bounds(segs[i + 1].base_offset if i + 1 < len(segs) else None, self.gaps_below, False)
        self._view = (tuple(s.base_offset for s in segs), segs)

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return self._view[1]

    @property
    def active_segment(self) -> LogSegment:
        return self._view[1][-1]

    @property
    def log_end_offset(self) -> int:
        return self._next_offset

    @property
    def high_watermark(self) -> int:
        """One node, so everything appended is committed."""
        return self._next_offset

    @property
    def size(self) -> int:
        return sum(s.size for s in self.segments)

    def segment_for(self, offset: int) -> LogSegment | None:
        bases, segs = self._view
        i = bisect.bisect_right(bases, offset) - 1
        return segs[i] if i >= 0 else None

    # appends ------------------------------------------------------------------------------------
    def append(self, records: bytes, now: int | None = None, *, prechecked: bool = False) -> ValidatedAppend:
        """Validate one client batch, assign offsets from the log end and store it (``prechecked``: see
        ``validate_and_assign_offsets``)."""
        with self.lock:
            self.failure.check()
            now = self.time.milliseconds() if now is None else now
            v = validate_and_assign_offsets(records, self._next_offset, self.config, now, self.name,
                                            prechecked=prechecked)
            pid, epoch, first_seq = v.producer_id, v.producer_epoch, v.base_sequence
            if pid >= 0:  # an idempotent producer's batch: a retry is answered with its first attempt
                last_seq = last_sequence(first_seq, v.last_offset - v.first_offset)
                dup = self._state().check_append(pid, epoch, first_seq, last_seq, v.transactional, self.name)
                if dup is not None:
                    return ValidatedAppend(b"", dup.first_offset, dup.last_offset, -1, dup.last_offset, -1,
                                           dup.last_offset - dup.first_offset + 1, False, duplicate=True,
                                           producer_id=pid, producer_epoch=epoch, base_sequence=first_seq)
            # a transaction it opens counts before the batch is visible: a reader's LSO stays below it
            held = v.transactional and self.producer_state.hold_open(pid, v.first_offset)
            try:  # (not ``with self.failure.guard``: this runs for every append)
                self._store(v.records, v.first_offset, v.last_offset, v.max_timestamp, v.offset_of_max_timestamp, now)
            except BaseException as exc:
                if held:  # (a batch too large for a segment, a failed write: not stored)
                    self.producer_state.track_close(v.first_offset)
                if isinstance(exc, OSError):
                    raise self.failure.fail(exc, f"appending to {self.name}") from exc
                raise
            if pid >= 0:
                self.producer_state.record(pid, epoch, first_seq, last_seq, v.first_offset, v.last_offset,
                                           v.max_timestamp, v.transactional)
            return v

    def append_as_follower(self, records: bytes) -> int:
        """Store batches whose offsets are already assigned (replication, restores, tests of gaps).

        Every batch is CRC-checked and must start at or after the log end offset. Returns the new log
        end offset.
        """
        with self.lock, self.failure.guard(f"appending to {self.name}"):
            now = self.time.milliseconds()
            consumed = 0
            if any(is_abort_marker(b) for _, b in iter_batches(records)):
                self._state()  # its .txnindex entry needs the transaction's first offset: loaded before storing
            for pos, batch in iter_batches(records):
                batch.ensure_valid()
                if batch.base_offset < self._next_offset:
                    raise CorruptRecordError(
                        f"batch at offset {batch.base_offset} is below the log end offset {self._next_offset} of {self.name}"
                    )
                if batch.base_offset > self._next_offset:  # a gap the leader's cleaning left: allowed from now on
                    self.gaps_below = max(self.gaps_below, batch.base_offset)
                    self._publish(list(self.segments))
                raw = bytes(batch.buffer)
                self._store(raw, batch.base_offset, batch.last_offset, batch.max_timestamp, batch.last_offset, now)
                if self.producer_state.loaded:
                    self._index(apply_stored(self.producer_state, batch))
                consumed = pos + batch.size
            if consumed != len(records):
                raise CorruptRecordError(f"{len(records) - consumed} trailing bytes do not form a whole batch")
            return self._next_offset

    def _store(self, data, first: int, last: int, max_ts: int, offset_of_max_ts: int, now: int) -> None:
        size = sum(map(len, data)) if isinstance(data, tuple) else len(data)
        seg = self._maybe_roll(size, max_ts, first, last, now)
        seg.append(last, max_ts, offset_of_max_ts, data)
        self._next_offset = last + 1
        self._unflushed += 1
        c = self.config
        if self._unflushed >= c.flush_messages or now - self._last_flush_ms >= c.flush_ms:
            self.flush()

    def _max_segment_ms(self) -> int:
        c = self.config
        if c.compact and c.max_compaction_lag_ms > 0:
            return min(c.max_compaction_lag_ms, c.segment_ms)
        return c.segment_ms

    def _maybe_roll(self, size: int, max_ts: int, first: int, last: int, now: int) -> LogSegment:
        c = self.config
        check_fits_segment(size, c, self.name)
        seg = self.active_segment
        if (
            seg.size > c.segment_bytes - size
            or (seg.size > 0 and seg.time_waited_for_roll(now, max_ts) > self._max_segment_ms() - seg.params.roll_jitter_ms)
            or seg.offset_index.is_full
            or seg.time_index.is_full
            or not seg.can_convert_to_relative_offset(last)
        ):
            return self.roll(max(first, self._next_offset))
        return seg

    def roll(self, new_base: int | None = None) -> LogSegment:
        """Close the active segment and start a new one at ``new_base`` (default: the log end offset)."""
        with self.lock, self.failure.guard(f"rolling a new segment of {self.name}"):
            base = self._next_offset if new_base is None else new_base
            old = self.active_segment
            if old.base_offset == base and old.size == 0:
                return old
            old.on_become_inactive()
            old.flush()
            self._snapshot_producer_state(base, sync_dir=False)  # the fsync of the directory below covers it
            new = LogSegment(self.dir, base, self.segment_params(jitter=True), self.time)
            self._publish([*self.segments, new])
            self.recovery_point = max(self.recovery_point, base)
            files.fsync_dir(self.dir)
            return new

    def flush(self) -> None:
        """fsync every segment holding unflushed data and move the recovery point to the log end."""
        with self.lock, self.failure.guard(f"flushing {self.name}"):
            for seg in self.segments:
                if seg.base_offset >= self.segment_base_at_or_below(self.recovery_point):
                    seg.flush()
            self.recovery_point = self._next_offset
            self._unflushed = 0
            self._last_flush_ms = self.time.milliseconds()

    def segment_base_at_or_below(self, offset: int) -> int:
        seg = self.segment_for(offset)
        return seg.base_offset if seg else 0

    # reads --------------------------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int = 1 << 20, min_one_message: bool = True) -> FetchData:
        """The stored bytes from the batch holding ``offset`` (Kafka's fetch), without decoding."""
        found = self.locate(offset, max_bytes, min_one_message)
        end = self._next_offset
        if found is None:
            return FetchData(offset, b"", end, self.log_start_offset)
        seg, position, size = found
        return FetchData(offset, seg.read_bytes(position, size) if size > 0 else b"", end, self.log_start_offset)

    def locate(self, offset: int, max_bytes: int = 1 << 20,
               min_one_message: bool = True) -> tuple[LogSegment, int, int] | None:
        """(segment, position, size) of the bytes ``read`` returns, None when there are none yet."""
        bases, segs = self._view
        end = self._next_offset
        if offset < self.log_start_offset or offset > end:
            raise OffsetOutOfRangeError(
                f"offset {offset} is out of range for {self.name} (log start offset {self.log_start_offset}, "
                f"log end offset {end})"
            )
        i = max(bisect.bisect_right(bases, offset) - 1, 0)
        while i < len(segs) and offset < end:
            seg = segs[i]
            got = seg.locate(offset, max_bytes, max_position=seg.size, min_one_message=min_one_message)
            if got is not None:
                return seg, got[0], got[1]
            i += 1
        return None

    def batches(self, start_offset: int | None = None, end_offset: int | None = None, *,
                check_crcs: bool = True) -> Iterator[RecordBatch]:
        """Every whole batch holding offsets in [start_offset, end_offset), across segments, in order,
        each checked (see ``reader.py``)."""
        start = self.log_start_offset if start_offset is None else start_offset
        end = self._next_offset if end_offset is None else end_offset
        return read_batches(fixed(self._view[1]), start, end, check_crcs=check_crcs)

    def runs(self, start_offset: int | None = None, end_offset: int | None = None, *,
             check_crcs: bool = True) -> Iterator[BatchRun]:
        """The batches of :meth:`batches` as runs lying in one read buffer each (``reader.read_runs``)."""
        start = self.log_start_offset if start_offset is None else start_offset
        end = self._next_offset if end_offset is None else end_offset
        return read_runs(fixed(self._view[1]), start, end, check_crcs=check_crcs)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record whose timestamp is >= ``timestamp`` (ListOffsets)."""
        for seg in self.segments:
            if seg.max_timestamp_so_far >= timestamp or seg is self.active_segment:
                found = seg.find_offset_by_timestamp(timestamp, self.log_start_offset)
                if found is not None:
                    return found
        return None

    # retention and deletion -----------------------------------------------------------------------
    def delete_old_segments(self, now: int | None = None) -> int:
        """Apply log-start-offset, ``retention.bytes`` and ``retention.ms`` rules; returns segments deleted."""
        with self.lock, self.failure.guard(f"deleting old segments of {self.name}"):
            now = self.time.milliseconds() if now is None else now
            c = self.config
            segs = self.segments
            facts = [SegmentFacts(s.base_offset, s.size, s.largest_timestamp) for s in segs]
            decision = segments_to_delete(
                facts, log_start_offset=self.log_start_offset, log_end_offset=self._next_offset, now=now,
                retention_ms=c.retention_ms, retention_bytes=c.retention_bytes, delete_policy=c.delete,
            )
            if decision is None:
                return 0
            doomed = list(segs[: decision.count])
            if len(doomed) == len(segs):
                self.roll()
            self.delete_segments(doomed, reason=decision.reason)
            return len(doomed)

    def delete_segments(self, doomed: list[LogSegment], reason: str = "") -> None:
        """Remove segments from the log now; their files go after ``file.delete.delay.ms``."""
        with self.lock, self.failure.guard(f"deleting segments of {self.name}"):
            ids = {id(s) for s in doomed}
            self._publish([s for s in self.segments if id(s) not in ids])
            self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
            if self._has_snapshots:  # (a partition no idempotent producer wrote lists nothing here)
                self._has_snapshots = bool(producer_recovery.delete_snapshots_outside(
                    self.dir, self.log_start_offset, 2**63, "below the log start"))
            for seg in doomed:
                log.info("deleting segment %s of %s (%s)", seg.base_offset, self.name, reason)
                self._schedule_delete(seg)
            files.fsync_dir(self.dir)

    def _schedule_delete(self, seg: LogSegment) -> None:
        seg.keep_open_for_readers()
        seg.change_suffix(seg.temp_suffix, files.DELETED_SUFFIX)
        # Readers still holding it scan from the start instead of using the index: memory does not
        # pile up over many cleaning rounds while files wait out file.delete.delay.ms.
        seg.offset_index.release_memory()
        seg.time_index.release_memory()
        due = self.time.milliseconds() + self.config.file_delete_delay_ms
        if self.config.file_delete_delay_ms <= 0:
            seg.unlink_files()
        else:
            self._pending_deletes.append((due, seg))

    def delete_expired_files(self, now: int | None = None, force: bool = False) -> int:
        """Close and unlink ``.deleted`` segments whose delay has passed."""
        now = self.time.milliseconds() if now is None else now
        with self.lock:
            due = [s for t, s in self._pending_deletes if force or t <= now]
            self._pending_deletes = [(t, s) for t, s in self._pending_deletes if not (force or t <= now)]
        for seg in due:
            seg.unlink_files()
        return len(due)

    def increment_log_start_offset(self, offset: int) -> None:
        """Advance the log start offset (Kafka's DeleteRecords); segments below it go at the next retention."""
        with self.lock:
            if offset > self._next_offset:
                raise OffsetOutOfRangeError(f"cannot move the log start offset of {self.name} past its end {self._next_offset}")
            self.log_start_offset = max(self.log_start_offset, offset)

    # swap -----------------------------------------------------------------------------------------
    def replace_segments(self, new_segments: list[LogSegment], old_segments: list[LogSegment]) -> None:
        """Swap cleaned segments in crash-safely: ``.cleaned`` -> ``.swap``, old -> ``.deleted``, ``.swap`` -> live.

        Recovery at open completes or undoes a swap interrupted at any step (see loader).
        """
        with self.lock, self.failure.guard(f"swapping cleaned segments into {self.name}"):
            new_sorted = sorted(new_segments, key=lambda s: s.base_offset)
            live = {id(s) for s in self.segments}
            old = sorted((s for s in old_segments if id(s) in live), key=lambda s: s.base_offset)
            for seg in reversed(new_sorted):
                seg.change_suffix(files.CLEANED_SUFFIX, files.SWAP_SUFFIX)
            old_ids = {id(s) for s in old}
            if old:  # the rewritten range may have gaps now: readers must know before they see it
                after = [s.base_offset for s in self.segments if s.base_offset > old[-1].base_offset]
                self.gaps_below = max(self.gaps_below, after[0] if after else self._next_offset)
            self._publish([s for s in self.segments if id(s) not in old_ids] + new_sorted)
            for seg in old:
                self._schedule_delete(seg)
            for seg in new_sorted:
                seg.change_suffix(files.SWAP_SUFFIX, "")
            files.fsync_dir(self.dir)

    def adopt_cleaned(self, base_offset: int, replaces: list[tuple[int, int]], written_in: Path | None = None) -> bool:
        """Swap in a rewritten segment: ``<base_offset>.log.cleaned`` (and its indexes), written beside the
        log or in ``written_in`` (a staging directory on the same file system), for the live segments
        ``replaces`` lists as (base offset, size). The one way a cleaning, a Spark compaction or a
        recompression hands its work to the log.

        If those segments are no longer there unchanged (retention, truncation or another job got there
        first) nothing is swapped; whatever happens, no ``.cleaned`` file is left behind. Returns whether
        the segment was swapped in."""
        with self.lock:
            live = {s.base_offset: s for s in self.segments if s is not self.active_segment}
            sources = [live.get(b) for b, _ in replaces]
            try:
                if not sources or any(s is None or s.size != size for s, (_, size) in zip(sources, replaces)):
                    return False
                if written_in is not None and Path(written_in) != self.dir:
                    move_cleaned(Path(written_in), self.dir, base_offset)
                new = LogSegment(self.dir, base_offset, self.segment_params(), self.time, temp_suffix=files.CLEANED_SUFFIX)
                try:
                    self.replace_segments([new], sources)
                except BaseException:
                    new.close_handlers()
                    raise
                return True
            finally:
                for d in {self.dir, Path(written_in) if written_in is not None else self.dir}:
                    for suffix in files.SEGMENT_SUFFIXES:
                        files.segment_file(d, base_offset, suffix, files.CLEANED_SUFFIX).unlink(missing_ok=True)

    def truncate_to(self, offset: int) -> bool:
        """Remove every record at or after ``offset``; returns whether anything was removed."""
        if not isinstance(offset, int) or offset < 0:
            raise OffsetOutOfRangeError(f"cannot truncate {self.name} to offset {offset}: offsets are >= 0")
        with self.lock, self.failure.guard(f"truncating {self.name}"):
            if offset >= self._next_offset:
                return False
            keep = [s for s in self.segments if s.base_offset < offset]
            drop = [s for s in self.segments if s.base_offset >= offset]
            if not keep:
                keep = [LogSegment(self.dir, offset, self.segment_params(jitter=True), self.time)]
            else:
                keep[-1].truncate_to(offset)
            self._publish(keep)
            for seg in drop:
                self._schedule_delete(seg)
            self._next_offset = self.active_segment.read_next_offset()
            self.producer_state.reset()
            if self._has_snapshots:
                self._has_snapshots = bool(producer_recovery.delete_snapshots_outside(
                    self.dir, 0, self._next_offset, "above the truncated end"))
            self.recovery_point = min(self.recovery_point, self._next_offset)
            self.log_start_offset = min(self.log_start_offset, self._next_offset)
            # the renames to .deleted and the removed snapshots last: else a crash after later appends
            # were flushed could bring back segments or a snapshot of the log before the cut
            files.fsync_dir(self.dir)
            return True

    # lifecycle ------------------------------------------------------------------------------------
    def update_config(self, config) -> None:
        with self.lock:
            self.config = config

    def close(self) -> None:
        """Flush and close every file. Every file is closed even when something fails (the directory
        then goes offline and the error is raised at the end)."""
        with self.lock:
            first: CompactLogError | None = None
            if not self.failure.offline:
                try:
                    self.flush()
                    if self.producer_state.loaded:  # else the snapshots there are replayed from next time
                        with self.failure.guard(f"writing the producer snapshot of {self.name}"):
                            self._snapshot_producer_state(self._next_offset)
                except CompactLogError as exc:
                    first = exc
            for seg in self.segments:
                try:
                    if self.failure.offline:
                        seg.close_handlers()
                    else:
                        seg.close()
                except OSError as exc:
                    first = first or self.failure.fail(exc, f"closing {seg.file_name}")
                    seg.close_handlers()
            self.delete_expired_files(force=True)
            if first is not None:
                raise first

    def delete(self) -> None:
        """Close every file and remove the partition directory."""
        with self.lock:
            for seg in self.segments:
                seg.close_handlers()
            self.delete_expired_files(force=True)
            shutil.rmtree(self.dir, ignore_errors=True)

    def __repr__(self) -> str:
        return f"Log({self.name}, start={self.log_start_offset}, end={self._next_offset}, segments={len(self.segments)})"
