"""End-transaction markers, byte for byte as Kafka builds them.

The expected bytes are written out field by field from Kafka's layout (DefaultRecordBatch's header,
DefaultRecord's varints, ControlRecordType's key and EndTransactionMarker's value, as
``MemoryRecords.withEndTransactionMarker`` fills them); the CRC-32C is computed here bit by bit, not
by the module under test.
"""

from __future__ import annotations

import struct

import pytest

from compactlog.errors import CorruptRecordError
from compactlog.records.batch import BatchInfo, RecordBatch, build_batch, build_empty_batch
from compactlog.records.control import (
    ABORT,
    COMMIT,
    ControlRecord,
    build_end_txn_marker,
    parse_control_record,
    read_control_record,
)


def crc32c_bitwise(data: bytes) -> int:
    """CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), one bit at a time."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def kafka_marker(kind: int, coordinator_epoch: int, producer_id: int, producer_epoch: int, timestamp: int,
                 base_offset: int = 0, partition_leader_epoch: int = -1) -> bytes:
    """A marker batch laid out by hand, as Kafka's MemoryRecordsBuilder writes one."""
    record = bytes([
        0x20,        # record length varint: 16 bytes follow (zigzag 32)
        0x00,        # record attributes int8: 0
        0x00,        # timestampDelta varint: 0 (the record's timestamp is the batch's)
        0x00,        # offsetDelta varint: 0
        0x08,        # keyLength varint: 4 (zigzag 8)
    ]) + struct.pack(">hh", 0, kind) + bytes([  # ControlRecordType key: version 0, type
        0x0C,        # valueLength varint: 6 (zigzag 12)
    ]) + struct.pack(">hi", 0, coordinator_epoch) + bytes([  # EndTxnMarker value: version 0, coordinatorEpoch
        0x00,        # headers count varint: 0
    ])
    assert len(record) == 17  # Kafka's EndTransactionMarker.CURRENT_END_TXN_SCHEMA_RECORD_SIZE
    after_crc = struct.pack(
        ">hiqqqhii",
        0x30,             # attributes: transactional (0x10) | control (0x20), no codec, CreateTime
        0,                # lastOffsetDelta
        timestamp,        # baseTimestamp
        timestamp,        # maxTimestamp
        producer_id,      # producerId
        producer_epoch,   # producerEpoch
        -1,               # baseSequence: RecordBatch.NO_SEQUENCE
        1,                # recordsCount
    ) + record
    crc = crc32c_bitwise(after_crc)
    return struct.pack(
        ">qiibI",
        base_offset,                  # baseOffset
        len(after_crc) + 4 + 1 + 4,   # batchLength: partitionLeaderEpoch + magic + crc + the rest
        partition_leader_epoch,       # partitionLeaderEpoch
        2,                            # magic
        crc,                          # crc over attributes..end
    ) + after_crc


@pytest.mark.parametrize("kind,epoch,pid,pepoch,ts,base,ple", [
    (COMMIT, 0, 1000, 0, 1_700_000_000_000, 0, -1),
    (ABORT, 5, 42, 3, 1234, 0, -1),
    (COMMIT, 2**31 - 1, 2**63 - 1, 2**15 - 1, -1, 77, 9),
    (ABORT, -1, 0, -1, 0, 2**40, 0),
])
def test_marker_bytes_are_kafkas(kind, epoch, pid, pepoch, ts, base, ple):
    built = build_end_txn_marker(kind, epoch, producer_id=pid, producer_epoch=pepoch, timestamp=ts,
                                 base_offset=base, partition_leader_epoch=ple)
    assert built == kafka_marker(kind, epoch, pid, pepoch, ts, base, ple)
    assert len(built) == 78
    batch = RecordBatch(built)
    batch.ensure_valid()
    assert batch.is_control and batch.is_transactional and batch.base_sequence == -1
    assert (batch.producer_id, batch.producer_epoch, batch.max_timestamp) == (pid, pepoch, ts)
    assert read_control_record(batch) == ControlRecord(kind, epoch)


def test_the_record_reads_back_as_type_and_epoch():
    got = read_control_record(RecordBatch(kafka_marker(COMMIT, 7, 1, 0, 10)))
    assert got.type_name == "COMMIT" and got.is_commit and not got.is_abort and got.coordinator_epoch == 7
    got = read_control_record(RecordBatch(kafka_marker(ABORT, 3, 1, 0, 10)))
    assert got.type_name == "ABORT" and got.is_abort and got.is_end_txn_marker


