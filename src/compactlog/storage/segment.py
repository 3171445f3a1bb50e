"""LogSegment: one ``.log`` file of whole batches plus its offset and time indexes.

A segment with base offset B holds batches whose offsets satisfy ``0 <= offset - B <= 2^31 - 1``.
Appends add whole batches at the end of the file and, every ``index.interval.bytes``, one entry to each
index (never for the first append of a segment). Reads find a batch through the sparse offset index and
a short forward scan of batch headers; no record is decoded to find a position.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from ..clock import SYSTEM, Time
from ..errors import CorruptRecordError
from ..records.batch import HEADER_SIZE, HEADER_SIZE_UP_TO_MAGIC, LOG_OVERHEAD, RecordBatch, iter_batches
from . import files
from .files import write_fully
from .handles import POOL
from .index import CorruptIndexError, OffsetIndex, TimeIndex
from .integrity import MAX_RELATIVE_OFFSET, Damage, batch_problem

READ_CHUNK = 1 << 20  # bytes read at a time when scanning batch headers


@dataclass(frozen=True)
class Recovery:
    """What rebuilding a segment found: bytes cut from a torn tail, the damage seen, the next offset."""

    truncated: int
    damage: list[Damage]
    next_offset: int


@dataclass(frozen=True)
class SegmentParams:
    """The topic configs a segment needs, so segments never see the whole config."""

    index_interval_bytes: int = 4096
    max_index_size: int = 10 * 1024 * 1024
    roll_jitter_ms: int = 0
    preallocate: bool = False


class LogSegment:
    """One segment's files. Not thread-safe for writers: the owning Log serializes appends."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        params: SegmentParams = SegmentParams(),
        time: Time = SYSTEM,
        temp_suffix: str = "",
        read_only: bool = False,
    ) -> None:
        self.directory = Path(directory)
        self.base_offset = base_offset
        self.params = params
        self.time = time
        self.temp_suffix = temp_suffix
        self.read_only = read_only
        self.log_path = files.segment_file(self.directory, base_offset, files.LOG_SUFFIX, temp_suffix)
        self._handle = -1
        if read_only:  # a reader's snapshot: its own descriptors, held for the snapshot's life
            self._handle = os.open(self.log_path, os.O_RDONLY)
            self.size = os.fstat(self._handle).st_size
        else:
            self._create = True
            with POOL.use(self) as fd:
                self.size = os.fstat(fd).st_size
        self.offset_index = self._open_index(OffsetIndex, files.INDEX_SUFFIX)
        self.time_index = self._open_index(TimeIndex, files.TIME_INDEX_SUFFIX)
        self.created_ms = time.milliseconds()
        self.bytes_since_last_index_entry = 0
        self.max_timestamp_so_far, self.offset_of_max_timestamp = self.time_index.last_entry()
        self._rolling_timestamp: int | None = None

    def _open_index(self, cls: type, suffix: str):
        path = files.segment_file(self.directory, self.base_offset, suffix, self.temp_suffix)
        try:
            return cls(path, self.base_offset, self.params.max_index_size, self.read_only)
        except CorruptIndexError:
            if self.read_only:  # a reader only loses the shortcut: scan from the start of the segment
                return cls(path.with_name(path.name + ".unreadable"), self.base_offset, self.params.max_index_size, True)
            path.unlink()  # derived data: the caller's recovery rebuilds it
            idx = cls(path, self.base_offset, self.params.max_index_size)
            self.needs_recovery = True
            return idx

    needs_recovery = False
    _closed = False
    _create = False
    # the descriptor pool's bookkeeping (handles.py)
    _borrows = 0
    _close_pending = False
    _pooled = True

    def _open_handle(self) -> int:
        """Open the ``.log`` for the pool: created only the first time (a later reopen of a file that
        is gone is an error, not a new empty segment)."""
        flags = os.O_RDONLY if self.read_only else os.O_RDWR | (os.O_CREAT if self._create else 0)
        fd = os.open(self.log_path, flags, 0o644)
        self._create = False
        return fd

    @property
    def file_name(self) -> str:
        """``<partition dir>/<file>``: how messages name this segment."""
        return f"{self.directory.name}/{self.log_path.name}"

    # reading ------------------------------------------------------------------------------------
    def read_bytes(self, position: int, size: int) -> bytes:
        fd = POOL.acquire(self)  # (not ``with POOL.use``: this is the hot path of every read)
        try:
            return os.pread(fd, size, position)
        finally:
            POOL.release(self)

    def batches(self, position: int = 0, end: int | None = None) -> Iterator[tuple[int, RecordBatch]]:
        """Yield (file position, batch) for whole batches from ``position``, reading in large chunks.

        A partial batch at the end of the file ends the iteration quietly (a torn tail); an impossible
        batch length raises CorruptRecordError.
        """
        end = self.size if end is None else end
        while end - position >= HEADER_SIZE_UP_TO_MAGIC:
            chunk = self.read_bytes(position, min(READ_CHUNK, end - position))
            consumed = 0
            try:
                for pos, batch in iter_batches(chunk):
                    consumed = pos + batch.size
                    yield position + pos, batch
            except CorruptRecordError:  # an impossible length after ``consumed``: reported below
                position += consumed
                chunk = chunk[consumed:]
                consumed = 0
            if consumed == 0:
                # The next batch is larger than a chunk (or runs past the end): read exactly it.
                length = int.from_bytes(chunk[8:12], "big", signed=True)
                if length < HEADER_SIZE - LOG_OVERHEAD:
                    raise CorruptRecordError(f"batch at {self.file_name} position {position} has an impossible length {length}")
                need = length + LOG_OVERHEAD
                if position + need > end:
                    return
                yield position, RecordBatch(self.read_bytes(position, need))
                consumed = need
            position += consumed

    def translate_offset(self, offset: int, starting_position: int = 0) -> tuple[int, RecordBatch] | None:
        """(position, batch) of the first batch whose last offset is >= ``offset``, or None."""
        _, pos = self.offset_index.lookup(offset)
        for position, batch in self.batches(max(pos, starting_position)):
            if batch.last_offset >= offset:
                return position, batch
        return None

    def locate(self, start_offset: int, max_size: int, max_position: int | None = None,
               min_one_message: bool = False) -> tuple[int, int] | None:
        """(position, size) of the bytes a fetch from ``start_offset`` returns (Kafka's fetch slice): from
        the batch holding it, whole or partial batches up to ``max_size``, the first batch whole even if
        larger with ``min_one_message``; None when the offset is past this segment. The caller reads
        them (``read_bytes``) or sends the file range itself (sendfile)."""
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        position, batch = found
        limit = self.size if max_position is None else max_position
        size = max(max_size, batch.size) if min_one_message else max_size
        return position, max(min(size, limit - position), 0)

    def duplicate_handle(self) -> int:
        """A descriptor of this segment's file of the caller's own (to close): it stays valid when the pool
        closes its own or the file is renamed or unlinked (a zero-copy fetch sends from it later)."""
        fd = POOL.acquire(self)
        try:
            return os.dup(fd)
        finally:
            POOL.release(self)

    def read_next_offset(self) -> int:
        """The offset after the last batch (the base offset when empty)."""
        _, pos = self.offset_index.lookup(2**63 - 1)
        nxt = self.base_offset
        for _, batch in self.batches(pos):
            nxt = batch.next_offset
        return nxt

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int = 0) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record with timestamp >= ``timestamp`` at or after
        ``starting_offset``; None when no record in this segment qualifies."""
        _, ts_offset = self.time_index.lookup(timestamp)
        _, pos = self.offset_index.lookup(max(ts_offset, starting_offset))
        for _, batch in self.batches(pos):
            if batch.max_timestamp >= timestamp and batch.last_offset >= starting_offset:
                for rec in batch.records():
                    if rec.timestamp >= timestamp and rec.offset >= starting_offset:
                        return rec.timestamp, rec.offset
        return None

    # checking ----------------------------------------------------------------------------------
    def _walk(self, position: int) -> Iterator[tuple[int, RecordBatch | None, str | None]]:
        """(position, batch, None) for each batch whose length can be followed from ``position``; a
        final (position, None, why) where the lengths stop making sense before the end of the file."""
        end = self.size
        while position < end:
            if end - position < HEADER_SIZE_UP_TO_MAGIC:
                yield position, None, f"{end - position} bytes at the end are too few for a batch header"
                return
            head = self.read_bytes(position, LOG_OVERHEAD)
            length = int.from_bytes(head[8:12], "big", signed=True)
            if length < HEADER_SIZE - LOG_OVERHEAD:
                yield position, None, f"impossible batch length {length}"
                return
            if position + LOG_OVERHEAD + length > end:
                yield position, None, f"partial batch: {length + LOG_OVERHEAD} bytes declared, {end - position} present"
                return
            chunk = self.read_bytes(position, min(READ_CHUNK, end - position))
            consumed = 0
            try:
                for pos, batch in iter_batches(chunk):
                    consumed = pos + batch.size
                    yield position + pos, batch, None
            except CorruptRecordError:  # an impossible length further on: the next turn reports it
                pass
            if consumed == 0:  # one batch larger than a chunk
                batch = RecordBatch(self.read_bytes(position, length + LOG_OVERHEAD))
                consumed = batch.size
                yield position, batch, None
            position += consumed

    def audit(self, position: int = 0, expected_next: int | None = None,
              gaps_below: int | None = None) -> Iterator[tuple[int, RecordBatch | None, Damage | None]]:
        """Every batch from ``position`` with its verdict: (position, batch, None) when sound, or
        (position, batch or None, damage). Damage followed by a sound batch is in the middle of the file
        (kept, never cut); damage that nothing sound follows is a torn tail. ``expected_next``: the
        offset the first batch must start at (unknown when None); ``gaps_below``: see ``batch_problem``."""
        known = expected_next is not None
        expected = self.base_offset if expected_next is None else expected_next
        pending: list[tuple[int, RecordBatch, str]] = []
        for position_, batch, why in self._walk(position):
            if batch is None:
                for p, b, w in pending:
                    yield p, b, Damage(self.file_name, p, w, True)
                yield position_, None, Damage(self.file_name, position_, why or "unreadable", True)
                return
            # After damage the offsets it covered are unknown: the next batch need only go forward.
            jumps = gaps_below if known and not pending else None
            problem = batch_problem(batch, self.base_offset, expected, True, jumps)
            if problem is not None:
                pending.append((position_, batch, problem))
                continue
            for p, b, w in pending:
                yield p, b, Damage(self.file_name, p, w, False)
            pending = []
            expected, known = batch.next_offset, True
            yield position_, batch, None
        for p, b, w in pending:
            yield p, b, Damage(self.file_name, p, w, True)

    def tail_is_sound(self, gaps_below: int | None = None) -> bool:
        """After a clean shutdown: do the batches after the last index entry check out and end exactly
        at the end of the file? (Kafka trusts a clean shutdown; a file edited or torn since should not
        be trusted, and this costs one index interval of reading.)"""
        last_offset, position = self.offset_index.lookup(2**63 - 1)
        first = True
        for _, batch, damage in self.audit(position, None if position else self.base_offset, gaps_below):
            if damage is not None:
                return False
            if first and self.offset_index.entries and batch.last_offset != last_offset:
                return False
            first = False
        return True

    # writing ------------------------------------------------------------------------------------
    def append(self, largest_offset: int, largest_timestamp: int, offset_of_max_timestamp: int, records) -> None:
        """Append whole batches (already validated and offset-assigned).

        ``records`` is bytes, or a tuple of buffers written in one ``pwritev`` (a patched header and
        the producer's untouched records, so the in-place path copies nothing).
        """
        parts = records if isinstance(records, tuple) else (records,)
        size = sum(len(p) for p in parts)
        if not size:
            return
        if not 0 <= largest_offset - self.base_offset <= MAX_RELATIVE_OFFSET:
            raise CorruptRecordError(
                f"offset {largest_offset} cannot be stored in the segment with base offset {self.base_offset}"
            )
        position = self.size
        entries = self.offset_index.entries, self.time_index.entries
        try:
            fd = POOL.acquire(self)
            try:
                written = write_fully(fd, parts, position)
            finally:
                POOL.release(self)
            max_ts, max_ts_offset = self.max_timestamp_so_far, self.offset_of_max_timestamp
            if largest_timestamp > max_ts:
                max_ts, max_ts_offset = largest_timestamp, offset_of_max_timestamp
            if self.bytes_since_last_index_entry > self.params.index_interval_bytes:
                self.offset_index.append(largest_offset, position)
                self.time_index.maybe_append(max_ts, max_ts_offset)
        except OSError:
            self._roll_back(position, *entries)
            raise
        self.size += written
        self.max_timestamp_so_far, self.offset_of_max_timestamp = max_ts, max_ts_offset
        if self._rolling_timestamp is None and position == 0:
            self._rolling_timestamp = RecordBatch(parts[0]).max_timestamp
        if self.offset_index.entries > entries[0]:
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += size

    def _roll_back(self, position: int, index_entries: int, time_index_entries: int) -> None:
        """Undo a failed append: the file ends again after the last complete batch, and the indexes
        hold what they held. Best effort: if this fails too, the log directory is marked failed and
        recovery at the next open finishes the job (no clean-shutdown marker is written then)."""
        try:
            with POOL.use(self) as fd:
                os.ftruncate(fd, position)
            if self.offset_index.entries > index_entries:
                self.offset_index._truncate_entries(index_entries)
            if self.time_index.entries > time_index_entries:
                self.time_index._truncate_entries(time_index_entries)
        except OSError:
            pass

    def recover(self, expected_next: int | None = None, cut_tail: bool = True, gaps_below: int | None = None) -> Recovery:
        """Rebuild both indexes from the log, checking every batch (size, CRC, offsets that follow
        ``expected_next``), as Kafka's recovery does.

        Kafka truncates at the first bad batch. We cut only a torn tail, damage that nothing sound
        follows, and only when ``cut_tail`` (the last segment of a log, the only one a crash can tear).
        Damage in the middle is kept where it is, left out of the indexes and reported: readers then
        meet it as a CRC error naming its position, and no later batch is dropped silently.
        """
        self.offset_index.reset()
        self.time_index.reset()
        self.max_timestamp_so_far, self.offset_of_max_timestamp = -1, self.base_offset
        self._rolling_timestamp = None
        next_offset = self.base_offset if expected_next is None else max(expected_next, self.base_offset)
        last_index_position = 0
        damage: list[Damage] = []
        tail_at = None
        for position, batch, bad in self.audit(0, expected_next, gaps_below):
            if bad is not None:
                damage.append(bad)
                if bad.tail and tail_at is None:
                    tail_at = position
                continue
            if batch.max_timestamp > self.max_timestamp_so_far:
                self.max_timestamp_so_far, self.offset_of_max_timestamp = batch.max_timestamp, batch.last_offset
            if position - last_index_position > self.params.index_interval_bytes:
                self.offset_index.append(batch.last_offset, position)
                self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp)
                last_index_position = position
            if self._rolling_timestamp is None:
                self._rolling_timestamp = batch.max_timestamp
            next_offset = batch.next_offset
        truncated = 0
        valid = self.size if tail_at is None else tail_at
        if cut_tail and tail_at is not None:
            truncated = self.size - tail_at
            with POOL.use(self) as fd:
                os.ftruncate(fd, tail_at)
            self.size = tail_at
        self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp, skip_full_check=True)
        self.bytes_since_last_index_entry = valid - last_index_position if self.offset_index.entries else valid
        return Recovery(truncated, damage, next_offset)

    def truncate_to(self, offset: int) -> int:
        """Remove every batch at or after the one holding ``offset``; returns bytes removed."""
        found = self.translate_offset(offset)
        if found is None:
            return 0
        position, _ = found
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        removed = self.size - position
        with POOL.use(self) as fd:
            os.ftruncate(fd, position)
        self.size = position
        self.max_timestamp_so_far, self.offset_of_max_timestamp = self.time_index.last_entry()
        if self.max_timestamp_so_far < 0:
            for _, batch in self.batches(self.offset_index.lookup(offset)[1]):
                if batch.max_timestamp > self.max_timestamp_so_far:
                    self.max_timestamp_so_far, self.offset_of_max_timestamp = batch.max_timestamp, batch.last_offset
        self.bytes_since_last_index_entry = 0
        if position == 0:
            self.created_ms = self.time.milliseconds()
            self._rolling_timestamp = None
        return removed

    def on_become_inactive(self) -> None:
        """Write the final time-index entry Kafka writes when a segment stops being active."""
        self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp, skip_full_check=True)

    # facts used by rolling, retention and cleaning -----------------------------------------------
    @property
    def rolling_timestamp(self) -> int:
        """Max timestamp of the first batch (Kafka's rollingBasedTimestamp); -1 when empty."""
        if self._rolling_timestamp is None:
            first = next(self.batches(0), None)
            self._rolling_timestamp = first[1].max_timestamp if first else -1
        return self._rolling_timestamp

    def time_waited_for_roll(self, now: int, largest_timestamp: int) -> int:
        first = self.rolling_timestamp
        return largest_timestamp - first if first >= 0 else now - self.created_ms

    @property
    def largest_timestamp(self) -> int:
        """Max record timestamp, or the file's mtime when no record has one (retention uses this)."""
        if self.max_timestamp_so_far >= 0:
            return self.max_timestamp_so_far
        return int(os.stat(self.log_path).st_mtime * 1000)

    @property
    def last_modified_ms(self) -> int:
        return int(os.stat(self.log_path).st_mtime * 1000)

    def set_last_modified(self, ms: int) -> None:
        os.utime(self.log_path, (ms / 1000, ms / 1000))

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= MAX_RELATIVE_OFFSET

    # files --------------------------------------------------------------------------------------
    def flush(self) -> None:
        with POOL.use(self) as fd:
            os.fsync(fd)
        self.offset_index.flush()
        self.time_index.flush()

    def index_paths(self) -> list[Path]:
        return [self.offset_index.path, self.time_index.path]

    def change_suffix(self, old: str, new: str) -> None:
        """Rename every file of this segment from temp suffix ``old`` to ``new`` (the swap protocol)."""
        def renamed(p: Path) -> Path:
            name = p.name[: -len(old)] if old and p.name.endswith(old) else p.name
            return p.with_name(name + new)

        target = renamed(self.log_path)

        def move() -> None:
            os.replace(self.log_path, target)
            self.log_path = target

        POOL.rename(move)
        for idx in (self.offset_index, self.time_index):
            idx.rename(renamed(idx.path))
        self.temp_suffix = new

    def keep_open_for_readers(self) -> None:
        """Before this segment is renamed away and unlinked: hold its ``.log`` descriptor outside the
        pool, so readers that still hold the segment read on; it closes with the last reference."""
        POOL.detach(self)
        self.offset_index.close()
        self.time_index.close()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if not self.temp_suffix and not self.read_only:
                self.on_become_inactive()
            self.offset_index.close()
            self.time_index.close()
            if self.params.preallocate and not self.read_only:
                with POOL.use(self) as fd:
                    os.ftruncate(fd, self.size)
            POOL.close(self)

    def close_handlers(self) -> None:
        """Close files without writing anything (the segment is being deleted)."""
        self._closed = True
        self.offset_index.close()
        self.time_index.close()
        POOL.close(self)

    def delete_files(self) -> None:
        self.close_handlers()
        self.unlink_files()

    def unlink_files(self) -> None:
        """Remove the files. A descriptor held by :meth:`keep_open_for_readers` stays open, so readers
        still holding this segment read on; it closes when the last reference goes (``__del__``)."""
        for p in [self.log_path, *self.index_paths()]:
            Path(p).unlink(missing_ok=True)
        txn = files.segment_file(self.directory, self.base_offset, files.TXN_INDEX_SUFFIX, self.temp_suffix)
        txn.unlink(missing_ok=True)

    def __del__(self, _close=os.close) -> None:  # bound now: at interpreter exit ``os`` may be gone
        fd = getattr(self, "_handle", -1)
        if fd >= 0:
            try:
                _close(fd)
            except OSError:
                pass

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size}, suffix={self.temp_suffix!r})"
