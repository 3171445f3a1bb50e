"""Appending DataFrames to a topic: tasks build and compress batches, the driver appends them.

A task routes its rows and cuts them into batches of up to ``kafka.batch.size`` bytes per partition with
the producer plan the API uses (:mod:`compactlog.producer`: murmur2 or sticky partitions, the topic's
``compression.type`` or none when it is ``producer``, no batch beyond ``max.message.bytes`` or
``segment.bytes``), validates each against the topic's rules (so a bad row fails its task, on the
executors, in parallel) and stages them in the job's staging directory with the fingerprint of the
config it validated under. At commit the driver opens the data directory and checks every staged batch
before appending any, so nothing is written unless everything can be; then it appends them in task
order and removes the staging directory. Staging and the commit are ``compactlog.staged_appends``'s;
this module turns a DataFrame's rows into batches.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InvalidRequestError, UnknownTopicOrPartitionError, shown
from ..producer import DEFAULT_BATCH_BYTES, BuiltInPartitioner, ProducerPlan, header_bytes, record_sizes
from ..reading import topic_metadata
from ..records import kernels
from ..records.batch import build_columns_batch
from ..staged_appends import BatchStager, JobStaging, begin
from ..staged_appends import append_staged as append_staged_batches
from ..storage.log_config import LogConfig

BATCH_BYTES = DEFAULT_BATCH_BYTES
INT_MAX = 2**31 - 1


@dataclass(frozen=True)
class WriteOptions:
    """A write job's options, parsed on the driver (which creates the job's staging directory) and
    shipped to its tasks."""

    path: str
    topic: str | None
    staging: JobStaging  # made by compactlog.staged_appends.begin
    batch_bytes: int = BATCH_BYTES  # the producer's batch.size, named kafka.batch.size as in Spark's Kafka sink

    @classmethod
    def parse(cls, options: dict[str, str], overwrite: bool, group: str | None = None) -> "WriteOptions":
        """``group``: the staging group of a streaming query (``staged_appends.begin``)."""
        opts = {k.lower(): v for k, v in options.items()}
        if overwrite:
            raise InvalidRequestError("a topic is an append-only log: use mode('append')")
        if not opts.get("path"):
            raise InvalidRequestError('option "path" (the data directory) is required')
        size = opts.get("kafka.batch.size", str(BATCH_BYTES))
        if not size.isdigit() or int(size) > INT_MAX:  # the producer's batch.size is an int config
            raise InvalidRequestError(f'option "kafka.batch.size" must be a number of bytes from 0 to {INT_MAX}, '
                                      f'not {size!r}')
        return cls(opts["path"], opts.get("topic"), begin(opts["path"], group), int(size))


def _column(batch: pa.RecordBatch, name: str):
    idx = batch.schema.get_field_index(name)
    return None if idx < 0 else batch.column(idx)


def _bytes_column(arr, name: str) -> pa.Array:
    """A key, value or header value column as binary or large_binary, the layouts ``_Column`` reads: a
    string is its UTF-8 bytes, fixed-size and view types are cast; anything else is refused by name."""
    t = arr.type
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return arr
    if pa.types.is_large_string(t):
        return pc.cast(arr, pa.large_binary())
    if (pa.types.is_string(t) or pa.types.is_fixed_size_binary(t) or pa.types.is_binary_view(t)
            or pa.types.is_string_view(t) or pa.types.is_null(t)):
        return pc.cast(arr, pa.binary())
    raise InvalidRequestError(f"the {name} column of a DataFrame written to compactlog must be binary or string, "
                              f"not {t}")


@dataclass
class _Column:
    """A binary column as Arrow lays it out: one data buffer and each row's (position, length) in it,
    length -1 for null. Batches are encoded from it by the record kernels without a Python object per
    row."""

    data: object  # a buffer (pa.Buffer or bytes)
    spans: np.ndarray  # (rows, 2) int64

    @classmethod
    def of(cls, arr: pa.Array) -> "_Column":
        large = pa.types.is_large_binary(arr.type)
        _, offsets, data = arr.buffers()  # (nulls are read from is_valid: it knows the slice's offset)
        off = np.frombuffer(offsets, dtype=np.int64 if large else np.int32, count=len(arr) + 1,
                            offset=arr.offset * (8 if large else 4)).astype(np.int64)
        spans = np.empty((len(arr), 2), dtype=np.int64)
        spans[:, 0] = off[:-1]
        np.subtract(off[1:], off[:-1], out=spans[:, 1])
        if arr.null_count:
            spans[~arr.is_valid().to_numpy(zero_copy_only=False), 1] = -1
        return cls(b"" if data is None else data, spans)

    def lengths(self) -> np.ndarray:
        return self.spans[:, 1]


@dataclass(frozen=True)
class _Headers:
    """A headers column as Arrow lays it out: every row's (key, value) pairs in two flat columns, row i's
    from ``starts[i]`` for ``lengths[i]`` pairs. Batches are encoded from it without an object per pair."""

    keys: _Column
    values: _Column
    starts: np.ndarray  # int64
    lengths: np.ndarray  # int64
    row_bytes: np.ndarray  # int64: the encoded bytes of each row's headers

    def columns(self, rows: np.ndarray) -> tuple:
        """The header arguments of ``kernels.encode_columns`` for ``rows``."""
        ranges = np.empty((len(rows), 2), dtype=np.int64)
        ranges[:, 0] = self.starts[rows]
        ranges[:, 1] = self.lengths[rows]
        return self.keys.data, self.keys.spans, self.values.data, self.values.spans, ranges


def _headers(col) -> _Headers | None:
    """The headers column, or None when no row has a header; a null list is no headers."""
    if col is None:
        return None
    t = col.type
    if not (pa.types.is_list(t) or pa.types.is_large_list(t)):
        if not pa.types.is_fixed_size_list(t):  # (Arrow's own cast of list views loses pairs: refused, not cast)
            raise InvalidRequestError("the headers column of a DataFrame written to compactlog must be an array of "
                                      f"(key, value) structs, not {t}")
        col = pc.cast(col, pa.list_(t.value_type))
    if not pc.sum(pc.list_value_length(col)).as_py():
        return None
    offsets = col.offsets.to_numpy().astype(np.int64)
    lengths = np.where(col.is_null().to_numpy(zero_copy_only=False), 0, np.diff(offsets))
    lo, hi = int(offsets[0]), int(offsets[-1])
    keys, values = col.values.slice(lo, hi - lo).flatten()
    if keys.null_count:  # (a null pair flattens to a null key too)
        raise null_header_key()
    keys, values = _Column.of(_bytes_column(keys, "headers' key")), _Column.of(_bytes_column(values, "headers' value"))
    per_pair = header_bytes(keys.lengths(), values.lengths())
    total = np.zeros(len(per_pair) + 1, dtype=np.int64)
    np.cumsum(per_pair, out=total[1:])
    starts = offsets[:-1] - lo
    return _Headers(keys, values, starts, lengths, total[starts + lengths] - total[starts])


@dataclass
class _Rows:
    """One Arrow batch of the DataFrame as columns: what a task needs to build record batches."""

    keys: _Column
    values: _Column
    sizes: np.ndarray  # int64: each record's size in a batch (producer.record_sizes)
    timestamps: np.ndarray  # int64 milliseconds
    headers: _Headers | None
    topics: pa.Array | None  # None: every row goes to the writer's topic option
    explicit: np.ndarray  # int64 partition, -1 where the row names none

    @classmethod
    def of(cls, rb: pa.RecordBatch, now_ms: int, with_topic_column: bool) -> "_Rows":
        value = _column(rb, "value")
        if value is None:
            raise InvalidRequestError("a DataFrame written to compactlog needs a value column")
        values = _Column.of(_bytes_column(value, "value"))
        key = _column(rb, "key")
        keys = _Column.of(pa.nulls(rb.num_rows, pa.binary()) if key is None else _bytes_column(key, "key"))
        timestamps = _timestamps(_column(rb, "timestamp"), rb.num_rows, now_ms)
        headers = _headers(_column(rb, "headers"))
        sizes = record_sizes(keys.lengths(), values.lengths(), None if headers is None else headers.row_bytes,
                             None if headers is None else headers.lengths, timestamps)
        return cls(keys, values, sizes, timestamps, headers, _column(rb, "topic") if with_topic_column else None,
                   _explicit(_column(rb, "partition"), rb.num_rows))


def _timestamps(col, n: int, now_ms: int) -> np.ndarray:
    """Milliseconds since the epoch from Spark's timestamp column; a null (or no column) is now."""
    if col is None:
        return np.full(n, now_ms, dtype=np.int64)
    per_ms = {"s": None, "ms": 1, "us": 1000, "ns": 1_000_000}[col.type.unit]
    raw = pc.fill_null(col.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
    ms = raw * 1000 if per_ms is None else raw // per_ms
    return np.where(col.is_null().to_numpy(zero_copy_only=False), now_ms, ms).astype(np.int64)


def _explicit(col, n: int) -> np.ndarray:
    if col is None:
        return np.full(n, -1, dtype=np.int64)
    given = pc.fill_null(col, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    bad = given[(given < 0) & col.is_valid().to_numpy(zero_copy_only=False)]
    if bad.size:
        raise no_partition(int(bad[0]))
    return np.where(col.is_null().to_numpy(zero_copy_only=False), -1, given)


def plan_for(topic: str, meta: dict | None, data_dir: str, batch_bytes: int) -> ProducerPlan:
    """How a task writes to ``topic``: the producer plan under the topic's config. Its partitioner
    lives as long as the task, which is one producer."""
    if meta is None:
        raise unknown_topic(topic, data_dir)
    return ProducerPlan.of(topic, LogConfig(meta.get("config", {})), BuiltInPartitioner(meta["partitions"]),
                           batch_bytes=batch_bytes)


def _partitions(plan: ProducerPlan, rows: _Rows, picked: np.ndarray) -> np.ndarray:
    """Each picked row's partition: its partition column, else murmur2 of its key as Kafka's producer
    does, else the sticky partition."""
    hashed = np.empty(len(picked), dtype=np.int64)
    kernels.partition_spans(rows.keys.data, rows.keys.spans[picked], plan.partitioner.partitions, hashed)
    parts = plan.partition_hashed(hashed, rows.sizes[picked], rows.explicit[picked])
    if parts.max() >= plan.partitioner.partitions:
        raise no_partition(int(parts.max()), plan.topic)
    return parts


def stage_batches(opts: WriteOptions, iterator: Iterator[pa.RecordBatch]) -> list[str]:
    """Build, validate and stage the batches of one task; returns the staging file written (if any).

    Rows are routed and cut with Arrow and numpy; Python touches each batch, not each row. Within a
    partition rows keep their DataFrame order.
    """
    topics = topic_metadata(opts.path)
    plans: dict[str, ProducerPlan] = {}  # built once per task, not per Arrow batch
    with BatchStager(opts.staging) as stager:  # a failed task removes what it staged
        for rb in iterator:
            if rb.num_rows == 0:
                continue
            now_ms = int(time.time() * 1000)
            rows = _Rows.of(rb, now_ms, opts.topic is None)
            for topic, picked in _by_topic(rows.topics, opts.topic, rb.num_rows):
                if topic not in plans:
                    plans[topic] = plan_for(topic, topics.get(topic), opts.path, opts.batch_bytes)
                plan = plans[topic]
                parts = _partitions(plan, rows, picked)
                # (numpy sorts 16-bit keys stably by radix, three times as fast as int64 ones)
                order = np.argsort(parts.astype(np.uint16) if plan.partitioner.partitions <= 1 << 16 else parts,
                                   kind="stable")
                for group in np.split(order, np.flatnonzero(np.diff(parts[order])) + 1):
                    p = int(parts[group[0]])
                    idx = picked[group]

                    def build(s: int, e: int, idx=idx, rows=rows, plan=plan) -> bytes:
                        chunk = idx[s:e]
                        return build_columns_batch(rows.keys.data, rows.keys.spans[chunk], rows.values.data,
                                                   rows.values.spans[chunk], rows.timestamps[chunk],
                                                   headers=None if rows.headers is None else rows.headers.columns(chunk),
                                                   codec=plan.codec, level=plan.level)

                    for data in plan.batches(p, rows.sizes[idx], build):
                        stager.stage(topic, p, plan.config, data, now_ms)
    return stager.files()


def _by_topic(col, fixed: str | None, n: int) -> Iterator[tuple[str, np.ndarray]]:
    """(topic, row indices) pairs: every row for the writer's topic option, else per topic column value."""
    if col is None:
        if fixed is None:
            raise no_topic()
        yield fixed, np.arange(n)
        return
    if col.null_count:
        raise no_topic()
    for topic in pc.unique(col).to_pylist():
        yield topic, np.flatnonzero(pc.equal(col, topic).to_numpy(zero_copy_only=False))


# The errors of rows that cannot be routed, one wording whoever routes them (here, or the JVM's producer
# through compactlog.spark.produced).

def no_topic() -> InvalidRequestError:
    return InvalidRequestError('no topic: set option("topic", ...) or give a topic column')


def unknown_topic(topic: str, data_dir: str) -> UnknownTopicOrPartitionError:
    return UnknownTopicOrPartitionError(f"Topic {shown(topic)} does not exist in {data_dir}.")


def no_partition(p: int, topic: str | None = None) -> UnknownTopicOrPartitionError:
    """A partition a row named (or a hash picked) that the topic lacks; a negative one names no topic."""
    if p < 0 or topic is None:
        return UnknownTopicOrPartitionError(f"Partition {p} does not exist.")
    return UnknownTopicOrPartitionError(f"Partition {p} of topic {shown(topic)} does not exist.")


def null_header_key() -> InvalidRequestError:
    return InvalidRequestError("a header in the headers column has a null key: Kafka header keys are strings")


def append_staged(opts: WriteOptions, paths: list[str]) -> int:
    """Check every staged batch, then append them in task order; returns records appended (see
    ``compactlog.staged_appends.append_staged``)."""
    return append_staged_batches(opts.path, paths)
