"""RecordBatch v2: header view, validation, record access, builder and header patching.

Byte layout (big-endian; 61-byte header, then the records section, compressed as one stream when
attribute bits 0-2 are non-zero)::

    off size field
      0   8  baseOffset
      8   4  batchLength            bytes after this field (total size - 12)
     12   4  partitionLeaderEpoch   not covered by the CRC
     16   1  magic                  2
     17   4  crc                    CRC-32C of bytes [21, end)
     21   2  attributes             codec:3 | timestampType:1 | transactional:1 | control:1 | deleteHorizon:1
     23   4  lastOffsetDelta
     27   8  baseTimestamp          first record's ts, or the delete horizon when that bit is set
     35   8  maxTimestamp
     43   8  producerId
     51   2  producerEpoch
     53   4  baseSequence
     57   4  recordsCount
"""

from __future__ import annotations

import struct
from collections import namedtuple
from typing import TYPE_CHECKING, Any, Iterator, NamedTuple, Sequence

from ..errors import CorruptRecordError
from . import kernels
from .codecs import Codec, codec_from_id, compress, decompress

if TYPE_CHECKING:
    import numpy

# numpy, imported by the first scan(): decoding records and walking a log need none, so a reader that
# only decodes (or opens an empty log) does not load it.
np: Any = None


def _numpy() -> Any:
    global np
    import numpy

    np = numpy
    return numpy

# The header's fields in order, with their struct codes: the table above, the one home of the layout.
# Every offset below is computed from it; code elsewhere names a field's offset, never its number.
HEADER_FIELDS: tuple[tuple[str, str], ...] = (
    ("baseOffset", "q"),
    ("batchLength", "i"),
    ("partitionLeaderEpoch", "i"),
    ("magic", "b"),
    ("crc", "I"),
    ("attributes", "h"),
    ("lastOffsetDelta", "i"),
    ("baseTimestamp", "q"),
    ("maxTimestamp", "q"),
    ("producerId", "q"),
    ("producerEpoch", "h"),
    ("baseSequence", "i"),
    ("recordsCount", "i"),
)
HEADER = struct.Struct(">" + "".join(code for _, code in HEADER_FIELDS))
# Where each field starts: the size of the fields before it.
FIELD_OFFSETS: dict[str, int] = {
    name: struct.calcsize(">" + "".join(code for _, code in HEADER_FIELDS[:i])) for i, (name, _) in enumerate(HEADER_FIELDS)
}
HEADER_SIZE = HEADER.size  # 61
BATCH_LENGTH_OFFSET = FIELD_OFFSETS["batchLength"]
LOG_OVERHEAD = FIELD_OFFSETS["partitionLeaderEpoch"]  # baseOffset + batchLength: 12
PARTITION_LEADER_EPOCH_OFFSET = FIELD_OFFSETS["partitionLeaderEpoch"]
MAGIC_OFFSET = FIELD_OFFSETS["magic"]
HEADER_SIZE_UP_TO_MAGIC = FIELD_OFFSETS["crc"]  # enough bytes to know a batch's size and format: 17
MAGIC = 2
CRC_OFFSET = FIELD_OFFSETS["crc"]
ATTRIBUTES_OFFSET = FIELD_OFFSETS["attributes"]
MAX_TIMESTAMP_OFFSET = FIELD_OFFSETS["maxTimestamp"]
PRODUCER_ID_OFFSET = FIELD_OFFSETS["producerId"]

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
DELETE_HORIZON_BIT = 0x40

CREATE_TIME = 0
LOG_APPEND_TIME = 1
NO_TIMESTAMP = -1

_LENGTH = struct.Struct(">qi")
_INT32 = struct.Struct(">i")
# length varint, attributes, timestampDelta, offsetDelta, keyLength, valueLength, headerCount: 1 byte each at least
_MIN_RECORD_SIZE = 7
_INT64 = struct.Struct(">q")
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_ATTRS_TO_MAX_TS = struct.Struct(">hiqq")  # attributes, lastOffsetDelta, baseTimestamp, maxTimestamp

Record = namedtuple("Record", "topic partition offset timestamp timestamp_type key value headers")
Record.__doc__ = "One decoded record, as a consumer sees it. ``headers`` is a tuple of (str, bytes | None)."


