"""The records of ``__transaction_state``: Kafka's TransactionLogKey and TransactionLogValue, byte for byte.

The transaction coordinator (to come) writes one record per change of a transactional id and replays the
compacted topic at start, as the group coordinator does with ``__consumer_offsets``; Kafka's directories
load here and ours in Kafka because the bytes are the same. Every key and value starts with an int16
version; the rest is Kafka's classic encoding (big-endian integers, int16-length strings, int32-count
arrays, -1 for null) or, in the flexible value v1, compact lengths (unsigned varint of length + 1, 0 for
null) and tagged-field sections::

    TransactionLogKey   v0   TransactionalId string
    TransactionLogValue v0   ProducerId int64, ProducerEpoch int16, TransactionTimeoutMs int32,
                             TransactionStatus int8, TransactionPartitions nullable
                             [Topic string, PartitionIds [int32]], TransactionLastUpdateTimestampMs
                             int64, TransactionStartTimestampMs int64
                        v1   v0 in the compact encoding, a tagged-field section after each partition
                             entry, and the value's tagged fields at its end: 0 PreviousProducerId int64
                             (default -1), 1 NextProducerId int64 (default -1), 2 ClientTransactionVersion
                             int16 (default 0); a tagged field is written only when not its default.

A null value (tombstone) says the transactional id expired; the log cleaner later drops its records.
Bytes that do not parse raise ``CorruptRecordError`` naming the field (Kafka's name) and the byte.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..errors import CorruptRecordError
from .state import TransactionState

KEY_VERSION = 0
VALUE_VERSIONS = (0, 1)

_I8, _I16, _I32, _I64 = struct.Struct(">b"), struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")

# Tagged fields of value v1: tag -> (Kafka's name, struct, default).
_TAGS = {0: ("PreviousProducerId", _I64, -1), 1: ("NextProducerId", _I64, -1),
         2: ("ClientTransactionVersion", _I16, 0)}

Partitions = tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    """One stored state of a transactional id, field for field as Kafka's JSON names them.

    ``partitions`` keeps the order of the bytes (topic, then its partition ids) and is None when the
    record carries null, as Kafka writes for Empty. ``unknown_tags`` are v1 tagged fields of a newer
    Kafka, kept so that the value is written back as it was read."""

    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state: TransactionState
    partitions: Partitions | None
    last_update_timestamp_ms: int
    start_timestamp_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0
    unknown_tags: tuple[tuple[int, bytes], ...] = ()


# writing -------------------------------------------------------------------------------------------
def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _string(s: str, compact: bool) -> bytes:
    b = s.encode("utf-8")
    return (_uvarint(len(b) + 1) if compact else _I16.pack(len(b))) + b


def _count(n: int | None, compact: bool) -> bytes:
    if compact:
        return _uvarint(0 if n is None else n + 1)
    return _I32.pack(-1 if n is None else n)


def encode_key(transactional_id: str) -> bytes:
    """TransactionLogKey v0 of ``transactional_id``."""
    return _I16.pack(KEY_VERSION) + _string(transactional_id, False)


def _tagged(value: TransactionLogValue) -> list[tuple[int, bytes]]:
    known = {0: value.previous_producer_id, 1: value.next_producer_id, 2: value.client_transaction_version}
    fields = [(tag, _TAGS[tag][1].pack(v)) for tag, v in known.items() if v != _TAGS[tag][2]]
    return sorted(fields + list(value.unknown_tags))


def encode_value(value: TransactionLogValue, version: int = 0) -> bytes:
    """TransactionLogValue of ``version`` (0, what Kafka writes until transaction.version 1 is enabled,
    or 1). ValueError when v0 is asked for a value that carries tagged fields (v0 has no room for them)."""
    if version not in VALUE_VERSIONS:
        raise ValueError(f"TransactionLogValue has versions 0 and 1, not {version}")
    compact = version >= 1
    tagged = _tagged(value)
    if tagged and not compact:
        raise ValueError("TransactionLogValue v0 cannot carry tagged fields "
                         f"(tags {', '.join(str(t) for t, _ in tagged)} are set)")
    out = [_I16.pack(version), _I64.pack(value.producer_id), _I16.pack(value.producer_epoch),
           _I32.pack(value.transaction_timeout_ms), _I8.pack(value.state.id),
           _count(None if value.partitions is None else len(value.partitions), compact)]
    for topic, ids in value.partitions or ():
        out += [_string(topic, compact), _count(len(ids), compact), *(_I32.pack(p) for p in ids)]
        if compact:
            out.append(_uvarint(0))  # the partition entry's own (empty) tagged-field section
    out += [_I64.pack(value.last_update_timestamp_ms), _I64.pack(value.start_timestamp_ms)]
    if compact:
        out.append(_uvarint(len(tagged)))
        for tag, data in tagged:
            out += [_uvarint(tag), _uvarint(len(data)), data]
    return b"".join(out)


# reading -------------------------------------------------------------------------------------------
class _Reader:
    """Reads one key or value; every read names the field it is for, so an error can name it."""

    def __init__(self, data: bytes, what: str) -> None:
        self.data = memoryview(data)
        self.pos = 0
        self.what = what
        self.compact = False

    def fail(self, field: str, why: str) -> CorruptRecordError:
        return CorruptRecordError(f"__transaction_state {self.what}: {field} {why} at byte {self.pos}")

    def take(self, field: str, n: int) -> memoryview:
        if self.pos + n > len(self.data):
            raise self.fail(field, f"needs {n} bytes, {len(self.data) - self.pos} left")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def fixed(self, field: str, s: struct.Struct) -> int:
        return s.unpack(self.take(field, s.size))[0]

    def uvarint(self, field: str) -> int:
        value = shift = 0
        while True:
            b = self.take(field, 1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise self.fail(field, "is a varint longer than 5 bytes")

    def count(self, field: str, item_size: int) -> int | None:
        """An array's length (None for null), refused when the bytes left cannot hold that many items."""
        n = self.uvarint(field) - 1 if self.compact else self.fixed(field, _I32)
        if n < -1:
            raise self.fail(field, f"has a negative length {n}")
        if n > (len(self.data) - self.pos) // item_size:
            raise self.fail(field, f"claims {n} entries, more than the {len(self.data) - self.pos} bytes left hold")
        return None if n == -1 else n

    def string(self, field: str) -> str:
        n = self.uvarint(field) - 1 if self.compact else self.fixed(field, _I16)
        if n < 0:
            raise self.fail(field, "is null (it may not be)")
        try:
            return str(self.take(field, n), "utf-8")
        except UnicodeDecodeError:
            raise self.fail(field, "is not UTF-8") from None


