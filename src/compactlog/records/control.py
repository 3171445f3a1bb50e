"""Control records: the end-transaction marker, byte for byte as Kafka writes and reads it.

A transaction ends in each of its partitions with a control batch: attributes with the transactional
(0x10) and control (0x20) bits, uncompressed, the transaction's producer id and epoch, base sequence -1,
and one record whose timestamp is the batch's (base and max timestamp alike), with no headers::

    key    (4 bytes)   version int16 = 0 | type int16            ControlRecordType
    value  (6 bytes)   version int16 = 0 | coordinatorEpoch int32  EndTxnMarker

Types 0 (ABORT) and 1 (COMMIT) end a transaction; 2 to 6 are KRaft's own control records, which a
partition log never holds. A type this module does not know is kept by its number and named UNKNOWN,
as Kafka's ``ControlRecordType.fromTypeId`` keeps it, so that readers skip it instead of failing; only
ABORT and COMMIT carry a marker value. Newer key or value versions are read as version 0, as Kafka
reads them (fields are only ever added after the ones above); negative versions and short keys or
values are corruption.

Who uses it: the partitions of a transaction (their markers on commit and abort), producer state and
the ``.txnindex`` (recovery reads markers back), read_committed reading, the log cleaner's
transaction rules, and ``dump-log``, which prints markers as Kafka's DumpLogSegments does.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from ..errors import CorruptRecordError
from .batch import CREATE_TIME, BatchInfo, RecordBatch, build_batch

ABORT = 0
COMMIT = 1
UNKNOWN = -1  # Kafka's name for a type id it does not know; the id read is kept beside it
CONTROL_TYPE_NAMES: dict[int, str] = {
    ABORT: "ABORT",
    COMMIT: "COMMIT",
    2: "LEADER_CHANGE",
    3: "SNAPSHOT_HEADER",
    4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION",
    6: "KRAFT_VOTERS",
}

CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0
_KEY = struct.Struct(">hh")  # version, type
_MARKER_VALUE = struct.Struct(">hi")  # version, coordinatorEpoch
CONTROL_KEY_SIZE = _KEY.size  # 4
END_TXN_MARKER_VALUE_SIZE = _MARKER_VALUE.size  # 6
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1


def control_type_name(type_id: int) -> str:
    """Kafka's name for a control type id: ABORT, COMMIT, ... or UNKNOWN for one it does not know."""
    return CONTROL_TYPE_NAMES.get(type_id, "UNKNOWN")


class ControlRecord(NamedTuple):
    """The record of a control batch, read: its type id (as stored, unknown ones included) and, for an
    end-transaction marker, the coordinator epoch (None for any other type)."""

    type_id: int
    coordinator_epoch: int | None

    @property
    def type_name(self) -> str:
        return control_type_name(self.type_id)

    @property
    def is_end_txn_marker(self) -> bool:
        return self.type_id in (ABORT, COMMIT)

    @property
    def is_commit(self) -> bool:
        return self.type_id == COMMIT

    @property
    def is_abort(self) -> bool:
        return self.type_id == ABORT


def control_key(type_id: int) -> bytes:
    """The 4-byte key of a control record of ``type_id``."""
    return _KEY.pack(CONTROL_KEY_VERSION, type_id)


def end_txn_marker_value(coordinator_epoch: int) -> bytes:
    """The 6-byte value of an end-transaction marker."""
    return _MARKER_VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch)