class BatchSummary(NamedTuple):
    """What append validation needs from a batch's records, from one kernel pass (``RecordBatch.summarize``)."""

    null_keys: int  # records without a key
    min_timestamp: int  # absolute (base timestamp + the smallest delta)
    max_timestamp: int
    sequential_offsets: bool  # offset deltas are exactly 0..n-1
    invalid_header_keys: int  # records with a header key that is not valid UTF-8


def crc32c(data: Any) -> int:
    """CRC-32C (Castagnoli) of ``data``."""
    return kernels.crc32c(data)


def batch_size_at(buffer: Any, position: int = 0) -> int:
    """The whole size of the batch at ``position`` (its 12-byte log overhead plus batchLength), from
    those 12 bytes alone: what a reader needs before it knows whether the rest of the batch is there."""
    (length,) = _INT32.unpack_from(buffer, position + BATCH_LENGTH_OFFSET)
    return LOG_OVERHEAD + length


def producer_id_at(buffer: Any, position: int = 0) -> int:
    """The producerId of the batch at ``position`` (-1: not an idempotent producer), without parsing
    or checking the rest of the header: the broker asks it of a request before deciding where to
    validate it."""
    (pid,) = _INT64.unpack_from(buffer, position + PRODUCER_ID_OFFSET)
    return pid