def decode_key(data: bytes) -> str | None:
    """The transactional id of a TransactionLogKey; None for a key version Kafka does not define either
    (Kafka skips such records on replay)."""
    r = _Reader(data, "key")
    if r.fixed("version", _I16) != KEY_VERSION:
        return None
    return r.string("TransactionalId")


def decode_value(data: bytes | None) -> TransactionLogValue | None:
    """The TransactionLogValue in ``data`` (v0 or v1); None for a tombstone (the id expired)."""
    if data is None:
        return None
    r = _Reader(data, "value")
    version = r.fixed("version", _I16)
    if version not in VALUE_VERSIONS:
        raise r.fail("version", f"is {version}; TransactionLogValue has versions 0 and 1")
    r.compact = version >= 1
    producer_id = r.fixed("ProducerId", _I64)
    epoch = r.fixed("ProducerEpoch", _I16)
    timeout = r.fixed("TransactionTimeoutMs", _I32)
    status = r.fixed("TransactionStatus", _I8)
    try:
        state = TransactionState.from_id(status)
    except ValueError:
        r.pos -= 1
        raise r.fail("TransactionStatus", f"is {status}, not a state id (0 to 7)") from None
    n = r.count("TransactionPartitions", 3 if r.compact else 6)  # an entry's fewest bytes
    partitions = None if n is None else tuple(_partition_entry(r) for _ in range(n))
    last_update = r.fixed("TransactionLastUpdateTimestampMs", _I64)
    start = r.fixed("TransactionStartTimestampMs", _I64)
    known = {tag: default for tag, (_, _, default) in _TAGS.items()}
    unknown = []
    if r.compact:
        for _ in range(r.uvarint("tagged fields")):
            tag, size = r.uvarint("tag"), r.uvarint("tagged field size")
            if tag in _TAGS:
                name, s, _ = _TAGS[tag]
                if size != s.size:
                    raise r.fail(name, f"has size {size}, not {s.size}")
                known[tag] = r.fixed(name, s)
            else:
                unknown.append((tag, bytes(r.take(f"tagged field {tag}", size))))
    return TransactionLogValue(producer_id, epoch, timeout, state, partitions, last_update, start,
                               known[0], known[1], known[2], tuple(unknown))


def _partition_entry(r: _Reader) -> tuple[str, tuple[int, ...]]:
    topic = r.string("Topic")
    n = r.count("PartitionIds", 4)
    if n is None:
        raise r.fail("PartitionIds", "is null (it may not be)")
    ids = tuple(r.fixed("PartitionIds", _I32) for _ in range(n))
    if r.compact:  # the entry's tagged fields: none are defined, so any are skipped
        for _ in range(r.uvarint("tagged fields")):
            r.uvarint("tag")
            r.take("tagged field", r.uvarint("tagged field size"))
    return topic, ids