def control_batch(key: bytes | None, value: bytes | None) -> RecordBatch:
    info = BatchInfo(producer_id=1, producer_epoch=0, is_transactional=True, is_control=True)
    return RecordBatch(build_batch([key], [value], [5], info=info))


def test_an_unknown_control_type_is_kept_by_its_number():
    """Kafka's fromTypeId answers UNKNOWN, and its readers skip such a record instead of failing."""
    got = read_control_record(control_batch(struct.pack(">hh", 0, 99), b""))
    assert got == ControlRecord(99, None) and got.type_name == "UNKNOWN" and not got.is_end_txn_marker
    assert parse_control_record(struct.pack(">hh", 0, 2), None).type_name == "LEADER_CHANGE"


def test_newer_versions_are_read_as_version_zero():
    key, value = struct.pack(">hhi", 3, COMMIT, 0), struct.pack(">hib", 1, 12, 0)
    assert read_control_record(control_batch(key, value)) == ControlRecord(COMMIT, 12)


@pytest.mark.parametrize("key,value,why", [
    (None, b"\0\0\0\0\0\0", "control record has no key"),
    (b"\0\0\0", b"\0\0\0\0\0\0", "control record key too short: 3 of the 4 bytes it must have at least"),
    (struct.pack(">hh", -1, COMMIT), b"\0\0\0\0\0\0", "control record key has the invalid version -1"),
    (struct.pack(">hh", 0, COMMIT), None, "end transaction marker has no value"),
    (struct.pack(">hh", 0, ABORT), b"\0\0\0\0\0", "end transaction marker value too short: 5 of the 6 bytes it must have at least"),
    (struct.pack(">hh", 0, COMMIT), struct.pack(">hi", -2, 0), "end transaction marker has the invalid version -2"),
])
def test_a_malformed_control_record_is_refused_naming_what_is_wrong(key, value, why):
    with pytest.raises(CorruptRecordError) as err:
        read_control_record(control_batch(key, value))
    assert str(err.value).startswith(f"batch at offset 0: {why}")


def test_a_batch_that_is_not_control_is_refused_and_an_empty_one_holds_nothing():
    with pytest.raises(CorruptRecordError, match="batch at offset 0 is not a control batch"):
        read_control_record(RecordBatch(build_batch([b"k"], [b"v"], [1])))
    emptied = RecordBatch(build_empty_batch(RecordBatch(kafka_marker(COMMIT, 0, 1, 0, 10))))
    assert emptied.is_control and emptied.record_count == 0
    assert read_control_record(emptied) is None


@pytest.mark.parametrize("kwargs,why", [
    (dict(type_id=2), "an end-transaction marker is ABORT (0) or COMMIT (1), not control type 2"),
    (dict(producer_id=-1), "an end-transaction marker needs a producer id, got -1"),
    (dict(producer_epoch=2**15), "producer epoch 32768 is outside the int16 range"),
    (dict(coordinator_epoch=2**31), "coordinator epoch 2147483648 is outside the int32 range"),
])
def test_the_builder_refuses_what_kafka_refuses(kwargs, why):
    args = dict(type_id=COMMIT, coordinator_epoch=0, producer_id=1, producer_epoch=0, timestamp=0) | kwargs
    with pytest.raises(ValueError) as err:
        build_end_txn_marker(args.pop("type_id"), args.pop("coordinator_epoch"), **args)
    assert str(err.value).startswith(why)


def test_a_compressed_control_batch_reads_as_kafka_reads_it():
    """Kafka writes markers uncompressed, but keeps a control batch compressed if it came so."""
    from compactlog.records.codecs import Codec

    info = BatchInfo(producer_id=9, producer_epoch=1, is_transactional=True, is_control=True)
    key, value = struct.pack(">hh", 0, ABORT), struct.pack(">hi", 0, 4)
    batch = RecordBatch(build_batch([key], [value], [3], codec=Codec.GZIP, info=info))
    assert batch.codec is Codec.GZIP
    assert read_control_record(batch) == ControlRecord(ABORT, 4)
