"""LogSegment: one ``.log`` file of whole batches plus its offset and time indexes, and the
``.txnindex`` of the aborted transactions whose markers it holds (``txn_index``, opened when first used).

A segment with base offset B holds batches whose offsets satisfy ``0 <= offset - B <= 2^31 - 1``.
Appends add whole batches at the end of the file and, every ``index.interval.bytes``, one entry to each
index (never for the first append of a segment). Reads find a batch through the sparse offset index and
a short forward scan of batch headers; no record is decoded to find a position.
"""

from __future__ import annotations

import mmap
import os
import threading
from array import array
from bisect import bisect_left
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from ..clock import SYSTEM, Time
from ..errors import CorruptRecordError
from ..records.batch import (
    HEADER_SIZE,
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MAGIC,
    RecordBatch,
    batch_size_at,
    iter_batches,
)
from ..records import kernels
from . import files
from .files import write_fully
from .handles import POOL
from .index import CorruptIndexError, OffsetIndex, TimeIndex
from .transaction_index import TransactionIndex
from .integrity import LENIENT, MAX_RELATIVE_OFFSET, Bounds, Damage, batch_problem, header_problem


def _python_walk(*args) -> int:
    """Passes no batch: every header goes to the Python walk of ``LogSegment._runs``."""
    return 0


# The compiled header walk where the kernels are compiled. With the Python twin, the walk in this module
# (the rules' reference, ``header_problem``) is the faster of the two Python forms, and a reader thread
# spending longer in Python holds up the other threads appending beside it.
walk_headers = kernels.walk_headers if kernels.NATIVE else _python_walk

READ_CHUNK = 1 << 20  # bytes read at a time when scanning batch headers
FIRST_READ = 1 << 14  # the checked walk's first read; each next one is 4 times larger, up to READ_CHUNK
FIRST_ROWS, WALK_ROWS = 64, 256  # batch headers the compiled walk checks in its first call, in each later one
INT64_MAX = (1 << 63) - 1
_TXN_INDEX_LOCK = threading.Lock()  # guards the lazy opening of ``LogSegment.txn_index``

# A run of batches the checked walk hands out: (buffer, file position of buffer[0], rows, batch). The
# rows are flat, 4 ints a batch: (position in buffer, size, base offset, last offset), a sequence that is
# valid until the walk goes on (the compiled walk's output, read in place); ``batch`` is the RecordBatch
# of a run of one that the Python walk built, else None.
Run = tuple[Any, int, "Sequence[int]", "RecordBatch | None"]