class RecordBatch:
    """A read-only view of one v2 batch in a buffer (no copy until records are asked for).

    ``origin`` says where the bytes came from: a string such as "t-0/00000000000000000000.log position
    4096", or any object whose ``str()`` is one (formatted only when an error needs it). Readers set it;
    errors about the batch then name it: "batch at offset N (<origin>)". Methods that decompress take
    ``max_size``, the most the records may decompress to (None = ``codecs.DEFAULT_MAX_DECOMPRESSED_BYTES``).
    """

    __slots__ = (
        "buffer", "base_offset", "batch_length", "partition_leader_epoch", "magic", "crc", "attributes",
        "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id", "producer_epoch",
        "base_sequence", "record_count", "origin",
    )

    def __init__(self, buffer: Any, origin: Any = None) -> None:
        self.origin = origin
        if len(buffer) < HEADER_SIZE:
            at = "" if origin is None else f" ({origin})"
            raise CorruptRecordError(f"batch of {len(buffer)} bytes{at} is shorter than the 61-byte header")
        self.buffer = buffer
        (
            self.base_offset, self.batch_length, self.partition_leader_epoch, self.magic, self.crc,
            self.attributes, self.last_offset_delta, self.base_timestamp, self.max_timestamp,
            self.producer_id, self.producer_epoch, self.base_sequence, self.record_count,
        ) = HEADER.unpack_from(buffer, 0)

    @property
    def where(self) -> str:
        """How errors name the batch: "batch at offset N", with the origin in parentheses when it is known."""
        at = f"batch at offset {self.base_offset}"
        return at if self.origin is None else f"{at} ({self.origin})"

    def _timestamp(self, base: int, delta: int) -> int:
        """base + delta, or CorruptRecordError when the sum leaves the int64 range a timestamp must fit."""
        ts = base + delta
        if not INT64_MIN <= ts <= INT64_MAX:
            raise CorruptRecordError(f"{self.where}: base timestamp {base} + timestamp delta {delta} is outside the int64 range")
        return ts

    # derived header facts -------------------------------------------------------------------
    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def codec(self) -> Codec:
        try:
            return codec_from_id(self.attributes & COMPRESSION_MASK)
        except CorruptRecordError as exc:
            raise CorruptRecordError(f"{self.where}: {exc}") from None

    @property
    def timestamp_type(self) -> int:
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_BIT else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_BIT)

    @property
    def delete_horizon_ms(self) -> int | None:
        return self.base_timestamp if self.attributes & DELETE_HORIZON_BIT else None

    @property
    def first_timestamp(self) -> int:
        """The first record's timestamp (the base timestamp unless it holds a delete horizon)."""
        if not self.attributes & DELETE_HORIZON_BIT:
            return self.base_timestamp
        cols = self.scan()[1]
        return self._timestamp(self.base_timestamp, int(cols[0, kernels.C_TS_DELTA])) if len(cols) else NO_TIMESTAMP

    # validation -----------------------------------------------------------------------------
    def compute_crc(self) -> int:
        return crc32c(memoryview(self.buffer)[ATTRIBUTES_OFFSET : self.size])

    def is_valid(self) -> bool:
        return self.size >= HEADER_SIZE and len(self.buffer) >= self.size and self.compute_crc() == self.crc

    def ensure_valid(self) -> None:
        """Kafka's ``ensureValid``: size, magic and CRC; raises CorruptRecordError naming the mismatch."""
        if self.magic != MAGIC:
            if self.origin is None:
                raise CorruptRecordError(f"unsupported batch magic {self.magic} at offset {self.base_offset} (only v2 is supported)")
            raise CorruptRecordError(f"{self.where}: unsupported batch magic {self.magic} (only v2 is supported)")
        if self.size < HEADER_SIZE:
            raise CorruptRecordError(f"{self.where} is {self.size} bytes, less than the 61-byte header")
        if len(self.buffer) < self.size:
            raise CorruptRecordError(f"{self.where} declares {self.size} bytes but only {len(self.buffer)} are present")
        computed = self.compute_crc()
        if computed != self.crc:
            raise CorruptRecordError(f"{self.where} is corrupt (stored crc = {self.crc}, computed crc = {computed})")

    # records --------------------------------------------------------------------------------
    def payload(self, max_size: int | None = None) -> Any:
        """The records section, decompressed (a zero-copy view when uncompressed).

        A compressed section that would decompress to more than ``max_size`` bytes is refused.
        """
        raw = memoryview(self.buffer)[HEADER_SIZE : self.size]
        codec = self.codec
        if codec is Codec.NONE:
            return raw
        try:
            return decompress(codec, raw, max_size)
        except CorruptRecordError as exc:
            raise CorruptRecordError(f"{self.where}: {exc}") from None

    def _records_payload(self, max_size: int | None = None) -> Any:
        """The payload, after checking that ``recordsCount`` is possible for it.

        A record takes at least 7 bytes, so a count the payload cannot hold is corruption, caught here
        before anything is sized by it.
        """
        data = self.payload(max_size)
        n = self.record_count
        if n < 0:
            raise CorruptRecordError(f"{self.where}: invalid record count {n}")
        if n > len(data) // _MIN_RECORD_SIZE:
            raise CorruptRecordError(
                f"{self.where}: premature EOF: {n} records cannot fit in {len(data)} bytes of records"
            )
        return data

    def scan(self, max_size: int | None = None) -> tuple[bytes, numpy.ndarray]:
        """Decompress and validate the records; returns (payload, int64 columns of ``kernels.NCOLS``)."""
        data = self._records_payload(max_size)
        xp = np or _numpy()
        cols = xp.empty((self.record_count, kernels.NCOLS), dtype=xp.int64)
        try:
            kernels.scan_records(data, self.record_count, cols)
        except ValueError as exc:
            raise CorruptRecordError(f"{self.where}: {exc}") from None
        return data, cols

    def summarize(self, max_size: int | None = None) -> BatchSummary:
        """Validate the records and return what append validation needs, as a :class:`BatchSummary`.

        Timestamps are absolute (base timestamp + deltas). One kernel call, no per-record objects.
        """
        try:
            s = kernels.summarize_records(self._records_payload(max_size), self.record_count)
        except ValueError as exc:
            raise CorruptRecordError(f"{self.where}: {exc}") from None
        base = self.base_timestamp
        return BatchSummary(s.null_keys, self._timestamp(base, s.min_ts_delta), self._timestamp(base, s.max_ts_delta),
                            s.sequential_offsets, s.invalid_header_keys)

    def records(self, topic: str | None = None, partition: int = -1, max_size: int | None = None) -> list:
        """Decode every record into :class:`Record` tuples (compiled kernel when available).

        A header key that is not valid UTF-8 is decoded with replacement characters, as Java's
        ``new String(bytes, UTF_8)`` reads it.
        """
        data = self._records_payload(max_size)
        override = self.max_timestamp if self.attributes & TIMESTAMP_TYPE_BIT else None
        try:
            return kernels.decode_records(
                Record, topic, partition, self.timestamp_type, data, self.record_count,
                self.base_offset, self.base_timestamp, override,
            )
        except ValueError as exc:
            raise CorruptRecordError(f"{self.where}: {exc}") from None

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, count={self.record_count}, "
            f"size={self.size}, codec={self.codec.config_name}, crc={self.crc})"
        )


