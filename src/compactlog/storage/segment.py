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
from .index import CorruptIndexError, OffsetIndex, TimeIndex

MAX_RELATIVE_OFFSET = 2**31 - 1
READ_CHUNK = 1 << 20  # bytes read at a time when scanning batch headers


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
        self._fd = os.open(self.log_path, os.O_RDONLY) if read_only else os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.size = os.fstat(self._fd).st_size
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

    # reading ------------------------------------------------------------------------------------
    def read_bytes(self, position: int, size: int) -> bytes:
        return os.pread(self._fd, size, position)

    def batches(self, position: int = 0, end: int | None = None) -> Iterator[tuple[int, RecordBatch]]:
        """Yield (file position, batch) for whole batches from ``position``, reading in large chunks.

        A partial batch at the end of the file ends the iteration quietly (a torn tail); an impossible
        batch length raises CorruptRecordError.
        """
        end = self.size if end is None else end
        while end - position >= HEADER_SIZE_UP_TO_MAGIC:
            chunk = self.read_bytes(position, min(READ_CHUNK, end - position))
            consumed = 0
            for pos, batch in iter_batches(chunk):
                consumed = pos + batch.size
                yield position + pos, batch
            if consumed == 0:
                # The next batch is larger than a chunk (or runs past the end): read exactly it.
                length = int.from_bytes(chunk[8:12], "big", signed=True)
                if length < HEADER_SIZE - LOG_OVERHEAD:
                    raise CorruptRecordError(f"batch at position {position} of {self.log_path.name} has an impossible length {length}")
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

    def read(self, start_offset: int, max_size: int, max_position: int | None = None,
             min_one_message: bool = False) -> tuple[int, bytes] | None:
        """Bytes of whole-or-partial batches from the batch holding ``start_offset`` (Kafka's fetch slice).

        Returns (position, bytes) or None when the offset is past this segment. With
        ``min_one_message`` the first batch is returned whole even if larger than ``max_size``.
        """
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        position, batch = found
        limit = self.size if max_position is None else max_position
        size = max(max_size, batch.size) if min_one_message else max_size
        size = min(size, limit - position)
        return position, (self.read_bytes(position, size) if size > 0 else b"")

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
        written = os.pwritev(self._fd, parts, position)
        if written != size:
            raise OSError(f"short write to {self.log_path}: {written} of {size} bytes")
        self.size += written
        if self._rolling_timestamp is None and position == 0:
            self._rolling_timestamp = RecordBatch(parts[0]).max_timestamp
        if largest_timestamp > self.max_timestamp_so_far:
            self.max_timestamp_so_far = largest_timestamp
            self.offset_of_max_timestamp = offset_of_max_timestamp
        if self.bytes_since_last_index_entry > self.params.index_interval_bytes:
            self.offset_index.append(largest_offset, position)
            self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += size

    def recover(self) -> int:
        """Rebuild both indexes from the log, truncating at the first invalid or partial batch.

        Returns the number of bytes truncated. Every batch is CRC-checked and its offsets checked
        against this segment's relative range, as Kafka's recovery does.
        """
        self.offset_index.reset()
        self.time_index.reset()
        self.max_timestamp_so_far, self.offset_of_max_timestamp = -1, self.base_offset
        self._rolling_timestamp = None
        valid = 0
        last_index_position = 0
        try:
            for position, batch in self.batches(0):
                batch.ensure_valid()
                if not 0 <= batch.last_offset - self.base_offset <= MAX_RELATIVE_OFFSET or batch.base_offset < self.base_offset:
                    raise CorruptRecordError(f"batch offsets {batch.base_offset}..{batch.last_offset} out of range")
                if batch.max_timestamp > self.max_timestamp_so_far:
                    self.max_timestamp_so_far, self.offset_of_max_timestamp = batch.max_timestamp, batch.last_offset
                if position - last_index_position > self.params.index_interval_bytes:
                    self.offset_index.append(batch.last_offset, position)
                    self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp)
                    last_index_position = position
                if self._rolling_timestamp is None:
                    self._rolling_timestamp = batch.max_timestamp
                valid = position + batch.size
        except CorruptRecordError:
            pass
        truncated = self.size - valid
        if truncated:
            os.ftruncate(self._fd, valid)
            self.size = valid
        self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp, skip_full_check=True)
        self.bytes_since_last_index_entry = valid - last_index_position if self.offset_index.entries else valid
        return truncated

    def truncate_to(self, offset: int) -> int:
        """Remove every batch at or after the one holding ``offset``; returns bytes removed."""
        found = self.translate_offset(offset)
        if found is None:
            return 0
        position, _ = found
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        removed = self.size - position
        os.ftruncate(self._fd, position)
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
        os.fsync(self._fd)
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
        os.replace(self.log_path, target)
        self.log_path = target
        for idx in (self.offset_index, self.time_index):
            idx.rename(renamed(idx.path))
        self.temp_suffix = new

    def close(self) -> None:
        if self._fd >= 0 and self.read_only:
            self.close_handlers()
        if self._fd >= 0:
            if not self.temp_suffix:
                self.on_become_inactive()
            self.offset_index.close()
            self.time_index.close()
            if self.params.preallocate:
                os.ftruncate(self._fd, self.size)
            os.close(self._fd)
            self._fd = -1

    def close_handlers(self) -> None:
        """Close files without writing anything (the segment is being deleted)."""
        if self._fd >= 0:
            self.offset_index.close()
            self.time_index.close()
            os.close(self._fd)
            self._fd = -1

    def delete_files(self) -> None:
        self.close_handlers()
        self.unlink_files()

    def unlink_files(self) -> None:
        """Remove the files but keep the descriptor: readers still holding this segment read on.

        The descriptor closes when the last reference goes (``__del__``), as with any unlinked file.
        """
        for p in [self.log_path, *self.index_paths()]:
            Path(p).unlink(missing_ok=True)
        txn = files.segment_file(self.directory, self.base_offset, files.TXN_INDEX_SUFFIX, self.temp_suffix)
        txn.unlink(missing_ok=True)

    def __del__(self) -> None:
        fd = getattr(self, "_fd", -1)
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size}, suffix={self.temp_suffix!r})"