@dataclass(frozen=True)
class Recovery:
    """What rebuilding a segment found: bytes cut from a torn tail, the damage seen, the next offset."""

    truncated: int
    damage: list[Damage]
    next_offset: int
    markers: bool = False  # the segment holds control batches: its .txnindex (reset) must be rebuilt


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
    bounds: Bounds = LENIENT  # set by the log (or snapshot) holding the segment
    _closed = False
    _create = False
    # the descriptor pool's bookkeeping (handles.py)
    _borrows = 0
    _close_pending = False
    _pooled = True
    _maps: dict[int, memoryview] | None = None  # by thread: walks reading through a memory map (``mapped``)
    _txn_index: TransactionIndex | None = None

    @property
    def txn_index(self) -> TransactionIndex:
        """The segment's ``.txnindex`` (its aborted transactions), opened on first use; the file is
        created by its first entry, renamed, truncated and deleted with the segment. Read-only in a
        reader's snapshot."""
        idx = self._txn_index
        if idx is None:
            with _TXN_INDEX_LOCK:  # one object per segment: a reader's and the writer's would disagree on its size
                idx = self._txn_index
                if idx is None:
                    path = files.segment_file(self.directory, self.base_offset, files.TXN_INDEX_SUFFIX, self.temp_suffix)
                    idx = self._txn_index = TransactionIndex(path, self.base_offset, read_only=self.read_only)
        return idx

    def _txn_path(self) -> Path:
        if self._txn_index is not None:
            return self._txn_index.path
        return files.segment_file(self.directory, self.base_offset, files.TXN_INDEX_SUFFIX, self.temp_suffix)

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
    def damage(self, why: str, position: int, more: str = "") -> CorruptRecordError:
        """The error a reader raises for damage here: it names the partition, the file and the position
        (also kept as ``position``, where a walk may go on from, see :meth:`translate_offset`)."""
        exc = CorruptRecordError(f"{self.directory.name}: {why} ({self.file_name} position {position}{more})")
        exc.position = position
        return exc

    def read_bytes(self, position: int, size: int) -> bytes:
        if self._maps is not None:  # this thread may be walking the segment through a map (``mapped``)
            view = self._maps.get(threading.get_ident())
            if view is not None:
                return view[position : position + size]  # type: ignore[return-value]  # bytes-like, no copy
        fd = POOL.acquire(self)  # (not ``with POOL.use``: this is the hot path of every read)
        try:
            return os.pread(fd, size, position)
        finally:
            POOL.release(self)

    @contextmanager
    def mapped(self) -> Iterator[None]:
        """Within the block, the calling thread's reads of this segment (its walks: :meth:`batches`) are
        views of one read-only memory map of the file instead of a pread copy each: for a reader that
        reads every byte of the segment, as the cleaner does twice. The batches handed out are then views
        of the map (they keep it alive; it goes with the last of them), so a chunk of them is scanned in
        place. Other threads read as before. The checks are the same: only where the bytes come from
        changes.

        Only for a segment nothing truncates while it is read through the map (truncating a mapped file
        under a reader is a SIGBUS, not an error): the cleaner's sources are never the active segment, and
        a truncation waits until the cleaner has let go of the partition. The map spans the file as it is
        now, up to the segment's size (at most ``segment.bytes``); an empty segment reads as before."""
        me = threading.get_ident()
        fd = POOL.acquire(self)
        try:
            length = min(os.fstat(fd).st_size, self.size)  # (a preallocated file is longer)
            view = memoryview(mmap.mmap(fd, length, access=mmap.ACCESS_READ)) if length else None
        finally:
            POOL.release(self)
        if view is None:
            yield
            return
        self._maps = {**(self._maps or {}), me: view}
        try:
            yield
        finally:
            rest = {t: v for t, v in (self._maps or {}).items() if t != me}
            self._maps = rest or None

    def _raw(self, position: int, end: int, stop: int) -> Iterator[tuple[int, RecordBatch]]:
        """(file position, batch) of whole batches from ``position`` up to the file end ``end``, reading
        in large chunks, ending after the first batch that starts at or beyond ``stop``. A batch length
        below the header's size is damage, and so is one running past the end of the file unless the
        segment may be growing (another process appends) and no sound batch follows it."""
        while end - position >= HEADER_SIZE_UP_TO_MAGIC:
            chunk = self.read_bytes(position, min(READ_CHUNK, end - position, max(stop - position, 0) + 4096))
            consumed = 0
            try:
                for pos, batch in iter_batches(chunk):
                    consumed = pos + batch.size
                    yield position + pos, batch
                    if position + pos >= stop:
                        return
            except CorruptRecordError:  # an impossible length after ``consumed``: reported below
                pass
            position += consumed
            if consumed:
                continue
            # The next batch is larger than a chunk, runs past the end, or has an impossible length.
            need = batch_size_at(chunk)
            if need < HEADER_SIZE:
                raise self.damage(f"batch at position {position} has an impossible length {need - LOG_OVERHEAD}",
                                  position)
            if position + need > end:
                break
            yield position, RecordBatch(self.read_bytes(position, need))
            if position >= stop:
                return
            position += need
        if position < end and (not self.bounds.growing or self._resync(position) is not None):
            raise self.damage(f"a batch runs past the end of the segment or the next batch "
                              f"({end - position} bytes left)", position)

    def batches(self, position: int = 0, end: int | None = None, *,
                expected: int | None = None) -> Iterator[tuple[int, RecordBatch]]:
        """Yield (file position, batch) for whole batches from ``position`` (a batch boundary) to
        ``end`` (default: the end of the file), each header checked (``integrity.header_problem``)
        against the segment, the bounds its log set and the batch before it. A batch is handed out only
        once the header after it, or the end of the segment, agrees with it: a base offset flipped up
        overlaps its successor and is caught before any of its records is. Damage raises
        CorruptRecordError naming the partition, the file and the position. CRCs are the caller's
        (``ensure_valid``), so that readers with ``check.crcs=false`` skip them.

        ``expected``: the offset the first batch must start at, when the batch before it is known
        (from position 0 it is the segment's base).
        """
        for buf, at, rows, batch in self.runs(position, end, expected):
            if batch is not None:
                yield at, batch
                continue
            for i in range(0, len(rows), 4):
                p = rows[i]
                yield at + p, RecordBatch(buf[p : p + rows[i + 1]])

    def runs(self, position: int = 0, end: int | None = None, expected: int | None = None) -> Iterator[Run]:
        """The checked walk of :meth:`batches`, as runs of batches handed out (see ``Run``), so that a
        reader that wants positions (``locate``) builds no batch object for the headers it passes.

        The headers are checked by the compiled walk (``kernels.walk_headers``, the same rules as
        ``header_problem``) a chunk at a time; from the first batch it does not pass (damage, or a length
        that runs past the segment) the walk goes on in Python, which says what is wrong."""
        size = self.size
        stop = size if end is None else min(end, size)
        bounds = self.bounds
        base = self.base_offset
        known = expected is not None or position == 0
        expected = base if expected is None else expected
        held: Run | None = None  # the last batch passed, handed out once the next one agrees
        held_placed = False  # the held batch started exactly where the batch before it ended
        out = memoryview(array("q", bytes(32 * WALK_ROWS)))
        cap = FIRST_ROWS  # a reader that stops early (a fetch) pays for fewer rows; later calls take more
        want, need = FIRST_READ, 0
        while size - position >= HEADER_SIZE_UP_TO_MAGIC and expected <= INT64_MAX:
            # The first read is small (a fetch walks a few index intervals); later ones grow to READ_CHUNK.
            limit = min(READ_CHUNK, want, max(stop - position, 0) + 4096)
            chunk = memoryview(self.read_bytes(position, min(size - position, max(need, limit))))
            want *= 4
            offset = 0  # where the walk is in the chunk
            while True:
                n = walk_headers(chunk, offset, base, expected, known, bounds.upper, bounds.gaps_below, out[: 4 * cap])
                if not n:
                    break
                rows = out[: 4 * n]  # read by the consumer before the walk goes on and writes ``out`` again
                offset = rows[-4] + rows[-3]
                at_stop = n if rows[-4] < stop - position else bisect_left(rows[0::4], stop - position)
                if at_stop < n:  # the batch there was checked as the look-ahead: the walk ends
                    if held is not None:
                        yield held
                    if at_stop:
                        yield chunk, position, rows[: 4 * at_stop], None
                    return
                if held is not None:
                    yield held
                if n > 1:
                    yield chunk, position, rows[: 4 * n - 4], None
                    known, expected = True, rows[-5] + 1
                held_placed = known and rows[-2] == expected
                held, expected, known = (chunk, position, rows[-4:].tolist(), None), rows[-1] + 1, True
                if n < cap or expected > INT64_MAX:
                    break
                cap = WALK_ROWS
            position += offset
            left = len(chunk) - offset
            if left >= LOG_OVERHEAD:  # a batch whole in the segment but not in this chunk: read on from it
                need = batch_size_at(chunk, offset)
                if HEADER_SIZE <= need <= size - position and need > left:
                    continue
            elif offset:
                need = 0
                continue
            break
        # From the first batch the compiled walk did not pass: the same rules, with their messages.
        walk = self._raw(position, size, stop)
        while True:
            try:
                pos, batch = next(walk)
            except StopIteration:
                break
            except CorruptRecordError:  # a length that cannot be followed: the next batch's fault
                if held is not None:
                    yield held
                raise
            problem = header_problem(batch, base, expected, bounds, known)
            if problem is not None:
                # Offsets that do not follow may be the held batch's fault, unless it sat exactly where
                # the batch before it ended; any other problem is this batch's own.
                relational = batch.base_offset != expected and batch.magic == MAGIC
                if held is not None and (held_placed or not relational):
                    yield held
                after = f", after the batch at position {held[1] + held[2][0]}" if held is not None else ""
                raise self.damage(problem, pos, after)
            if held is not None:
                yield held
            if pos >= stop:
                return
            held_placed = known and batch.base_offset == expected
            held = (batch.buffer, pos, [0, batch.size, batch.base_offset, batch.last_offset], batch)
            expected, known = batch.next_offset, True
        if held is not None:
            yield held

    def replaced(self) -> bool:
        """Whether this reader's segment no longer is the file its name holds (removed, or another file
        renamed over it). Only a read-only segment keeps its file open from the start; the owner's are
        never replaced under it."""
        if not self.read_only or self._handle < 0:
            return False
        try:
            now = os.stat(self.log_path)
        except FileNotFoundError:
            return True
        held = os.fstat(self._handle)
        return (now.st_ino, now.st_dev) != (held.st_ino, held.st_dev)

    def translate_offset(self, offset: int) -> tuple[int, RecordBatch] | None:
        """(position, batch) of the first batch whose last offset is >= ``offset``, or None.

        The walk starts one index entry before the one the offset falls after, so the batch handed out
        always follows a batch whose header was checked with it, and it must pass through the entry it
        skipped to at a batch boundary holding that entry's offset. Where the walk meets damage (or an
        index that disagrees with the log) it goes on from the next sound batch (:meth:`_resync`): a
        batch found there is handed out only if the offset is not one the damage may hold, so records
        after damage stay readable by offset and none inside it is skipped silently."""
        start, entry = self.offset_index.lookup_with_previous(offset)
        try:
            return self._first_holding(offset, start, entry)
        except CorruptRecordError as exc:
            damage, at = exc, getattr(exc, "position", None)
        resumed = self._resync(at if at is not None else start)
        if resumed is None:
            raise damage
        found = self._first_holding(offset, resumed, None)
        if found is not None and found[0] == resumed and found[1].base_offset > offset:
            raise damage  # the offset lies before the first sound batch: in the damage, maybe
        return found

    def _first_holding(self, offset: int, start: int, entry: tuple[int, int] | None) -> tuple[int, RecordBatch] | None:
        for buf, at, rows, batch in self.runs(start, None, None):
            n = len(rows) // 4
            # a run's positions and last offsets both increase (each batch passed after the one before)
            found = n if rows[-1] < offset else bisect_left(rows[3::4], offset)
            if entry is not None and rows[-4] >= entry[1] - at:
                i = bisect_left(rows[0::4], entry[1] - at)
                if i <= found:  # the walk passes the entry before the batch it looks for
                    position = at + rows[4 * i]
                    if position != entry[1] or rows[4 * i + 2] > entry[0]:
                        raise self.damage(f"the offset index entry for offset {entry[0]} at position {entry[1]} "
                                          f"does not match the log", position)
                    entry = None
            if found < n:
                p = rows[4 * found]
                return at + p, batch if batch is not None else RecordBatch(buf[p : p + rows[4 * found + 1]])
        return None

    def locate(self, start_offset: int, max_size: int, max_position: int | None = None,
               min_one_message: bool = False) -> tuple[int, int] | None:
        """(position, size) of the bytes a fetch from ``start_offset`` returns (Kafka's fetch slice): from
        the batch holding it, the whole batches that fit ``max_size``, the first batch whole even if
        larger with ``min_one_message`` (else the part of it that fits, which a client skips); None when
        the offset is past this segment. The caller reads the bytes (``read_bytes``) or sends the file
        range itself (sendfile), so every header in it is checked here: the answer ends before a batch
        that fails, and a fetch from that batch's offset raises CorruptRecordError, which the broker
        answers as CORRUPT_MESSAGE. The checks read the headers the walk reads anyway, compiled
        (``kernels.walk_headers``), and no batch object is built for the batches it passes."""
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        position, first = found
        limit = self.size if max_position is None else max_position
        if first.size > max_size and not min_one_message:
            return position, max(min(max_size, limit - position), 0)
        end = position + first.size
        try:
            for _, at, rows, _ in self.runs(position, min(position + max(max_size, first.size), limit), None):
                for i in range(0, len(rows), 4):
                    start, stop = at + rows[i], at + rows[i] + rows[i + 1]
                    if stop > limit or (start > position and stop - position > max_size):
                        return position, end - position
                    end = stop
        except CorruptRecordError:
            pass  # the batches before the damage go out; a fetch from the damaged one gets the error
        return position, end - position

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
        start, _ = self.offset_index.lookup_with_previous(2**63 - 1)
        nxt = self.base_offset
        while start is not None:
            try:
                for _, batch in self.batches(start):
                    nxt = batch.next_offset
                return nxt
            except CorruptRecordError as exc:  # the end is after the last sound batch: readers meet the damage
                if getattr(exc, "position", None) is None:
                    raise
                start = self._resync(exc.position)
        return nxt

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int = 0) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record with timestamp >= ``timestamp`` at or after
        ``starting_offset``; None when no record in this segment qualifies."""
        _, ts_offset = self.time_index.lookup(timestamp)
        found = self.translate_offset(max(ts_offset, starting_offset))
        for _, batch in self.batches(found[0]) if found is not None else ():
            if batch.max_timestamp >= timestamp and batch.last_offset >= starting_offset:
                for rec in batch.records():
                    if rec.timestamp >= timestamp and rec.offset >= starting_offset:
                        return rec.timestamp, rec.offset
        return None

    # checking ----------------------------------------------------------------------------------
    def _walk(self, position: int) -> Iterator[tuple[int, RecordBatch | None, str | None]]:
        """(position, batch, None) for each batch whose length can be followed from ``position``, and
        (position, None, why) for a stretch where the lengths stop making sense; the walk goes on at the
        next sound batch after it (:meth:`_resync`), so a flipped length in the middle of a file is
        damage there, not a tail that would take every later batch with it."""
        end = self.size
        while position < end:
            why = None
            if end - position < HEADER_SIZE_UP_TO_MAGIC:
                why = f"{end - position} bytes at the end are too few for a batch header"
            else:
                size = batch_size_at(self.read_bytes(position, LOG_OVERHEAD))
                if size < HEADER_SIZE:
                    why = f"impossible batch length {size - LOG_OVERHEAD}"
                elif position + size > end:
                    why = f"partial batch: {size} bytes declared, {end - position} present"
            if why is not None:
                yield position, None, why
                resumed = self._resync(position)
                if resumed is None:
                    return
                position = resumed
                continue
            begin = position
            try:
                for pos, batch in self._raw(position, end, end):
                    yield pos, batch, None
                    position = pos + batch.size
            except CorruptRecordError as exc:  # met further on: the checks above describe it next turn
                at = getattr(exc, "position", None)
                if at is None or at <= begin:
                    raise
                position = at

    def _resync(self, position: int) -> int | None:
        """The position of the first sound batch after ``position`` (magic 2, a length that fits, offsets
        that fit the segment, a matching CRC), or None when none follows: where a walk goes on after
        damage. Costs a search of the rest of the file, paid only where damage was found."""
        end = self.size
        q = position + 1
        while end - q >= HEADER_SIZE:
            chunk = self.read_bytes(q, min(READ_CHUNK, end - q))
            i = chunk.find(b"\x02", 16)
            while i != -1 and i - 16 + HEADER_SIZE <= len(chunk):
                at = q + i - 16
                head = RecordBatch(chunk[i - 16:i - 16 + HEADER_SIZE])
                if (head.batch_length >= HEADER_SIZE - LOG_OVERHEAD and at + head.size <= end
                        and head.last_offset_delta >= 0 and head.base_offset >= self.base_offset
                        and head.last_offset - self.base_offset <= MAX_RELATIVE_OFFSET
                        and RecordBatch(self.read_bytes(at, head.size)).is_valid()):
                    return at
                i = chunk.find(b"\x02", i + 1)
            q += max(len(chunk) - HEADER_SIZE + 1, 1)
        return None

    def audit(self, position: int = 0, expected_next: int | None = None,
              gaps_below: int | None = None) -> Iterator[tuple[int, RecordBatch | None, Damage | None]]:
        """Every batch from ``position`` with its verdict: (position, batch, None) when sound, or
        (position, batch or None, damage). Damage followed by a sound batch is in the middle of the file
        (kept, never cut); damage that nothing sound follows is a torn tail. ``expected_next``: the
        offset the first batch must start at (unknown when None); ``gaps_below``: see ``batch_problem``."""
        known = expected_next is not None
        expected = self.base_offset if expected_next is None else expected_next
        pending: list[tuple[int, RecordBatch | None, str]] = []
        # A batch right after damage cannot be placed by the batch before it: it is held until the next
        # batch follows it (as ``batches`` does). When the next one overlaps it instead, the held batch's
        # base offset is the one flipped up, and it joins the damage. Damage whose own header starts where
        # expected (a CRC failure further in) still says where it ends: ``hint``, the offset the batch
        # after it should start at. A held batch nothing follows is trusted only when it starts there.
        held: tuple[int, RecordBatch] | None = None
        held_from = expected
        hint: int | None = None
        upper = self.bounds.upper

        def judge(batch: RecordBatch, expected: int, known: bool) -> str | None:
            # After damage the offsets it covered are unknown: the next batch need only go forward.
            jumps = gaps_below if known and not pending else None
            return batch_problem(batch, self.base_offset, expected, True, jumps, upper)

        def unplaced(batch: RecordBatch, why: str) -> tuple[int, RecordBatch, str]:
            return held[0], held[1], f"batch offsets {batch.base_offset}..{batch.last_offset} {why}"

        for position_, batch, why in self._walk(position):
            if batch is None:
                if held is not None:
                    pending.append(unplaced(held[1], f"are followed by unreadable bytes at position {position_}"))
                    held = None
                pending.append((position_, None, why or "unreadable"))
                hint = None
                continue
            problem = judge(batch, expected, known)
            if held is not None:
                # The next batch's header (even a batch failing its CRC) says whether the held one is right.
                header = batch.magic == MAGIC
                if problem is None or (header and batch.base_offset == expected):
                    yield held[0], held[1], None
                elif header and held_from <= batch.base_offset < expected:
                    pending.append(unplaced(held[1], f"overlap the batch after it at offset {batch.base_offset}"))
                    expected = held_from
                    problem = judge(batch, expected, False)
                elif hint is None:
                    yield held[0], held[1], None
                else:
                    pending.append(unplaced(held[1], f"do not start where the damaged batch before them ends "
                                                     f"(offset {hint}), and no batch after them says which is right"))
                    expected = held_from
                    problem = judge(batch, expected, False)
                held = None
            if problem is not None:
                if not pending and known and batch.magic == MAGIC and batch.base_offset == expected \
                        and (upper is None or batch.last_offset < upper):
                    hint = batch.next_offset
                elif pending:
                    hint = None
                pending.append((position_, batch, problem))
                continue
            after_damage = bool(pending)
            for p, b, w in pending:
                yield p, b, Damage(self.file_name, p, w, False)
            pending = []
            placed = not after_damage or batch.base_offset == hint
            hint = None if placed else hint
            held_from, expected, known = expected, batch.next_offset, True
            if placed:
                yield position_, batch, None
            else:
                held = (position_, batch)
        if held is not None:
            if hint is None:
                yield held[0], held[1], None
            else:
                pending.insert(0, unplaced(held[1], f"do not start where the damaged batch before them ends "
                                                    f"(offset {hint}), and no batch after them says which is right"))
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

    def recover(self, expected_next: int | None = None, cut_tail: bool = True, gaps_below: int | None = None,
                flushed_below: int = 0) -> Recovery:
        """Rebuild both indexes from the log, checking every batch (size, CRC, offsets that follow
        ``expected_next``), as Kafka's recovery does.

        Kafka truncates at the first bad batch. We cut only a torn tail, damage that nothing sound
        follows, and only when ``cut_tail`` (the last segment of a log, the only one a crash can tear).
        Damage in the middle is kept where it is, left out of the indexes and reported: readers then
        meet it as a CRC error naming its position, and no later batch is dropped silently.
        """
        self.offset_index.reset()
        self.time_index.reset()
        if self._txn_index is not None or self._txn_path().exists():  # its entries come back from the markers
            self.txn_index.reset()
        markers = False
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
            markers = markers or batch.is_control
            next_offset = batch.next_offset
        truncated = 0
        valid = self.size if tail_at is None else tail_at
        # Only what was never flushed can be torn: a damaged tail holding offsets below ``flushed_below``
        # (the recovery point) held acknowledged records, so it is kept and reported, not cut.
        if cut_tail and tail_at is not None and next_offset >= flushed_below:
            truncated = self.size - tail_at
            with POOL.use(self) as fd:
                os.ftruncate(fd, tail_at)
            self.size = tail_at
        self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp, skip_full_check=True)
        self.bytes_since_last_index_entry = valid - last_index_position if self.offset_index.entries else valid
        return Recovery(truncated, damage, next_offset, markers)

    def truncate_to(self, offset: int) -> int:
        """Remove every batch at or after the one holding ``offset``; returns bytes removed."""
        if self._txn_index is not None or self._txn_path().exists():
            self.txn_index.truncate_to(offset)
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
        """Write the final time-index entry Kafka writes when a segment stops being active; its
        ``.txnindex``, complete now, is made durable and its descriptor let go (reads open it as needed)."""
        self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp, skip_full_check=True)
        self.release_txn_index()

    def release_txn_index(self) -> None:
        """fsync the ``.txnindex`` this process wrote to and close its descriptor."""
        if self._txn_index is not None:
            self._txn_index.flush()
            self._txn_index.close()

    # facts used by rolling, retention and cleaning -----------------------------------------------
    @property
    def rolling_timestamp(self) -> int:
        """Max timestamp of the first batch (Kafka's rollingBasedTimestamp); -1 when empty, and when the
        first batch is damaged (kept in place and reported by recovery): rolling then goes by the
        segment's age, so that appends after a kept damaged tail are not refused over a timing rule."""
        if self._rolling_timestamp is None:
            try:
                first = next(self.batches(0), None)
            except CorruptRecordError:
                first = None
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
        if self._txn_index is not None:
            self._txn_index.flush()

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
        txn = self._txn_path()
        if self._txn_index is not None:
            self._txn_index.rename_to(renamed(txn))
        elif txn.exists():
            os.replace(txn, renamed(txn))
        self.temp_suffix = new

    def keep_open_for_readers(self) -> None:
        """Before this segment is renamed away and unlinked: hold its ``.log`` descriptor outside the
        pool, so readers that still hold the segment read on; it closes with the last reference."""
        POOL.detach(self)
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.hold()  # readers holding the segment may still search it: a descriptor kept open

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if not self.temp_suffix and not self.read_only:
                self.on_become_inactive()
            self.offset_index.close()
            self.time_index.close()
            if self._txn_index is not None:
                self._txn_index.close()
            if self.params.preallocate and not self.read_only:
                with POOL.use(self) as fd:
                    os.ftruncate(fd, self.size)
            POOL.close(self)

    def close_handlers(self) -> None:
        """Close files without writing anything (the segment is being deleted)."""
        self._closed = True
        self.offset_index.close()
        self.time_index.close()
        if self._txn_index is not None:
            self._txn_index.close()
        POOL.close(self)

    def delete_files(self) -> None:
        self.close_handlers()
        self.unlink_files()

    def unlink_files(self) -> None:
        """Remove the files. A descriptor held by :meth:`keep_open_for_readers` stays open, so readers
        still holding this segment read on; it closes when the last reference goes (``__del__``)."""
        for p in [self.log_path, *self.index_paths()]:
            Path(p).unlink(missing_ok=True)
        self._txn_path().unlink(missing_ok=True)  # an open index (kept for readers) closes with its object

    def __del__(self, _close=os.close) -> None:  # bound now: at interpreter exit ``os`` may be gone
        fd = getattr(self, "_handle", -1)
        if fd >= 0:
            try:
                _close(fd)
            except OSError:
                pass

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size}, suffix={self.temp_suffix!r})"