def iter_batches(buffer: Any, position: int = 0, end: int | None = None) -> Iterator[tuple[int, RecordBatch]]:
    """Yield (position, batch) for each whole batch in ``buffer[position:end]``.

    Stops quietly at a partial tail (fewer than 17 bytes left, or a batch running past ``end``), as a
    segment reader does; a batch length below the v2 minimum is corruption. Batches are not
    CRC-checked here: callers that need it call ``ensure_valid``.
    """
    mv = memoryview(buffer)
    end = len(mv) if end is None else min(end, len(mv))
    while end - position >= HEADER_SIZE_UP_TO_MAGIC:
        _, length = _LENGTH.unpack_from(mv, position)
        size = length + LOG_OVERHEAD
        if length < HEADER_SIZE - LOG_OVERHEAD:
            raise CorruptRecordError(f"batch at file position {position} has an impossible length {length}")
        if position + size > end:
            return
        yield position, RecordBatch(mv[position : position + size])
        position += size


class BatchInfo(NamedTuple):
    """Header facts for building a batch; defaults are those of a plain producer batch."""

    base_offset: int = 0
    timestamp_type: int = CREATE_TIME
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    partition_leader_epoch: int = -1
    is_transactional: bool = False
    is_control: bool = False


def build_batch(
    keys: Sequence[bytes | None],
    values: Sequence[bytes | None],
    timestamps: Sequence[int] | None = None,
    *,
    headers: Sequence[Sequence[tuple[str | bytes, bytes | None]]] | None = None,
    codec: Codec = Codec.NONE,
    level: int | None = None,
    info: BatchInfo = BatchInfo(),
    offset_deltas: Sequence[int] | None = None,
    last_offset_delta: int | None = None,
    delete_horizon: int | None = None,
    max_timestamp: int | None = None,
    header_offsets: Sequence[int] | None = None,
) -> bytes:
    """Build one v2 batch from parallel sequences of keys, values and timestamps.

    ``offset_deltas`` (default 0..n-1) allows the gaps compaction leaves; ``last_offset_delta`` keeps a
    cleaned batch's original extent; ``delete_horizon`` sets the KIP-534 bit and stores the horizon in
    baseTimestamp; ``max_timestamp`` overrides the computed one (LogAppendTime keeps the original).
    With ``header_offsets`` (n + 1 ints) ``headers`` is one flat list of pairs, record i's from
    ``header_offsets[i]`` up to ``header_offsets[i + 1]``, as Arrow lays out a list column.
    An empty key list builds the 61-byte empty batch Kafka keeps after cleaning.
    """
    n = len(keys)
    if timestamps is None:
        timestamps = [NO_TIMESTAMP] * n
    if headers is not None and not any(headers):
        headers = header_offsets = None  # the kernels take str header keys as UTF-8: no per-record work here
    attributes = int(codec) | (TIMESTAMP_TYPE_BIT if info.timestamp_type == LOG_APPEND_TIME else 0)
    attributes |= TRANSACTIONAL_BIT if info.is_transactional else 0
    attributes |= CONTROL_BIT if info.is_control else 0
    if n:
        first_ts = timestamps[0]
        base_ts = first_ts if delete_horizon is None else delete_horizon
        if delete_horizon is not None:
            attributes |= DELETE_HORIZON_BIT
        body = kernels.encode_records(keys, values, timestamps, base_ts, offset_deltas, headers,
                                      header_offsets)
        if codec is not Codec.NONE:
            body = compress(codec, body, level)
        max_ts = max(timestamps) if max_timestamp is None else max_timestamp
        lod = (n - 1 if offset_deltas is None else offset_deltas[-1]) if last_offset_delta is None else last_offset_delta
    else:
        attributes &= ~COMPRESSION_MASK
        body = b""
        base_ts = NO_TIMESTAMP
        max_ts = NO_TIMESTAMP if max_timestamp is None else max_timestamp
        lod = 0 if last_offset_delta is None else last_offset_delta
    return assemble_batch(info, attributes, lod, base_ts, max_ts, n, body)


def build_columns_batch(key_data: Any, key_spans: Any, value_data: Any, value_spans: Any, timestamps: Any, *,
                        headers: tuple | None = None, codec: Codec = Codec.NONE, level: int | None = None) -> bytes:
    """:func:`build_batch` of records given as columns, as Arrow lays them out (``kernels.encode_columns``:
    spans into one data buffer per column, -1 for null; timestamps an int64 array; ``headers`` None or the
    kernel's five header arguments), so a columnar writer makes no Python object per record. A plain
    producer batch: CreateTime, no producer."""
    n = len(timestamps)
    if not n:
        return build_batch([], [], codec=codec, level=level)
    first, latest = int(timestamps[0]), int(timestamps.max())
    body = kernels.encode_columns(key_data, key_spans, value_data, value_spans, timestamps, first, *(headers or ()))
    if codec is not Codec.NONE:
        body = compress(codec, body, level)
    return assemble_batch(BatchInfo(), int(codec), n - 1, first, latest, n, body)


