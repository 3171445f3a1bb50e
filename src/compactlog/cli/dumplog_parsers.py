"""How ``dump-log --offsets-decoder`` and ``--transaction-log-decoder`` print a record's key and value.

Each parser takes a record and gives (key text, payload text), None for a part Kafka leaves out, as the
parsers of Kafka's DumpLogSegments do:

* ``__consumer_offsets`` (Kafka 4.0's ``OffsetsMessageParser``): the key as JSON
  ``{"type":"<key version>","data":{...}}`` and the value as ``{"version":"<value version>","data":{...}}``,
  the fields those of the record's version, named as in Kafka's schemas; a consumer group's member
  subscriptions and assignments are decoded (ConsumerProtocolSubscription / Assignment), other bytes are
  base64, as Jackson writes them. A tombstone is ``<DELETE>``; a record of a type the codec does not read
  (the newer group protocols) ``Unknown record type N at offset O, skipping.``, and bytes that do not
  parse ``Error at offset O, skipping. <why>``, both as the key with no payload.
* ``__transaction_state`` (``TransactionLog.formatRecordKeyAndValue``):
  ``transaction_metadata::transactionalId=<id>`` and ``producerId:P,producerEpoch:E,state=S,
  partitions=[t-0,...],txnLastUpdateTimestamp=T,txnTimeoutMs=M``, the partitions in the order Kafka's
  ``mutable.HashSet`` of TopicPartition iterates them (Scala 2.13: by bucket, then hash); an unknown key
  version ``unknown::version=N`` with no payload; a tombstone ``<DELETE>``.

The record codecs are the coordinators' own (``compactlog.group_records``, ``compactlog.transactions``).
"""

from __future__ import annotations

import base64
import json
import struct

from ..dump_log import RecordParseError
from ..errors import CompactLogError, CorruptRecordError
from ..group_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    decode_group_metadata,
    decode_key,
    decode_offset_commit,
)
from ..java_hash import string_hash_code
from ..transactions.log_records import decode_key as decode_txn_key
from ..transactions.log_records import decode_value as decode_txn_value
from ..transactions.state import TransactionState

_I16, _I32 = struct.Struct(">h"), struct.Struct(">i")


def _json(obj) -> str:
    """Jackson's compact text: no spaces, non-ASCII characters as they are."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _version(data: bytes) -> int:
    if len(data) < 2:
        raise CorruptRecordError("a record key or value shorter than its int16 version")
    return _I16.unpack_from(data)[0]


# __consumer_offsets --------------------------------------------------------------------------------
class _Protocol:
    """A reader of the consumer protocol's classic encoding (ConsumerProtocolSubscription/Assignment)."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise CorruptRecordError("short")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def i32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def nstr(self) -> str | None:
        n = self.i16()
        return None if n < 0 else self._take(n).decode("utf-8")

    def nbytes(self) -> bytes | None:
        n = self.i32()
        return None if n < 0 else self._take(n)

    def array(self, read) -> list:
        n = self.i32()
        if n < 0 or n > len(self.data):
            raise CorruptRecordError("bad array")
        return [read() for _ in range(n)]

    def topic_partitions(self) -> dict:
        return {"topic": self.nstr(), "partitions": self.array(self.i32)}


def _subscription(data: bytes):
    r = _Protocol(data)
    version = r.i16()
    if version < 0:
        raise CorruptRecordError("bad version")
    out = {"topics": r.array(r.nstr), "userData": _b64(r.nbytes())}
    if version >= 1:
        out["ownedPartitions"] = r.array(r.topic_partitions)
    if version >= 2:
        out["generationId"] = r.i32()
    if version >= 3:
        out["rackId"] = r.nstr()
    return out


def _assignment(data: bytes):
    r = _Protocol(data)
    if r.i16() < 0:
        raise CorruptRecordError("bad version")
    return {"assignedPartitions": r.array(r.topic_partitions), "userData": _b64(r.nbytes())}


def _decoded_or_base64(data: bytes, decode):
    """Kafka swallows a failure to read the embedded protocol and keeps the original bytes."""
    try:
        return decode(data)
    except (CorruptRecordError, UnicodeDecodeError, struct.error):
        return _b64(data)


def _group_metadata_json(value: GroupMetadataValue, version: int) -> dict:
    data = {"protocolType": value.protocol_type, "generation": value.generation, "protocol": value.protocol,
            "leader": value.leader}
    if version >= 2:
        data["currentStateTimestamp"] = value.current_state_timestamp
    consumer = value.protocol_type == "consumer"
    members = []
    for m in value.members:
        member = {"memberId": m.member_id}
        if version >= 3:
            member["groupInstanceId"] = m.group_instance_id
        member.update(clientId=m.client_id, clientHost=m.client_host)
        if version >= 1:
            member["rebalanceTimeout"] = m.rebalance_timeout
        member["sessionTimeout"] = m.session_timeout
        member["subscription"] = _decoded_or_base64(m.subscription, _subscription) if consumer else _b64(m.subscription)
        member["assignment"] = _decoded_or_base64(m.assignment, _assignment) if consumer else _b64(m.assignment)
        members.append(member)
    data["members"] = members
    return data


