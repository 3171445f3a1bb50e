"""Reading a partition's batches in offset order, checked: the one reader behind ``consume``, the
snapshot consumer, the compacted view, the Pulsar-style compactor and the Spark source.

Every batch it hands out has passed the segment's header checks (``LogSegment.batches``: offsets that
follow the batch before it, across segments too, and fit the bounds its log knows) and its CRC (unless
the caller opts out, as a Kafka consumer with ``check.crcs=false`` does).
A batch that fails raises :class:`CorruptRecordError` naming the partition, the offset, the file and
the position, and carries that place as ``origin`` so errors met later while decoding it name it too.

Readers in other processes (snapshots) open segment files only when the read reaches them; when the
owner has swapped a file away meanwhile (the cleaner), the reader lists the directory again and goes on
from the offset it had reached, as a Kafka consumer fetching by offset does.
"""

from __future__ import annotations

import bisect
from array import array
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Protocol, Sequence

from ..errors import CorruptRecordError, KafkaStorageError
from ..records import kernels
from ..records.batch import RecordBatch
from ..records.runs import ROW, BatchRun
from .failure import describe
from .segment import LogSegment

if TYPE_CHECKING:
    from .transaction_index import AbortedTxn

# (base offsets in order, segment i opened) of one listing
Listing = tuple[Sequence[int], Callable[[int], LogSegment]]


class PartitionView(Protocol):
    """What a reader needs of a partition, whoever holds it: the owner's ``Log`` or another process's
    read-only ``PartitionSnapshot``. The log start offset is the checkpointed one (records below it were
    deleted by retention or DeleteRecords, even when their segment is still there)."""

    @property
    def dir(self) -> Path: ...

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    def batches(self, start: int = 0, end: int | None = None, *, check_crcs: bool = True) -> Iterator[RecordBatch]: ...

    def runs(self, start: int = 0, end: int | None = None, *, check_crcs: bool = True) -> Iterator[BatchRun]: ...

    # for read_committed readers: where they stop, and the aborted transactions (``.txnindex`` entries) of a range
    @property
    def last_stable_offset(self) -> int: ...

    def aborted_txns(self, start: int, end: int) -> "list[AbortedTxn]": ...


class BatchOrigin:
    """Where a batch was read from, formatted only when an error needs it."""

    __slots__ = ("segment", "position")

    def __init__(self, segment: LogSegment, position: int) -> None:
        self.segment, self.position = segment, position

    def __str__(self) -> str:
        return f"{self.segment.file_name} position {self.position}"


def fixed(segments: Sequence[LogSegment]) -> Listing:
    """The listing of segments already open (a Log's current view)."""
    return [s.base_offset for s in segments], segments.__getitem__


def read_batches(listing: Listing, start: int, end: int | None = None, *, check_crcs: bool = True,
                 relist: Callable[[], Listing] | None = None, attempts: int = 100) -> Iterator[RecordBatch]:
    """Whole batches holding offsets in [start, end), in order. ``relist`` gives a fresh listing when
    a segment file is gone before it could be opened."""
    for run in _retrying(listing, start, end, check_crcs, relist, attempts, join=False):
        yield from run.batches()


def read_runs(listing: Listing, start: int, end: int | None = None, *, check_crcs: bool = True,
              relist: Callable[[], Listing] | None = None, attempts: int = 100) -> Iterator[BatchRun]:
    """The batches of :func:`read_batches` as runs, each lying in one read buffer (``BatchRun``), checked
    the same way: a bulk reader (the Spark source) makes no object per batch. A run ends before a batch
    that fails its CRC, and the error follows it."""
    return _retrying(listing, start, end, check_crcs, relist, attempts, join=True)


def _retrying(listing: Listing, start: int, end: int | None, check_crcs: bool,
              relist: Callable[[], Listing] | None, attempts: int, join: bool) -> Iterator[BatchRun]:
    at = [start]  # the next offset wanted, moved on as runs go out
    for attempt in range(attempts):
        try:
            yield from _read(listing, at, end, check_crcs, join)
            return
        except FileNotFoundError as exc:
            if relist is None or attempt == attempts - 1:
                raise KafkaStorageError(f"cannot read offset {at[0]}: {describe(exc)}") from exc
            listing = relist()
        except OSError as exc:  # an I/O error, too many open files: a typed error, not a traceback
            raise KafkaStorageError(f"cannot read offset {at[0]}: {describe(exc)}") from exc


