"""Reading a partition's batches in offset order, checked: the one reader behind ``consume``, the
snapshot consumer, the compacted view, the Pulsar-style compactor and the Spark source.

Every batch it hands out has passed :func:`~.segment.batch_problem`: its CRC (unless the caller opts
out, as a Kafka consumer with ``check.crcs=false`` does) and offsets that follow the batch before it.
A batch that fails raises :class:`CorruptRecordError` naming the partition, the offset, the file and
the position, and carries that place as ``origin`` so errors met later while decoding it name it too.
"""

from __future__ import annotations

import bisect
from typing import Iterator, Sequence

from ..errors import CorruptRecordError
from ..records.batch import RecordBatch
from .segment import LogSegment, batch_problem


class BatchOrigin:
    """Where a batch was read from, formatted only when an error needs it."""

    __slots__ = ("segment", "position")

    def __init__(self, segment: LogSegment, position: int) -> None:
        self.segment, self.position = segment, position

    def __str__(self) -> str:
        return f"{self.segment.file_name} position {self.position}"


def read_batches(segments: Sequence[LogSegment], start: int, end: int | None = None, *,
                 check_crcs: bool = True) -> Iterator[RecordBatch]:
    """Whole batches holding offsets in [start, end) of ``segments`` (sorted by base offset)."""
    bases = [s.base_offset for s in segments]
    i = max(bisect.bisect_right(bases, start) - 1, 0)
    for k in range(i, len(segments)):
        seg = segments[k]
        if end is not None and seg.base_offset >= end:
            return
        found = seg.translate_offset(start)
        if found is None:
            continue
        expected = seg.base_offset
        for position, batch in seg.batches(found[0]):
            if end is not None and batch.base_offset >= end:
                return
            problem = batch_problem(batch, seg.base_offset, expected, check_crcs)
            if problem is not None:
                raise CorruptRecordError(f"{seg.directory.name}: {problem} ({seg.file_name} position {position})")
            expected = batch.next_offset
            if batch.last_offset >= start:
                try:
                    batch.origin = BatchOrigin(seg, position)
                except AttributeError:  # a RecordBatch without the slot
                    pass
                yield batch
