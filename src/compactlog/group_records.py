"""The records of ``__consumer_offsets``: Kafka's key and value schemas, byte for byte.

Every key starts with an int16 *key version* that names the record type, every value with an int16
*value version*; the rest is Kafka's classic encoding (big-endian integers, int16-length strings with -1
for null, int32-length bytes, int32-count arrays), or the compact encoding with tagged fields in the
flexible versions (value v4)::

    OffsetCommitKey   v0/v1   group str, topic str, partition int32
    OffsetCommitValue v0      offset int64, metadata str, commit_timestamp int64
                      v1      offset, metadata, commit_timestamp, expire_timestamp int64
                      v2      offset, metadata, commit_timestamp
                      v3      offset, leader_epoch int32, metadata, commit_timestamp
                      v4      v3 in the flexible encoding
    GroupMetadataKey  v2      group str
    GroupMetadataValue v0-v4  protocol_type str, generation int32, protocol nstr, leader nstr,
                              current_state_timestamp int64 (v2+), members [member_id str,
                              group_instance_id nstr (v3+), client_id str, client_host str,
                              rebalance_timeout int32 (v1+), session_timeout int32,
                              subscription bytes, assignment bytes]

We write what Kafka writes: offset commit key v1 with value v3 (value v1 when the commit asked for an
explicit retention, OffsetCommit v2-v4), group metadata key v2 with value v3. A null value is a
tombstone: the offset or the group was deleted, and the log cleaner later drops every record of the key.
Key versions 3 and up belong to Kafka's newer group protocols; ``decode_key`` returns None for them so
that a replay skips them. So a directory written by Kafka loads here, and ours loads in Kafka.

A group's records all live in one partition: ``abs(String.hashCode(group)) % partitions`` with Java's
hash of the UTF-16 code units and Kafka's abs, which maps Integer.MIN_VALUE to 0 (``compactlog.java_hash``,
which the transaction coordinator shares).

The codecs live at the API layer, below the server, so that the group coordinator (``server/coordinator``,
which imports them as ``records``) and ``dump-log --offsets-decoder`` read the same bytes the same way.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .errors import CorruptRecordError
from .java_hash import coordinator_partition, string_hash_code

OFFSET_COMMIT_KEY_VERSION = 1
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_WITH_EXPIRY = 1
GROUP_METADATA_KEY_VERSION = 2
GROUP_METADATA_VALUE_VERSION = 3

_I16, _I32, _I64 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")


java_string_hash = string_hash_code


def partition_for(group_id: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition holding ``group_id``'s records (Kafka's rule)."""
    return coordinator_partition(group_id, partitions)


# ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    """One committed offset. ``expire_timestamp`` is -1 unless the commit asked for its own retention."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberMetadataValue, ...]


Key = OffsetCommitKey | GroupMetadataKey


# writing -------------------------------------------------------------------------------------------
def _str(s: str | None) -> bytes:
    if s is None:
        return _I16.pack(-1)
    b = s.encode("utf-8")
    return _I16.pack(len(b)) + b


def _bytes(b: bytes | None) -> bytes:
    if b is None:
        return _I32.pack(-1)
    return _I32.pack(len(b)) + bytes(b)


def encode_key(key: Key) -> bytes:
    if isinstance(key, OffsetCommitKey):
        return (_I16.pack(OFFSET_COMMIT_KEY_VERSION) + _str(key.group) + _str(key.topic)
                + _I32.pack(key.partition))
    return _I16.pack(GROUP_METADATA_KEY_VERSION) + _str(key.group)


def encode_offset_commit(value: OffsetCommitValue) -> bytes:
    """Value v3, or v1 when the commit carries its own expiry (v3 has no field for it)."""
    if value.expire_timestamp >= 0:
        return (_I16.pack(OFFSET_COMMIT_VALUE_WITH_EXPIRY) + _I64.pack(value.offset) + _str(value.metadata)
                + _I64.pack(value.commit_timestamp) + _I64.pack(value.expire_timestamp))
    return (_I16.pack(OFFSET_COMMIT_VALUE_VERSION) + _I64.pack(value.offset) + _I32.pack(value.leader_epoch)
            + _str(value.metadata) + _I64.pack(value.commit_timestamp))


