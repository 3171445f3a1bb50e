"""Columns of many batches at once: the unit of vectorized work for the cleaner and the Spark reader.

Per-batch Python work costs microseconds, so hot paths group consecutive batches into a chunk, scan
all their records with one kernel call into one int64 table, and work on whole columns with numpy.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

import numpy as np

from ..errors import CorruptRecordError
from . import kernels
from .runs import ROW, BatchRun
from .batch import (
    COMPRESSION_MASK,
    CONTROL_BIT,
    FIELD_OFFSETS,
    HEADER_FIELDS,
    TIMESTAMP_TYPE_BIT,
    RecordBatch,
)

CHUNK_RECORDS = 65536  # records per chunk at most, so compressed chunks stay small once decompressed

# numpy's big-endian type for each struct code of the header's fields
_NUMPY_CODES = {"q": ">i8", "i": ">i4", "h": ">i2", "b": "i1", "I": ">u4"}
_FIELD_CODES = dict(HEADER_FIELDS)


def header_field(buffer: Any, positions: np.ndarray, name: str) -> np.ndarray:
    """One header field (``HEADER_FIELDS``' name) of the batches at ``positions`` of ``buffer``, as int64:
    one numpy gather for a whole run, not a Python step per batch."""
    code = _NUMPY_CODES[_FIELD_CODES[name]]
    width = np.dtype(code).itemsize
    at = FIELD_OFFSETS[name]
    raw = np.frombuffer(buffer, dtype=np.uint8)[positions[:, None] + np.arange(at, at + width)]
    return raw.view(code).ravel().astype(np.int64)


def capped(run: BatchRun, max_records: int = CHUNK_RECORDS) -> Iterator[BatchRun]:
    """``run`` cut at batch boundaries into runs of at most ``max_records`` records by their headers (a
    batch holding more goes alone), so that what one scan decompresses and tables stays bounded
    whatever the batches hold."""
    rows = run.rows()
    counts = np.maximum(header_field(run.buffer, np.ascontiguousarray(rows[:, 0]), "recordsCount"), 0)
    if int(counts.sum()) <= max_records:
        yield run
        return
    ends = np.cumsum(counts)
    start, done = 0, 0
    while start < len(rows):
        stop = max(int(np.searchsorted(ends, done + max_records, side="right")), start + 1)
        yield BatchRun(run.buffer, run.table[start * ROW : stop * ROW], run.origin)
        start, done = stop, int(ends[stop - 1])


def _scan_where_they_lie(base: Any, views: list, counts: Any, base_offsets: Any,
                         verify: bool) -> tuple[np.ndarray, np.ndarray, int]:
    """``kernels.scan_batches`` over batches that view ``base``: (column table, first row of each batch,
    the kernel's answer). The table has rows for every count, but never more than the buffer could hold
    (7 bytes a record at least): a count beyond that is impossible, and is refused before anything is
    scanned."""
    counts = np.asarray(counts, dtype=np.int64)
    cols = np.empty((max(0, min(int(counts.sum()), len(memoryview(base)) // 7)), kernels.NCOLS), dtype=np.int64)
    rows = np.empty(len(views) + 1, dtype=np.int64)
    bad = kernels.scan_batches(base, views, counts, np.ascontiguousarray(base_offsets, dtype=np.int64), verify, cols, rows)
    return cols, rows, bad


class Chunk:
    """Consecutive batches with every data batch's records scanned into one column table.

    ``cols[:, C_OFFSET_DELTA]`` holds absolute offsets here; ``rows[i]:rows[i+1]`` are batch i's rows
    (none for control batches, which are never mapped and always kept as they are). A chunk scanned from
    a :class:`BatchRun` makes its batch objects only when asked for them (``batches``).
    """

    __slots__ = ("_batches", "data", "cols", "rows", "_run", "_heads")

    def __init__(self, batches: list[RecordBatch] | None, data: Any, cols: np.ndarray, rows: np.ndarray,
                 run: BatchRun | None = None, heads: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> None:
        self._batches, self.data, self.cols, self.rows = batches, data, cols, rows
        self._run, self._heads = run, heads

    @property
    def batches(self) -> list[RecordBatch]:
        if self._batches is None:
            self._batches = self._run.batches() if self._run is not None else []
        return self._batches

    def heads(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per batch: attributes, base timestamp and max timestamp (int64 arrays)."""
        if self._heads is None:
            b = self.batches
            self._heads = (np.asarray([x.attributes for x in b], dtype=np.int64),
                           np.asarray([x.base_timestamp for x in b], dtype=np.int64),
                           np.asarray([x.max_timestamp for x in b], dtype=np.int64))
        return self._heads

    @classmethod
    def scan_run(cls, run: BatchRun, verify: bool = False) -> "Chunk":
        """The scan of a run where it lies, its header fields read with numpy, not per batch. A run
        holding compressed records, or failing a check, is scanned as batch objects (``scan``), which
        decompresses them or raises the error naming the batch."""
        table = run.rows()
        positions = np.ascontiguousarray(table[:, 0])
        attrs = header_field(run.buffer, positions, "attributes")
        counts = np.where(attrs & CONTROL_BIT, 0, header_field(run.buffer, positions, "recordsCount"))
        if ((attrs & COMPRESSION_MASK) != 0)[counts != 0].any():
            return cls.scan(run.batches(), verify)
        mv = memoryview(run.buffer)
        views = [mv[p : p + n] for p, n in table[:, :2].tolist()]
        try:
            cols, rows, bad = _scan_where_they_lie(run.buffer, views, counts, table[:, 2], verify)
        except kernels.KernelError:
            bad = 0  # the batch objects' scan names the batch and its fault
        if bad != -1:
            return cls.scan(run.batches(), verify)
        heads = (attrs, header_field(run.buffer, positions, "baseTimestamp"),
                 header_field(run.buffer, positions, "maxTimestamp"))
        return cls(None, run.buffer, cols, rows, run=run, heads=heads)

    @classmethod
    def scan(cls, batches: list[RecordBatch], verify: bool = False, max_size: int | None = None) -> "Chunk":
        """``verify`` checks each batch's CRC-32C first: a rewriter must, or it would re-encode damaged
        records under a fresh, valid CRC. ``max_size`` bounds each batch's decompressed records
        (None = the codecs' default).

        Uncompressed batches that lie in one buffer (as a segment reader hands out the batches of one
        read) are scanned where they are: ``data`` is that buffer, nothing is copied. Otherwise their
        records sections are copied together into ``data``."""
        in_place = cls._scan_in_place(batches, verify)
        if in_place is not None:
            return in_place
        payloads, starts, ends, counts = [], [], [], []
        pos = 0
        for b in batches:
            if verify:
                b.ensure_valid()
            n = 0 if b.is_control else b.record_count
            # the count is checked against the payload before the column table is sized by it
            p = b._records_payload(max_size) if n else b""
            payloads.append(p)
            starts.append(pos)
            pos += len(p)
            ends.append(pos)
            counts.append(n)
        data = b"".join(payloads)
        counts_a = np.asarray(counts, dtype=np.int64)
        rows = np.zeros(len(batches) + 1, dtype=np.int64)
        np.cumsum(counts_a, out=rows[1:])
        cols = np.empty((int(rows[-1]), kernels.NCOLS), dtype=np.int64)
        try:
            kernels.scan_many(data, np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64), counts_a, cols)
        except kernels.KernelError as exc:  # section i is batch i
            raise CorruptRecordError(f"{batches[exc.section or 0].where}: {exc.reason}") from None
        cols[:, kernels.C_OFFSET_DELTA] += np.repeat(np.asarray([b.base_offset for b in batches], dtype=np.int64), counts_a)
        return cls(batches, data, cols, rows)

    @classmethod
    def _scan_in_place(cls, batches: list[RecordBatch], verify: bool) -> "Chunk | None":
        """The scan of batches that all view one buffer and hold no compressed records, done where they
        lie, with every check ``scan`` makes (the same errors, raised by the same methods); None when
        the batches are not like that, for ``scan`` to copy them."""
        if not batches:
            return None
        base = in_buffer(batches[0])
        counts = [0 if b.is_control else b.record_count for b in batches]
        if any(in_buffer(b) is not base or (n and b.attributes & COMPRESSION_MASK) for b, n in zip(batches, counts)):
            return None
        try:
            cols, rows, bad = _scan_where_they_lie(base, [b.buffer for b in batches], counts,
                                                   [b.base_offset for b in batches], verify)
        except kernels.KernelError as exc:  # section i is batch i
            raise CorruptRecordError(f"{batches[exc.section or 0].where}: {exc.reason}") from None
        if bad != -1:
            # the batch at fault raises, by the method that names its fault (its header and CRC are
            # checked before its count, as the copying scan does); else the copying scan decides
            if bad >= 0 and verify:
                batches[bad].ensure_valid()
            if bad >= 0:
                batches[bad]._records_payload()
            return None
        return cls(batches, base, cols, rows)

    def per_row(self, values: Any) -> np.ndarray:
        """Spread one value per batch over that batch's rows."""
        return np.repeat(np.asarray(values, dtype=np.int64), np.diff(self.rows))

    @property
    def offsets(self) -> np.ndarray:
        return self.cols[:, kernels.C_OFFSET_DELTA]

    def timestamps(self) -> np.ndarray:
        """Absolute record timestamps (the batch maxTimestamp for LogAppendTime batches).

        A base timestamp plus delta outside the int64 range is a CorruptRecordError naming the batch.
        """
        attrs, base_ts, max_ts = self.heads()
        lat = (attrs & TIMESTAMP_TYPE_BIT) != 0
        base = self.per_row(np.where(lat, max_ts, base_ts))
        deltas = self.cols[:, kernels.C_TS_DELTA]
        if lat.any():
            deltas = np.where(self.per_row(lat).astype(bool), 0, deltas)
        with np.errstate(over="ignore"):
            out = base + deltas
        # int64 addition wraps: it overflowed exactly where the sum moved against the delta's sign
        wrapped = ((deltas > 0) & (out < base)) | ((deltas < 0) & (out > base))
        if wrapped.any():
            row = int(np.argmax(wrapped))
            i = int(np.searchsorted(self.rows, row, side="right")) - 1
            b = self.batches[i]
            raise CorruptRecordError(
                f"{b.where}: base timestamp {b.base_timestamp} + timestamp delta {int(deltas[row])} of record "
                f"{row - int(self.rows[i])} is outside the int64 range"
            )
        return out

    def timestamp_types(self) -> np.ndarray:
        return self.per_row((self.heads()[0] & TIMESTAMP_TYPE_BIT) != 0)




def in_buffer(batch: RecordBatch):
    """The buffer a batch's bytes lie in (what its view was cut from, or its own bytes)."""
    buf = batch.buffer
    return buf.obj if isinstance(buf, memoryview) else buf


def by_buffer(batches: list[RecordBatch]) -> list[list[RecordBatch]]:
    """Consecutive runs of ``batches`` that lie in one buffer: each scans in place (:meth:`Chunk.scan`)."""
    runs: list[list[RecordBatch]] = []
    base = object()
    for b in batches:
        at = in_buffer(b)
        if at is not base:
            runs.append([])
            base = at
        runs[-1].append(b)
    return runs


def chunks(batches: Iterable[RecordBatch], max_bytes: int, max_records: int = CHUNK_RECORDS) -> Iterator[list[RecordBatch]]:
    """Consecutive batches up to ``max_bytes`` stored bytes or ``max_records`` records."""
    group: list[RecordBatch] = []
    size = records = 0
    for b in batches:
        group.append(b)
        size += b.size
        records += b.record_count
        if size >= max_bytes or records >= max_records:
            yield group
            group, size, records = [], 0, 0
    if group:
        yield group