def assemble_batch(info: BatchInfo, attributes: int, lod: int, base_ts: int, max_ts: int, count: int, body: bytes) -> bytes:
    """A batch from its header facts and an already encoded (and compressed) records section."""
    buf = bytearray(HEADER_SIZE + len(body))
    HEADER.pack_into(
        buf, 0, info.base_offset, HEADER_SIZE - LOG_OVERHEAD + len(body), info.partition_leader_epoch, MAGIC, 0,
        attributes, lod, base_ts, max_ts, info.producer_id, info.producer_epoch, info.base_sequence, count,
    )
    buf[HEADER_SIZE:] = body
    struct.pack_into(">I", buf, CRC_OFFSET, crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))
    return bytes(buf)


def build_empty_batch(batch: RecordBatch) -> bytes:
    """The 61-byte header Kafka keeps when cleaning removes every record of a batch it must retain."""
    info = BatchInfo(
        batch.base_offset, batch.timestamp_type, batch.producer_id, batch.producer_epoch, batch.base_sequence,
        batch.partition_leader_epoch, batch.is_transactional, batch.is_control,
    )
    attrs = batch.attributes & (TIMESTAMP_TYPE_BIT | TRANSACTIONAL_BIT | CONTROL_BIT)
    return assemble_batch(info, attrs, batch.last_offset_delta, NO_TIMESTAMP, batch.max_timestamp, 0, b"")


def patch_header(
    buf: bytearray,
    position: int,
    *,
    base_offset: int,
    partition_leader_epoch: int | None = None,
    max_timestamp: int | None = None,
    log_append_time: bool = False,
    crc_of: Any = None,
) -> None:
    """Assign offsets (and optionally LogAppendTime) in place, recomputing the CRC only when needed.

    This is Kafka's in-place path: the records bytes stay as the producer wrote them. ``buf`` may hold
    only the 61-byte header, with ``crc_of`` the original batch from the attributes on; the CRC is
    then computed over the patched header fields followed by the untouched records.
    """
    _INT64.pack_into(buf, position + FIELD_OFFSETS["baseOffset"], base_offset)
    if partition_leader_epoch is not None:
        _INT32.pack_into(buf, position + PARTITION_LEADER_EPOCH_OFFSET, partition_leader_epoch)
    attrs, lod, base_ts, old_max = _ATTRS_TO_MAX_TS.unpack_from(buf, position + ATTRIBUTES_OFFSET)
    new_attrs = attrs | TIMESTAMP_TYPE_BIT if log_append_time else attrs
    new_max = old_max if max_timestamp is None else max_timestamp
    if new_attrs != attrs or new_max != old_max:
        _ATTRS_TO_MAX_TS.pack_into(buf, position + ATTRIBUTES_OFFSET, new_attrs, lod, base_ts, new_max)
        if crc_of is None:
            end = position + batch_size_at(buf, position)
            crc = crc32c(memoryview(buf)[position + ATTRIBUTES_OFFSET : end])
        else:
            patched = bytes(memoryview(buf)[position + ATTRIBUTES_OFFSET : position + HEADER_SIZE])
            crc = crc32c(patched + bytes(crc_of[HEADER_SIZE - ATTRIBUTES_OFFSET :]))
        struct.pack_into(">I", buf, position + CRC_OFFSET, crc)


def with_codec(batch: RecordBatch, codec: Codec, level: int | None = None) -> bytes:
    """The same batch with its records section recompressed: records, offsets, timestamps and every
    header fact unchanged. Control and empty batches are returned as they are."""
    if batch.is_control or batch.record_count == 0 or batch.codec is codec:
        return bytes(batch.buffer)
    body = compress(codec, bytes(batch.payload()), level)
    info = BatchInfo(batch.base_offset, batch.timestamp_type, batch.producer_id, batch.producer_epoch,
                     batch.base_sequence, batch.partition_leader_epoch, batch.is_transactional, batch.is_control)
    attrs = (batch.attributes & 0xFF & ~COMPRESSION_MASK) | int(codec)
    return assemble_batch(info, attrs, batch.last_offset_delta, batch.base_timestamp, batch.max_timestamp,
                          batch.record_count, body)
