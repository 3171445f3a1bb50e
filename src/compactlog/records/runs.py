"""Runs of batches: consecutive batches lying in one buffer, handed out by a bulk reader as one object."""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import Any, Callable

from .batch import RecordBatch

ROW = 4  # int64 per batch in a run's table: position in the buffer, size, base offset, last offset


@dataclass
class BatchRun:
    """Consecutive checked batches lying in one buffer, with no object per batch.

    ``table`` is a flat int64 array of one row per batch, (position in ``buffer``, size, base offset,
    last offset), as the segment walk (``kernels.walk_headers``) writes them; ``origin(position)`` says
    where the batch at a position of the buffer came from (a segment file and its position), for errors.
    Vectorized readers view the table as columns (``records.columns.Chunk.scan_run``)."""

    buffer: Any
    table: array
    origin: Callable[[int], Any] | None = None

    def __len__(self) -> int:
        return len(self.table) // ROW

    @property
    def next_offset(self) -> int:
        return self.table[-1] + 1

    def rows(self):
        """The table as an (n, 4) int64 numpy array (a view, no copy)."""
        import numpy as np

        return np.frombuffer(self.table, dtype=np.int64).reshape(-1, ROW)

    def batches(self) -> list[RecordBatch]:
        """The run as batch objects (views of the buffer), each with its origin."""
        mv = memoryview(self.buffer)
        t, origin = self.table, self.origin
        return [RecordBatch(mv[t[i] : t[i] + t[i + 1]], None if origin is None else origin(t[i]))
                for i in range(0, len(t), ROW)]

    @classmethod
    def of(cls, batches: list[RecordBatch]) -> "BatchRun":
        """A run of batches that may lie anywhere: their bytes copied together into one buffer."""
        table = array("q")
        origins = {}
        at = 0
        for b in batches:
            table.extend((at, b.size, b.base_offset, b.last_offset))
            origins[at] = b.origin
            at += b.size
        return cls(b"".join(memoryview(b.buffer)[: b.size] for b in batches), table, origins.get)
