"""The producer's side of a topic: which codec and level, which partition, which records go in one batch.

The embedded API (``produce``, ``produce_batch``), the console producer (through ``produce_batch``) and
the Spark writer all build their batches with a :class:`ProducerPlan`, so they cannot drift apart.
Kafka spreads this over its producer (``KafkaProducer``, ``RecordAccumulator``, ``BuiltInPartitioner``);
one plan per topic holds it here:

* **Compression** (:func:`compression_for`): a producer that knows the topic's config builds its batches
  in the codec the log stores, so an append keeps them as they are (Kafka's in-place path) instead of
  recompressing them: the topic's ``compression.type`` at the topic's level; the producer's own codec
  and level when the topic says ``producer``, or when the producer asked for the topic's codec (Kafka
  keeps a batch already in the topic's codec whatever its level).
* **Partitioner** (:class:`BuiltInPartitioner`): a keyed record goes to ``murmur2(key) % partitions``;
  a keyless one to the sticky partition of KIP-794, chosen at random and kept until at least
  ``batch.size`` bytes went to it, switching at a batch boundary.
* **Batch cutter** (:meth:`ProducerPlan.batches`): records of one partition, in order, fill batches of
  up to ``batch.size`` bytes (a record larger than that is sent alone, as Kafka's producer does; 0 is one
  record per batch). The plan also knows what the log accepts, ``max.message.bytes`` and
  ``segment.bytes``, and no batch it builds exceeds either: a batch that comes out larger than its
  estimate is split; a record that cannot fit alone raises the ``RecordTooLargeError`` or
  ``RecordBatchTooLargeError`` the log would raise, in Kafka's broker's words, naming the record.

Everything per record is numpy over arrays of lengths; Python runs once per batch.
"""

from __future__ import annotations

import random
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

import numpy as np

from .errors import InvalidRecordError, InvalidTimestampError, RecordBatchTooLargeError, RecordTooLargeError
from .records import kernels
from .records.batch import HEADER_SIZE
from .records.codecs import Codec, check_level, codec_from_name
from .storage.log_config import LogConfig

DEFAULT_BATCH_BYTES = 16384  # the Java producer's batch.size


def compression_for(config: LogConfig, requested: str | None = None, level: int | None = None) -> tuple[Codec, int | None]:
    """The codec and level to build batches for a topic with ``config``, given what the producer asked
    for (``requested``, a producer codec name, ``none`` when not given; ``level``, None for the codec's
    default). The producer's request is checked first, so a bad name or level is refused either way."""
    asked = codec_from_name(requested or "none")
    level = check_level(asked, level)
    if config.compression_type == "producer":
        return asked, level
    stored = codec_from_name(config.compression_type)
    if stored is asked:
        return asked, level
    return stored, config.compression_level(stored)


def _varint_sizes(v: np.ndarray) -> np.ndarray:
    """Bytes of each value as a zig-zag varint (the record format's varint and varlong)."""
    v = np.asarray(v, dtype=np.int64)
    zz = ((v << 1) ^ (v >> 63)).view(np.uint64)
    n = np.ones(len(zz), dtype=np.int64)
    for shift in range(7, 64, 7):  # most values are short: stop at the first length none reaches
        longer = zz >= np.uint64(1 << shift)
        if not longer.any():
            break
        n += longer
    return n


def record_sizes(key_lengths: np.ndarray, value_lengths: np.ndarray, header_sizes: np.ndarray | None = None,
                 header_counts: np.ndarray | None = None, timestamps: np.ndarray | None = None) -> np.ndarray:
    """Each record's size in a v2 batch (Kafka's ``DefaultRecord.sizeInBytes``), from lengths (-1 for a
    null key or value), the encoded bytes of each record's headers (summed from :func:`header_bytes`) and its
    timestamp. Exact but for two deltas known only once a batch is cut: the offset delta is counted as
    two bytes (exact from 64 to 8191 records into a batch) and the timestamp delta against the first
    record given."""
    klen = np.asarray(key_lengths, dtype=np.int64)
    vlen = np.asarray(value_lengths, dtype=np.int64)
    attributes, offset_delta = 1, 2
    body = attributes + offset_delta + _varint_sizes(klen) + np.maximum(klen, 0) + _varint_sizes(vlen) + np.maximum(vlen, 0)
    if timestamps is None or not len(timestamps):
        body += 1
    else:
        ts = np.asarray(timestamps, dtype=np.int64)
        body += _varint_sizes(ts - ts[0])
    if header_counts is None:
        body += 1
    else:
        body += _varint_sizes(np.asarray(header_counts, dtype=np.int64)) + header_sizes
    return _varint_sizes(body) + body