def encode_group_metadata(value: GroupMetadataValue) -> bytes:
    """Value v3."""
    out = [_I16.pack(GROUP_METADATA_VALUE_VERSION), _str(value.protocol_type), _I32.pack(value.generation),
           _str(value.protocol), _str(value.leader), _I64.pack(value.current_state_timestamp),
           _I32.pack(len(value.members))]
    for m in value.members:
        out += [_str(m.member_id), _str(m.group_instance_id), _str(m.client_id), _str(m.client_host),
                _I32.pack(m.rebalance_timeout), _I32.pack(m.session_timeout), _bytes(m.subscription),
                _bytes(m.assignment)]
    return b"".join(out)


# reading -------------------------------------------------------------------------------------------
class _Reader:
    """Reads one record's key or value; ``flexible`` switches to compact lengths (value v4)."""

    def __init__(self, data: bytes, what: str, flexible: bool = False) -> None:
        self.data = memoryview(data)
        self.pos = 0
        self.what = what
        self.flexible = flexible

    def _fail(self, why: str) -> CorruptRecordError:
        return CorruptRecordError(f"__consumer_offsets {self.what}: {why} at byte {self.pos}")

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise self._fail(f"needs {n} more bytes")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def i32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def i64(self) -> int:
        return _I64.unpack(self._take(8))[0]

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            b = self._take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise self._fail("varint longer than 5 bytes")

    def _length(self, classic) -> int:
        return self.uvarint() - 1 if self.flexible else classic()

    def nstr(self) -> str | None:
        n = self._length(self.i16)
        if n < 0:
            return None
        try:
            return bytes(self._take(n)).decode("utf-8")
        except UnicodeDecodeError:
            raise self._fail("a string that is not UTF-8") from None

    def str(self) -> str:
        s = self.nstr()
        if s is None:
            raise self._fail("null where a string is required")
        return s

    def bytes(self) -> bytes:
        n = self._length(self.i32)
        return b"" if n < 0 else bytes(self._take(n))

    def count(self) -> int:
        n = self._length(self.i32)
        if n < 0:
            raise self._fail("null array")
        return n

    def tags(self) -> None:
        """Skip a tagged-field section (flexible versions only)."""
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()
                self._take(self.uvarint())


def decode_key(data: bytes) -> Key | None:
    """The key of a ``__consumer_offsets`` record; None for the record types of newer group protocols."""
    r = _Reader(data, "key")
    version = r.i16()
    if version in (0, 1):
        return OffsetCommitKey(r.str(), r.str(), r.i32())
    if version == 2:
        return GroupMetadataKey(r.str())
    return None


def decode_offset_commit(data: bytes) -> OffsetCommitValue:
    r = _Reader(data, "offset commit value")
    version = r.i16()
    if not 0 <= version <= 4:
        raise r._fail(f"unknown offset commit value version {version}")
    r.flexible = version >= 4
    offset = r.i64()
    epoch = r.i32() if version >= 3 else -1
    metadata = r.str()
    commit_ts = r.i64()
    expire_ts = r.i64() if version == 1 else -1
    r.tags()
    return OffsetCommitValue(offset, epoch, metadata, commit_ts, expire_ts)


def decode_group_metadata(data: bytes) -> GroupMetadataValue:
    r = _Reader(data, "group metadata value")
    version = r.i16()
    if not 0 <= version <= 4:
        raise r._fail(f"unknown group metadata value version {version}")
    r.flexible = version >= 4
    protocol_type = r.str()
    generation = r.i32()
    protocol = r.nstr()
    leader = r.nstr()
    state_ts = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.count()):
        member_id = r.str()
        instance = r.nstr() if version >= 3 else None
        client_id, client_host = r.str(), r.str()
        rebalance = r.i32() if version >= 1 else None
        session = r.i32()
        members.append(MemberMetadataValue(member_id, instance, client_id, client_host,
                                           session if rebalance is None else rebalance, session,
                                           r.bytes(), r.bytes()))
        r.tags()
    r.tags()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_ts, tuple(members))


def consumer_subscription_topics(metadata: bytes) -> frozenset[str] | None:
    """The topics of a ConsumerProtocolSubscription (int16 version, then [topic str] in every version);
    None when the bytes are not one, and the caller must assume the member may consume anything."""
    try:
        r = _Reader(metadata, "subscription")
        if r.i16() < 0:
            return None
        return frozenset(r.str() for _ in range(r.count()))
    except CorruptRecordError:
        return None