def _read(listing: Listing, at: list[int], end: int | None, check_crcs: bool, join: bool) -> Iterator[BatchRun]:
    """The walk over the segments: the segment walk's runs cut to [at, end), CRCs checked a run at a time.
    With ``join``, consecutive runs of one read (one buffer, one file position) go out as one (the walk
    hands out the last batch of a read apart, once the next header agrees with it); a reader of single
    batches does not wait for that. ``at[0]`` moves only as runs go out: a retry after a file was
    swapped away resumes after the last batch handed out, and what was held back goes out before any
    error."""
    bases, segment_at = listing
    want = at[0]  # the next offset to look for
    expected: int | None = None  # the offset after the last batch read, carried across segments
    held = _Held()
    try:
        for k in range(max(bisect.bisect_right(bases, want) - 1, 0), len(bases)):
            if end is not None and bases[k] >= end:
                break
            seg = segment_at(k)
            if expected is None:
                found = seg.translate_offset(want)
                if found is None:
                    continue
                walk = seg.runs(found[0])
            else:  # from the batch before, so a hole between segments is seen as one
                walk = seg.runs(0, expected=expected)
            for buf, position, rows, _batch in walk:
                n = len(rows) // ROW
                lo = bisect.bisect_left(rows[3::ROW], want)  # batches wholly below the wanted offset: passed
                hi = n if end is None else bisect.bisect_left(rows[2::ROW], end)  # from one at the end: over
                part = rows[lo * ROW : hi * ROW]  # copied: the walk writes its rows again
                table = array("q", bytes(part) if isinstance(part, memoryview) else part)
                bad = kernels.verify_batches(buf, table) if check_crcs and len(table) else -1
                good = table if bad < 0 else table[: bad * ROW]
                if len(good):
                    want = good[-1] + 1
                    if not held.joins(buf, position):
                        yield from held.out(at)
                    held.add(buf, position, good, seg)
                    if not join:
                        yield from held.out(at)
                if bad >= 0 or hi < n:
                    yield from held.out(at)
                    if bad >= 0:
                        raise _damage(seg, buf, position, table[bad * ROW : bad * ROW + 2])
                    return
                expected = rows[-1] + 1
    except (CorruptRecordError, OSError):
        yield from held.out(at)  # what was read before the damage (or a file swapped away) goes out first
        raise
    yield from held.out(at)


class _Held:
    """The rows of one read held back until the next read shows the run is whole (``_read``'s join)."""

    __slots__ = ("buf", "position", "seg", "tables")

    def __init__(self) -> None:
        self.buf, self.position, self.seg, self.tables = None, -1, None, []

    def joins(self, buf, position: int) -> bool:
        return not self.tables or (buf is self.buf and position == self.position)

    def add(self, buf, position: int, table: array, seg: LogSegment) -> None:
        self.buf, self.position, self.seg = buf, position, seg
        self.tables.append(table)

    def out(self, at: list[int]) -> Iterator[BatchRun]:
        """The held rows as one run (nothing when none are held); ``at[0]`` moves past them."""
        if not self.tables:
            return
        table = self.tables[0] if len(self.tables) == 1 else array("q", b"".join(t.tobytes() for t in self.tables))
        run = BatchRun(self.buf, table, _origins(self.seg, self.position))
        self.tables = []
        at[0] = run.next_offset
        yield run


def _origins(seg: LogSegment, position: int) -> Callable[[int], BatchOrigin]:
    """Where the batch at a position of a buffer read at file ``position`` of ``seg`` lies."""
    return lambda at: BatchOrigin(seg, position + at)


def _damage(seg: LogSegment, buf, position: int, row) -> CorruptRecordError:
    """The error for the batch at ``row`` (its position in ``buf`` and size) that failed its check:
    ``RecordBatch.ensure_valid``'s words, at its file position."""
    p, size = row[0], row[1]
    try:
        RecordBatch(memoryview(buf)[p : p + size]).ensure_valid()
        reason = "failed its checks"  # (the kernel and ensure_valid agree; this is not reached)
    except CorruptRecordError as exc:
        reason = str(exc)
    return seg.damage(reason, position + p)
