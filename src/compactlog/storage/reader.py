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
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Protocol, Sequence

from ..errors import CorruptRecordError, KafkaStorageError
from ..records.batch import RecordBatch
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
    at = [start]  # the next offset wanted, moved on as batches go out
    for attempt in range(attempts):
        try:
            yield from _read(listing, at, end, check_crcs)
            return
        except FileNotFoundError as exc:
            if relist is None or attempt == attempts - 1:
                raise KafkaStorageError(f"cannot read offset {at[0]}: {describe(exc)}") from exc
            listing = relist()
        except OSError as exc:  # an I/O error, too many open files: a typed error, not a traceback
            raise KafkaStorageError(f"cannot read offset {at[0]}: {describe(exc)}") from exc


def _read(listing: Listing, at: list[int], end: int | None, check_crcs: bool) -> Iterator[RecordBatch]:
    bases, segment_at = listing
    expected: int | None = None  # the offset after the last batch read, carried across segments
    for k in range(max(bisect.bisect_right(bases, at[0]) - 1, 0), len(bases)):
        if end is not None and bases[k] >= end:
            return
        seg = segment_at(k)
        if expected is None:
            found = seg.translate_offset(at[0])
            if found is None:
                continue
            walk = seg.batches(found[0])
        else:  # from the batch before, so a hole between segments is seen as one
            walk = seg.batches(0, expected=expected)
        for position, batch in walk:
            if end is not None and batch.base_offset >= end:
                return
            expected = batch.next_offset
            if batch.last_offset >= at[0]:
                if check_crcs:
                    try:
                        batch.ensure_valid()
                    except CorruptRecordError as exc:
                        raise seg.damage(str(exc), position) from None
                batch.origin = BatchOrigin(seg, position)
                at[0] = batch.next_offset
                yield batch
