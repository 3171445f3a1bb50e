"""Record batches of a partition as Arrow record batches with the schema of Spark's Kafka source."""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pyarrow as pa

from ..records import kernels
from ..records.codecs import reader_bound
from ..records.columns import Chunk, capped
from ..records.runs import BatchRun
from ..reading import COMPACTED, LIVE, READ_UNCOMMITTED, open_snapshot, read_runs

# Spark's Kafka source's columns: name -> (type in DDL, the same as Spark's DataType.simpleString writes it)
KAFKA_COLUMNS = {
    "key": ("binary", "binary"),
    "value": ("binary", "binary"),
    "topic": ("string", "string"),
    "partition": ("int", "int"),
    "offset": ("long", "bigint"),
    "timestamp": ("timestamp", "timestamp"),
    "timestampType": ("int", "int"),
    "headers": ("array<struct<key: string, value: binary>>", "array<struct<key:string,value:binary>>"),  # includeHeaders
}


def kafka_columns(include_headers: bool) -> list[str]:
    return [n for n in KAFKA_COLUMNS if n != "headers" or include_headers]


def kafka_schema_ddl(include_headers: bool) -> str:
    return ", ".join(f"{n} {KAFKA_COLUMNS[n][0]}" for n in kafka_columns(include_headers))


HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def _topic_column(topic: str, n: int) -> pa.Array:
    return pa.repeat(pa.scalar(topic, pa.string()), n)


def _partition_column(partition: int, n: int) -> pa.Array:
    return pa.array(np.full(n, partition, dtype=np.int32))


def _binary(chunk: Chunk, pos_col: int, len_col: int, rows: np.ndarray | None) -> pa.Array:
    return _arrow_binary(kernels.gather_column(chunk.data, chunk.cols if rows is None else chunk.cols[rows], pos_col, len_col))


def chunk_to_arrow(chunk: Chunk, topic: str, partition: int, start: int, end: int, include_headers: bool,
                   columns: tuple[str, ...] | None = None) -> pa.RecordBatch | None:
    """Rows of ``chunk`` with offsets in [start, end), as one Arrow batch (None when empty): the Kafka
    source's columns, or only ``columns`` in that order (those a query reads, when the format's columnar
    reader asks for them, or those a caller's ``.schema(...)`` names)."""
    offs = chunk.offsets
    sel = (offs >= start) & (offs < end)
    rows = None if sel.all() else np.flatnonzero(sel)
    n = len(offs) if rows is None else len(rows)
    if n == 0:
        return None
    pick = (lambda a: a) if rows is None else (lambda a: a[rows])

    def headers() -> pa.Array:
        hdr_rows = np.arange(len(offs)) if rows is None else rows
        cols = chunk.cols
        return pa.array(
            [[{"key": k, "value": v} for k, v in kernels.decode_headers(chunk.data, int(cols[r, kernels.C_HDR_POS]), int(cols[r, kernels.C_HDR_COUNT]))]
             if cols[r, kernels.C_HDR_COUNT] else [] for r in hdr_rows.tolist()], HEADER_TYPE)

    build = {
        "key": lambda: _binary(chunk, kernels.C_KEY_POS, kernels.C_KEY_LEN, rows),
        "value": lambda: _binary(chunk, kernels.C_VAL_POS, kernels.C_VAL_LEN, rows),
        "topic": lambda: _topic_column(topic, n),
        "partition": lambda: _partition_column(partition, n),
        "offset": lambda: pa.array(pick(offs).astype(np.int64)),
        "timestamp": lambda: pa.array(pick(chunk.timestamps()) * 1000, pa.timestamp("us", tz="UTC")),
        "timestampType": lambda: pa.array(pick(chunk.timestamp_types()).astype(np.int32)),
        "headers": headers,
    }
    names = columns if columns is not None else kafka_columns(include_headers)
    return pa.RecordBatch.from_arrays([build[name]() for name in names], names=list(names))


def _arrow_binary(col) -> pa.Array:
    """A ``BinaryColumn`` (the record kernels' Arrow layout) as an Arrow binary array, without a copy."""
    n = len(col.offsets) // 4 - 1
    return pa.Array.from_buffers(pa.binary(), n, [None if col.validity is None else pa.py_buffer(col.validity),
                                                   pa.py_buffer(col.offsets), pa.py_buffer(col.values)],
                                 null_count=col.null_count)


def run_to_arrow(run: BatchRun, topic: str, partition: int, start: int, end: int,
                 names: list[str] | tuple[str, ...], crcs_checked: bool) -> pa.RecordBatch | None | bool:
    """The rows of ``run`` with offsets in [start, end) as one Arrow batch of the columns ``names`` (None
    when there are none), decoded by one kernel call (``decode_columns``) that reads each batch once and,
    when the run's CRCs were checked, decompresses lz4 and zstd; False when the run is one it does not
    decode (other codecs, headers asked for, damage): the caller scans it the general way, which
    decompresses it or names the damage."""
    if "headers" in names:
        return False
    got = kernels.decode_columns(run.buffer, run.table, start, end, reader_bound() if crcs_checked else 0)
    if got is None:
        return False
    n = got.rows
    if n == 0:
        return None
    build = {
        "key": lambda: _arrow_binary(got.key),
        "value": lambda: _arrow_binary(got.value),
        "topic": lambda: _topic_column(topic, n),
        "partition": lambda: _partition_column(partition, n),
        "offset": lambda: pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(got.offsets)]),
        "timestamp": lambda: pa.Array.from_buffers(pa.timestamp("us", tz="UTC"), n, [None, pa.py_buffer(got.timestamps)]),
        "timestampType": lambda: pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(got.timestamp_types)]),
    }
    return pa.RecordBatch.from_arrays([build[name]() for name in names], names=list(names))


def read_partition(path: str, topic: str, partition: int, start: int, end: int, include_headers: bool,
                   chunk_bytes: int = 4 << 20, read_compacted: bool = False,
                   check_crcs: bool = True, isolation: str = READ_UNCOMMITTED,
                   columns: tuple[str, ...] | None = None) -> Iterator[pa.RecordBatch]:
    """Arrow batches of one partition's records in [start, end), read from a read-only snapshot;
    ``read_compacted``: of its compacted view (side log below the horizon, live log after);
    ``check_crcs``: Kafka's consumer setting (every batch's CRC verified, the default); ``isolation``:
    Kafka's isolation level (read_committed: aborted transactions' records left out, nothing at or above
    the last stable offset), by ``compactlog.reading``'s rule."""
    if start >= end:
        return
    with open_snapshot(path, topic, partition) as snap:
        # each run of one read buffer is scanned where it lies: no object per batch, no copy of the records
        runs = read_runs(snap, start, end, isolation=isolation, view=COMPACTED if read_compacted else LIVE,
                         check_crcs=check_crcs, run_bytes=chunk_bytes)
        names = columns if columns is not None else kafka_columns(include_headers)
        for run in (part for whole in runs for part in capped(whole)):  # at most CHUNK_RECORDS records a scan
            rb = run_to_arrow(run, topic, partition, start, end, names, check_crcs)
            if rb is False:
                rb = chunk_to_arrow(Chunk.scan_run(run), topic, partition, start, end, include_headers, columns)
            if rb is not None:
                yield rb