def _varint_size(v: int) -> int:
    zz = (v << 1) ^ (v >> 63)
    return max(1, (zz.bit_length() + 6) // 7)


def one_record_size(key: bytes | None, value: bytes | None, headers=None) -> int:
    """:func:`record_sizes` of a single record without a timestamp delta, in plain Python: for the
    per-record ``produce``, where numpy's overhead on one-element arrays is most of the cost."""
    klen = -1 if key is None else len(key)
    vlen = -1 if value is None else len(value)
    body = 1 + 2 + _varint_size(klen) + max(klen, 0) + _varint_size(vlen) + max(vlen, 0) + 1
    hs = list(headers or ())
    if not hs:
        body += 1
    else:
        body += _varint_size(len(hs))
        for k, v in hs:
            kl = len(k.encode("utf-8") if isinstance(k, str) else k)
            vl = -1 if v is None else len(v)
            body += _varint_size(kl) + kl + _varint_size(vl) + max(vl, 0)
    return _varint_size(body) + body


def header_bytes(key_lengths: np.ndarray, value_lengths: np.ndarray) -> np.ndarray:
    """The encoded bytes of each header, from its key's UTF-8 length and its value's length (-1: null)."""
    klen = np.asarray(key_lengths, dtype=np.int64)
    vlen = np.asarray(value_lengths, dtype=np.int64)
    return _varint_sizes(klen) + klen + _varint_sizes(vlen) + np.maximum(vlen, 0)


def lengths(items: Sequence[bytes | None]) -> np.ndarray:
    """Lengths of a list of keys or values, -1 for None."""
    return np.fromiter((-1 if b is None else len(b) for b in items), dtype=np.int64, count=len(items))


def cut(sizes: np.ndarray, batch_bytes: int) -> np.ndarray:
    """Where each batch ends: greedy, in order, a batch takes records while its 61-byte header and their
    ``sizes`` stay within ``batch_bytes``, and at least one (Kafka sends a record larger than
    ``batch.size`` alone); ``batch_bytes`` 0 is one record per batch."""
    n = len(sizes)
    room = batch_bytes - HEADER_SIZE
    if n == 0:
        return np.empty(0, dtype=np.int64)
    if room <= 0:
        return np.arange(1, n + 1, dtype=np.int64)
    cum = np.cumsum(sizes)
    if cum[-1] <= room:
        return np.array([n], dtype=np.int64)
    ends = []
    start = 0
    base = 0
    while start < n:
        end = max(int(np.searchsorted(cum, base + room, side="right")), start + 1)
        ends.append(end)
        base = int(cum[end - 1])
        start = end
    return np.array(ends, dtype=np.int64)


@dataclass
class BuiltInPartitioner:
    """Kafka's default partitioning for one topic (``BuiltInPartitioner``, KIP-794).

    A record with a key goes to ``(murmur2(key) & 0x7fffffff) % partitions``. Keyless records go to a
    sticky partition, chosen uniformly at random; once at least ``batch.size`` bytes (batch headers
    included, as the producer counts them) went to it, the next batch of keyless records goes to a
    partition chosen at random again (possibly the same). The choice and the bytes carry over from one
    call to the next, as in a long-lived producer: keep one partitioner per topic.
    """

    partitions: int
    rng: random.Random = field(default_factory=random.Random)
    sticky: int = -1  # -1 until the first keyless record
    produced: int = 0  # bytes that went to the sticky partition

    def sticky_partition(self) -> int:
        """The partition the next keyless record goes to."""
        if self.sticky < 0:
            self._switch()
        return self.sticky

    def _switch(self) -> None:
        self.sticky = self.rng.randrange(self.partitions)
        self.produced = 0

    def partition(self, keys: Sequence[bytes | None], sizes: np.ndarray, batch_bytes: int,
                  explicit: np.ndarray | None = None) -> np.ndarray:
        """Each record's partition: ``explicit`` where it is >= 0, else by key, else sticky (``sizes``
        are the records' sizes, :func:`record_sizes`; ``batch_bytes`` is the producer's batch.size)."""
        return self.partition_hashed(np.asarray(kernels.partition_for_keys(keys, self.partitions), dtype=np.int64),
                                     sizes, batch_bytes, explicit)

    def partition_hashed(self, parts: np.ndarray, sizes: np.ndarray, batch_bytes: int,
                         explicit: np.ndarray | None = None) -> np.ndarray:
        """:meth:`partition` with the keys already hashed to their partitions (-1 for a null key), as a
        columnar writer hashes them (``kernels.partition_spans``); ``parts`` is overwritten."""
        if explicit is not None:
            parts = np.where(explicit >= 0, explicit, parts)
        keyless = np.flatnonzero(parts < 0)
        if len(keyless):
            parts[keyless] = self._sticky_run(sizes[keyless], batch_bytes)
        return parts

    def partition_one(self, key: bytes | None, size: int, batch_bytes: int) -> int:
        """:meth:`partition` of a single record sent alone (one batch of one record): the per-record
        ``produce`` path, without numpy."""
        if key is not None:
            return kernels.partition_for_keys([key], self.partitions)[0]
        if self.sticky < 0 or self.produced >= max(1, batch_bytes):
            self._switch()
        self.produced += HEADER_SIZE + size
        return self.sticky

    def _sticky_run(self, sizes: np.ndarray, batch_bytes: int) -> np.ndarray:
        out = np.empty(len(sizes), dtype=np.int64)
        switch_at = max(1, batch_bytes)  # Kafka's producer takes batch.size 0 as 1 here
        start = 0
        for end in cut(sizes, batch_bytes).tolist():
            if self.sticky < 0 or self.produced >= switch_at:
                self._switch()
            out[start:end] = self.sticky
            self.produced += HEADER_SIZE + int(sizes[start:end].sum())
            start = end
        return out


@dataclass
class ProducerPlan:
    """How a producer writes to one topic: codec and level, partitioner and batch size, under the
    topic's ``config``, whose limits (``max.message.bytes``, ``segment.bytes``) no batch it builds exceeds."""

    topic: str
    config: LogConfig
    codec: Codec
    level: int | None
    partitioner: BuiltInPartitioner
    batch_bytes: int = DEFAULT_BATCH_BYTES

    @classmethod
    def of(cls, topic: str, config: LogConfig, partitioner: BuiltInPartitioner, compression: str | None = None,
           level: int | None = None, batch_bytes: int = DEFAULT_BATCH_BYTES) -> "ProducerPlan":
        return cls(topic, config, *compression_for(config, compression, level), partitioner, batch_bytes)

    @property
    def max_batch_bytes(self) -> int:
        """The largest batch the log takes: within ``max.message.bytes`` and within a segment."""
        return min(self.config.max_message_bytes, self.config.segment_bytes)

    @property
    def cut_target(self) -> int:
        """The bytes batches are cut at: ``batch.size`` within the log's limit; 0 is a record a batch."""
        return min(self.batch_bytes, self.max_batch_bytes) if self.batch_bytes else 0

    def partition(self, keys: Sequence[bytes | None], sizes: np.ndarray, explicit: np.ndarray | None = None) -> np.ndarray:
        """Each record's partition (see :class:`BuiltInPartitioner`)."""
        return self.partitioner.partition(keys, sizes, self.batch_bytes, explicit)

    def partition_hashed(self, parts: np.ndarray, sizes: np.ndarray, explicit: np.ndarray | None = None) -> np.ndarray:
        """Each record's partition, its key already hashed (see :meth:`BuiltInPartitioner.partition_hashed`)."""
        return self.partitioner.partition_hashed(parts, sizes, self.batch_bytes, explicit)

    def batches(self, partition: int, sizes: np.ndarray, build: Callable[[int, int], bytes],
                records: Sequence[int] | None = None) -> Iterator[bytes]:
        """The batches of one partition's records, in order: ``sizes`` are the records' sizes
        (:func:`record_sizes`) and ``build(start, end)`` builds the batch of records ``start..end-1``
        (in ``self.codec`` at ``self.level``). A batch larger than the log takes is split and built
        again; a record that is too large alone raises, named by ``records[i]`` (its number in the
        producer's input) when given."""
        limit = self.max_batch_bytes
        start = 0
        for end in cut(sizes, self.cut_target).tolist():
            pending = [(start, end)]
            while pending:
                s, e = pending.pop()
                data = build(s, e)
                if len(data) <= limit:
                    yield data
                elif e - s == 1:
                    raise self._too_large(partition, len(data), None if records is None else records[s])
                else:  # the estimate was short (compression overhead, long deltas): halve and rebuild
                    mid = (s + e) // 2
                    pending += [(mid, e), (s, mid)]
            start = end

    def single(self, partition: int, data: bytes) -> bytes:
        """A batch of one record, built already: nothing to cut, only the log's limits to check (the
        per-record ``produce`` path, where sizing with numpy would cost more than the append)."""
        if len(data) > self.max_batch_bytes:
            raise self._too_large(partition, len(data), None)
        return data

    def _too_large(self, partition: int, size: int, record: int | None) -> Exception:
        """The error the log would raise for this one-record batch (Kafka's broker's words), naming the record."""
        named = "" if record is None else f" Record {record} alone makes a batch that large."
        if size > self.config.max_message_bytes:
            return RecordTooLargeError(
                f"The record batch size in the append to {self.topic}-{partition} is {size} bytes which exceeds the "
                f"maximum configured value of {self.config.max_message_bytes}.{named}")
        return RecordBatchTooLargeError(
            f"Message batch size is {size} bytes in append to partition {self.topic}-{partition} which exceeds the "
            f"maximum configured segment size of {self.config.segment_bytes}.{named}")


# The arguments of CompactLog.produce / produce_batch ---------------------------------------------------

_BYTES = (bytes, bytearray, memoryview)


def check_record(key, value, headers, timestamp, where: str = "") -> None:
    """Refuse arguments of the wrong type with a typed error (a producer without a serializer takes
    bytes, as kafka-python's does)."""
    for name, v in (("key", key), ("value", value)):
        if v is not None and not isinstance(v, _BYTES):
            hint = " (encode it, e.g. .encode())" if isinstance(v, str) else ""
            raise InvalidRecordError(f"{where}{name} must be bytes or None, got {type(v).__name__}{hint}")
    if timestamp is not None and (not isinstance(timestamp, int) or isinstance(timestamp, bool)
                                  or not -1 <= timestamp < 2**63):
        raise InvalidTimestampError(f"{where}timestamp must be an int of milliseconds >= -1, got {timestamp!r}")
    for h in headers or ():
        if (not isinstance(h, (tuple, list)) or len(h) != 2 or not isinstance(h[0], (str, bytes))
                or (h[1] is not None and not isinstance(h[1], _BYTES))):
            raise InvalidRecordError(f"{where}each header must be a (str key, bytes or None value) pair, got {h!r:.80}")
        if isinstance(h[0], str):
            try:
                h[0].encode("utf-8")
            except UnicodeEncodeError:
                raise InvalidRecordError(f"{where}header key {h[0]!r:.40} cannot be encoded as UTF-8") from None


@contextmanager
def naming_bad_record(rows: list):
    """Turn a TypeError from sizing or building batches into the typed error naming the first bad
    record (only then: checking every record first costs)."""
    try:
        yield
    except (TypeError, ValueError, UnicodeError):
        for i, r in enumerate(rows):
            check_record(r[0], r[1], r[2] if len(r) > 2 else None, None, f"record {i}: ")
        raise


def record_sizes_of(keys: list, values: list, headers: list | None) -> np.ndarray:
    """The records' sizes in a batch, for the producer plan (headers sized only when there are some)."""
    if headers is None:
        return record_sizes(lengths(keys), lengths(values))
    counts = np.fromiter(map(len, headers), dtype=np.int64, count=len(headers))
    flat = [h for hs in headers for h in hs]
    hkeys = lengths([k.encode("utf-8") if isinstance(k, str) else k for k, _ in flat])
    per_header = header_bytes(hkeys, lengths([v for _, v in flat]))
    total = np.zeros(len(flat) + 1, dtype=np.int64)
    np.cumsum(per_header, out=total[1:])
    ends = np.cumsum(counts)
    return record_sizes(lengths(keys), lengths(values), total[ends] - total[ends - counts], counts)