def offsets_parser(rec) -> tuple[str | None, str | None]:
    """A ``__consumer_offsets`` record as Kafka's OffsetsMessageParser prints it."""
    if rec.key is None:
        raise RecordParseError(f"Failed to decode message at offset {rec.offset} using offset topic decoder "
                               "(message had a missing key)")
    try:
        key_version = _version(rec.key)
        key = decode_key(rec.key)
        if key is None:
            return f"Unknown record type {key_version} at offset {rec.offset}, skipping.", None
        if isinstance(key, OffsetCommitKey):
            key_data = {"group": key.group, "topic": key.topic, "partition": key.partition}
        else:
            assert isinstance(key, GroupMetadataKey)
            key_data = {"group": key.group}
        key_text = _json({"type": str(key_version), "data": key_data})
        if rec.value is None:
            return key_text, "<DELETE>"
        version = _version(rec.value)
        if isinstance(key, OffsetCommitKey):
            v = decode_offset_commit(rec.value)
            data = {"offset": v.offset}
            if version >= 3:
                data["leaderEpoch"] = v.leader_epoch
            data.update(metadata=v.metadata, commitTimestamp=v.commit_timestamp)
            if version == 1:
                data["expireTimestamp"] = v.expire_timestamp
        else:
            data = _group_metadata_json(decode_group_metadata(rec.value), version)
        return key_text, _json({"version": str(version), "data": data})
    except CompactLogError as exc:
        return f"Error at offset {rec.offset}, skipping. {exc}", None


# __transaction_state -------------------------------------------------------------------------------
def _topic_partition_hash(topic: str, partition: int) -> int:
    """Java's ``TopicPartition.hashCode`` in signed 32 bits, then Scala 2.13's ``improveHash``."""
    h = (31 * (31 + partition) + string_hash_code(topic)) & 0xFFFFFFFF
    h ^= h >> 16
    return h - (1 << 32) if h & 0x80000000 else h


def _table_size_for(capacity: int) -> int:
    return min(1 << (max(capacity - 1, 4).bit_length()), 1 << 30)


def hash_set_order(groups: list[tuple[str, tuple[int, ...]]]) -> list[tuple[str, int]]:
    """The TopicPartitions of ``groups`` (one set added per topic, as Kafka's reader adds them) in the
    order a Scala 2.13 ``mutable.HashSet`` iterates them: by bucket (hash & (table size - 1)), then by
    hash within a bucket; the table starts at 16 and doubles as the set grows past 3/4 of it."""
    size, count, seen = 16, 0, {}
    for topic, ids in groups:
        unique = list(dict.fromkeys(ids))
        target = _table_size_for(int((len(unique) + 1) / 0.75))  # sizeHint of the set added
        size = max(size, target)
        for p in unique:
            if (topic, p) in seen:
                continue
            if len(unique) <= 4 and count + 1 >= int(size * 0.75):  # small sets are added one by one
                size *= 2
            seen[(topic, p)] = _topic_partition_hash(topic, p)
            count += 1
    return sorted(seen, key=lambda tp: (seen[tp] & (size - 1), seen[tp]))


def transaction_log_parser(rec) -> tuple[str | None, str | None]:
    """A ``__transaction_state`` record as Kafka's TransactionLogMessageParser prints it."""
    if rec.key is None:
        raise RecordParseError(f"Failed to decode message at offset {rec.offset} using transaction log decoder "
                               "(message had a missing key)")
    try:
        key_version = _version(rec.key)
        transactional_id = decode_txn_key(rec.key)
        if transactional_id is None:
            return f"unknown::version={key_version}", None
        key_text = f"transaction_metadata::transactionalId={transactional_id}"
        value = decode_txn_value(rec.value)
    except CompactLogError as exc:  # Kafka's tool stops here with its exception
        raise RecordParseError(f"Failed to decode message at offset {rec.offset} using transaction log decoder: "
                               f"{exc}") from None
    if value is None:
        return key_text, "<DELETE>"
    groups = [] if value.state is TransactionState.EMPTY or value.partitions is None else list(value.partitions)
    partitions = ",".join(f"{t}-{p}" for t, p in hash_set_order(groups))
    return key_text, (f"producerId:{value.producer_id},producerEpoch:{value.producer_epoch},state={value.state.value},"
                      f"partitions=[{partitions}],txnLastUpdateTimestamp={value.last_update_timestamp_ms},"
                      f"txnTimeoutMs={value.transaction_timeout_ms}")