def _check_range(name: str, value: int, bits: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{name} must be an int, got {type(value).__name__}")
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if not low <= value <= high:
        raise ValueError(f"{name} {value} is outside the int{bits} range [{low}, {high}]")


def build_end_txn_marker(
    type_id: int,
    coordinator_epoch: int,
    *,
    producer_id: int,
    producer_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """The control batch that ends a transaction of ``producer_id`` in one partition.

    The same bytes as Kafka's ``MemoryRecords.withEndTransactionMarker(base_offset, timestamp,
    partition_leader_epoch, producer_id, producer_epoch, marker)``: one uncompressed record at offset
    delta 0 and timestamp delta 0, CreateTime, base sequence -1. ``type_id`` is :data:`ABORT` or
    :data:`COMMIT`; anything else, or a producer id below 0, is a ``ValueError``, as Kafka refuses them.
    """
    if type_id not in (ABORT, COMMIT):
        raise ValueError(f"an end-transaction marker is ABORT ({ABORT}) or COMMIT ({COMMIT}), not control type {type_id}")
    _check_range("producer id", producer_id, 64)
    if producer_id < 0:
        raise ValueError(f"an end-transaction marker needs a producer id, got {producer_id}")
    _check_range("producer epoch", producer_epoch, 16)
    _check_range("coordinator epoch", coordinator_epoch, 32)
    _check_range("partition leader epoch", partition_leader_epoch, 32)
    _check_range("timestamp", timestamp, 64)
    _check_range("base offset", base_offset, 64)
    info = BatchInfo(base_offset=base_offset, timestamp_type=CREATE_TIME, producer_id=producer_id,
                     producer_epoch=producer_epoch, base_sequence=NO_SEQUENCE,
                     partition_leader_epoch=partition_leader_epoch, is_transactional=True, is_control=True)
    return build_batch([control_key(type_id)], [end_txn_marker_value(coordinator_epoch)], [timestamp], info=info)


def parse_control_type(key: bytes | memoryview | None) -> int:
    """The type id in a control record's key (Kafka's ``ControlRecordType.parseTypeId``); an unknown id
    is returned as it is. ``CorruptRecordError`` for a missing or short key or a negative version."""
    if key is None:
        raise CorruptRecordError("control record has no key (a control record's key holds its version and type)")
    if len(key) < CONTROL_KEY_SIZE:
        raise CorruptRecordError(
            f"control record key too short: {len(key)} of the {CONTROL_KEY_SIZE} bytes it must have at least "
            "(version int16, type int16)"
        )
    version, type_id = _KEY.unpack_from(key, 0)
    if version < 0:
        raise CorruptRecordError(f"control record key has the invalid version {version} (may indicate data corruption)")
    return type_id


def parse_end_txn_marker_value(value: bytes | memoryview | None) -> int:
    """The coordinator epoch in an end-transaction marker's value (Kafka's
    ``EndTransactionMarker.deserializeValue``). ``CorruptRecordError`` for a missing or short value or
    a negative version; a newer version is read as version 0."""
    if value is None:
        raise CorruptRecordError("end transaction marker has no value (it must hold a version and the coordinator epoch)")
    if len(value) < END_TXN_MARKER_VALUE_SIZE:
        raise CorruptRecordError(
            f"end transaction marker value too short: {len(value)} of the {END_TXN_MARKER_VALUE_SIZE} bytes it must have "
            "at least (version int16, coordinator epoch int32)"
        )
    version, epoch = _MARKER_VALUE.unpack_from(value, 0)
    if version < 0:
        raise CorruptRecordError(f"end transaction marker has the invalid version {version} (may indicate data corruption)")
    return epoch


def parse_control_record(key: bytes | memoryview | None, value: bytes | memoryview | None) -> ControlRecord:
    """One control record from its key and value: its type, and the coordinator epoch of a marker."""
    type_id = parse_control_type(key)
    epoch = parse_end_txn_marker_value(value) if type_id in (ABORT, COMMIT) else None
    return ControlRecord(type_id, epoch)


def read_control_record(batch: RecordBatch) -> ControlRecord | None:
    """What a control batch holds, read from its first record as Kafka reads it; None when the batch
    holds no record (cleaning keeps a producer's last batch empty once its transaction is gone).

    ``CorruptRecordError`` naming the batch for a batch that is not a control batch, records that cannot
    be decoded, or a malformed key or marker value.
    """
    if not batch.is_control:
        raise CorruptRecordError(f"{batch.where} is not a control batch (attributes {batch.attributes:#06x})")
    if batch.record_count == 0:
        return None
    first = batch.records()[0]
    try:
        return parse_control_record(first.key, first.value)
    except CorruptRecordError as exc:
        raise CorruptRecordError(f"{batch.where}: {exc}") from None
