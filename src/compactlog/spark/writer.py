"""Appending DataFrames to a topic: tasks build and compress batches, the driver appends them.

A task turns its rows into ~16 KB batches per partition (the topic's ``compression.type``, or none
when it is ``producer``) and stages them in ``<data>/__staging``. At commit the driver opens the data
directory, checks every staged batch against the topic's rules before appending any (so a bad row
fails the job with nothing written), then appends them in task order and removes the staging files.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InvalidRequestError, UnknownTopicOrPartitionError
from ..records import kernels
from ..records.batch import build_batch, iter_batches
from ..records.codecs import Codec, codec_from_name
from ..storage.config import LogConfig
from ..storage.manager import read_topics
from ..storage.validator import validate_and_assign_offsets

BATCH_BYTES = 16384
_PART = struct.Struct(">i")


@dataclass(frozen=True)
class WriteOptions:
    path: str
    topic: str | None

    @classmethod
    def parse(cls, options: dict[str, str], overwrite: bool) -> "WriteOptions":
        opts = {k.lower(): v for k, v in options.items()}
        if overwrite:
            raise InvalidRequestError("a topic is an append-only log: use mode('append')")
        if not opts.get("path"):
            raise InvalidRequestError('option "path" (the data directory) is required')
        return cls(opts["path"], opts.get("topic"))


def _column(batch: pa.RecordBatch, name: str):
    idx = batch.schema.get_field_index(name)
    return None if idx < 0 else batch.column(idx)


def _binary_list(arr) -> list:
    if arr is None:
        return []
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        arr = pc.cast(arr, pa.binary())
    return arr.to_pylist()


def stage_batches(opts: WriteOptions, iterator: Iterator[pa.RecordBatch]) -> list[str]:
    """Build and stage the batches of one task; returns the staging file written (if any)."""
    from .source import staging_path

    topics = read_topics(opts.path)
    out_path = None
    out = None
    rr = 0
    try:
        for rb in iterator:
            n = rb.num_rows
            if n == 0:
                continue
            values = _binary_list(_column(rb, "value"))
            if not values:
                raise InvalidRequestError("a DataFrame written to compactlog needs a value column")
            keys = _binary_list(_column(rb, "key")) or [None] * n
            topic_col = _column(rb, "topic")
            topic_names = topic_col.to_pylist() if opts.topic is None and topic_col is not None else [opts.topic] * n
            ts_col = _column(rb, "timestamp")
            now = int(time.time() * 1000)
            ts = ([now if t is None else int(t.timestamp() * 1000) for t in ts_col.to_pylist()]
                  if ts_col is not None else [now] * n)
            hdr_col = _column(rb, "headers")
            headers = ([tuple((h["key"], h["value"]) for h in (hs or ())) for hs in hdr_col.to_pylist()]
                       if hdr_col is not None else None)
            part_col = _column(rb, "partition")
            explicit = part_col.to_pylist() if part_col is not None else [None] * n
            for topic in dict.fromkeys(topic_names):
                if topic is None:
                    raise InvalidRequestError('no topic: set option("topic", ...) or give a topic column')
                meta = topics.get(topic)
                if meta is None:
                    raise UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist in {opts.path}.")
                cfg = LogConfig(meta.get("config", {}))
                codec = Codec.NONE if cfg.compression_type == "producer" else codec_from_name(cfg.compression_type)
                level = {Codec.GZIP: cfg.compression_gzip_level, Codec.LZ4: cfg.compression_lz4_level,
                         Codec.ZSTD: cfg.compression_zstd_level}.get(codec)
                rows = [i for i in range(n) if topic_names[i] == topic]
                hashed = kernels.partition_for_keys([keys[i] for i in rows], meta["partitions"])
                parts = []
                for i, h, e in zip(rows, hashed, [explicit[i] for i in rows]):
                    if e is None:
                        e = h if h >= 0 else rr % meta["partitions"]
                    parts.append(e)
                rr += 1
                parts_a = np.asarray(parts)
                for p in np.unique(parts_a).tolist():
                    if not 0 <= p < meta["partitions"]:
                        raise UnknownTopicOrPartitionError(f"Partition {p} of topic '{topic}' does not exist.")
                    idx = [rows[j] for j in np.flatnonzero(parts_a == p).tolist()]
                    for start in range(0, len(idx), _rows_per_batch(values, idx)):
                        chunk = idx[start : start + _rows_per_batch(values, idx)]
                        data = build_batch([keys[i] for i in chunk], [values[i] for i in chunk], [ts[i] for i in chunk],
                                           headers=None if headers is None else [headers[i] for i in chunk],
                                           codec=codec, level=level)
                        if out is None:
                            out_path = staging_path(opts.path)
                            out = open(out_path, "wb")
                        name = topic.encode()
                        out.write(_PART.pack(len(name)) + name + _PART.pack(p) + data)
    finally:
        if out is not None:
            out.close()
    return [str(out_path)] if out_path else []


def _rows_per_batch(values: list, idx: list[int]) -> int:
    sample = idx[:64]
    avg = sum(len(values[i] or b"") for i in sample) / max(len(sample), 1) + 24
    return max(1, int(BATCH_BYTES // avg))


def _read_staged(path: str) -> Iterator[tuple[str, int, bytes]]:
    data = Path(path).read_bytes()
    pos = 0
    while pos < len(data):
        (nlen,) = _PART.unpack_from(data, pos)
        topic = data[pos + 4 : pos + 4 + nlen].decode()
        pos += 4 + nlen
        (p,) = _PART.unpack_from(data, pos)
        pos += 4
        _, batch = next(iter_batches(data, pos))
        yield topic, p, bytes(batch.buffer)
        pos += batch.size


def append_staged(opts: WriteOptions, paths: list[str]) -> int:
    """Validate every staged batch, then append them in order; returns records appended."""
    import compactlog

    try:
        with compactlog.open(opts.path) as cl:
            staged = [entry for p in paths for entry in _read_staged(p)]
            for topic, p, data in staged:  # check everything before writing anything
                lg = cl.log(topic, p)
                validate_and_assign_offsets(data, lg.log_end_offset, lg.config, cl.time.milliseconds(), lg.name)
            appended = 0
            for topic, p, data in staged:
                appended += cl.append_batch(topic, p, data).record_count
            return appended
    finally:
        for p in paths:
            Path(p).unlink(missing_ok=True)
