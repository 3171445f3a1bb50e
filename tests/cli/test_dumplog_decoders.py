"""``dump-log --offsets-decoder`` and ``--transaction-log-decoder`` print coordinator records as Kafka's
DumpLogSegments does (its OffsetsMessageParser, Kafka 4.0's JSON, and TransactionLogMessageParser), on
segments written through the embedded API with the coordinators' own record codecs."""

from __future__ import annotations

import struct
from pathlib import Path

from click.testing import CliRunner

import compactlog
from compactlog.cli import main
from compactlog.cli.dumplog_parsers import hash_set_order
from compactlog.group_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_group_metadata,
    encode_key,
    encode_offset_commit,
)
from compactlog.transactions import log_records
from compactlog.transactions.log_records import TransactionLogValue
from compactlog.transactions.state import TransactionState


def write(data: Path, records) -> Path:
    with compactlog.open(data) as cl:
        cl.create_topic("c", 1)
        cl.produce_batch("c", records, timestamp=1000)
    return data / "c-0" / f"{0:020d}.log"


def data_lines(log: Path, *flags: str) -> list[str]:
    res = CliRunner().invoke(main, ["dump-log", "--files", str(log), "--skip-record-metadata", *flags])
    assert res.exit_code == 0, res.output
    return res.stdout.splitlines()[3:]


def _topics(items) -> bytes:
    out = struct.pack(">i", len(items))
    for topic, parts in items:
        out += struct.pack(">h", len(topic)) + topic.encode() + struct.pack(">i", len(parts))
        out += b"".join(struct.pack(">i", p) for p in parts)
    return out


def test_offsets_decoder_prints_kafkas_json(tmp_path):
    subscription = struct.pack(">hih", 0, 1, 1) + b"t" + struct.pack(">i", -1)  # v0: topics ["t"], no user data
    assignment = struct.pack(">h", 0) + _topics([("t", [0, 1])]) + struct.pack(">i", -1)
    member = MemberMetadataValue("m1", None, "c", "/127.0.0.1", 300000, 45000, subscription, assignment)
    group = GroupMetadataValue("consumer", 1, "range", "m1", 1000, (member,))
    other = GroupMetadataValue("connect", 2, None, None, 5, (MemberMetadataValue("m", "i", "c", "h", 1, 2, b"\x01\x02",
                                                                                  b""),))
    log = write(tmp_path, [
        (encode_key(OffsetCommitKey("g", "t", 0)), encode_offset_commit(OffsetCommitValue(5, -1, "m", 1000))),
        (encode_key(OffsetCommitKey("g", "t", 1)), encode_offset_commit(OffsetCommitValue(6, 3, "", 1000, 9000))),
        (encode_key(OffsetCommitKey("g", "t", 2)), None),
        (encode_key(GroupMetadataKey("g")), encode_group_metadata(group)),
        (encode_key(GroupMetadataKey("k")), encode_group_metadata(other)),
        (struct.pack(">h", 5) + b"\0\0", b"x"),
        (struct.pack(">h", 1) + b"\0", b"x"),
    ])
    assert data_lines(log, "--offsets-decoder") == [
        '| key: {"type":"1","data":{"group":"g","topic":"t","partition":0}} '
        'payload: {"version":"3","data":{"offset":5,"leaderEpoch":-1,"metadata":"m","commitTimestamp":1000}}',
        '| key: {"type":"1","data":{"group":"g","topic":"t","partition":1}} '  # an explicit expiry: value v1
        'payload: {"version":"1","data":{"offset":6,"metadata":"","commitTimestamp":1000,"expireTimestamp":9000}}',
        '| key: {"type":"1","data":{"group":"g","topic":"t","partition":2}} payload: <DELETE>',
        '| key: {"type":"2","data":{"group":"g"}} payload: {"version":"3","data":{"protocolType":"consumer",'
        '"generation":1,"protocol":"range","leader":"m1","currentStateTimestamp":1000,"members":[{"memberId":"m1",'
        '"groupInstanceId":null,"clientId":"c","clientHost":"/127.0.0.1","rebalanceTimeout":300000,'
        '"sessionTimeout":45000,"subscription":{"topics":["t"],"userData":null},'
        '"assignment":{"assignedPartitions":[{"topic":"t","partitions":[0,1]}],"userData":null}}]}}',
        '| key: {"type":"2","data":{"group":"k"}} payload: {"version":"3","data":{"protocolType":"connect",'
        '"generation":2,"protocol":null,"leader":null,"currentStateTimestamp":5,"members":[{"memberId":"m",'
        '"groupInstanceId":"i","clientId":"c","clientHost":"h","rebalanceTimeout":1,"sessionTimeout":2,'
        '"subscription":"AQI=","assignment":""}]}}',  # bytes of another protocol: base64, as Jackson writes them
        "| key: Unknown record type 5 at offset 5, skipping.",
        "| key: Error at offset 6, skipping. __consumer_offsets key: needs 2 more bytes at byte 2",
    ]


def test_offsets_decoder_stops_at_a_record_without_a_key(tmp_path):
    log = write(tmp_path, [(None, b"v")])
    res = CliRunner().invoke(main, ["dump-log", "--files", str(log), "--offsets-decoder"])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert res.output.splitlines()[-1] == ("Error: Failed to decode message at offset 0 using offset topic decoder "
                                           "(message had a missing key)")


def test_transaction_log_decoder_prints_kafkas_lines(tmp_path):
    ongoing = TransactionLogValue(7, 1, 60000, TransactionState.ONGOING, (("t", (0, 1)), ("u", (3,))), 2000, 1500)
    empty = TransactionLogValue(8, 0, 60000, TransactionState.EMPTY, None, 2100, -1)
    log = write(tmp_path, [
        (log_records.encode_key("tx"), log_records.encode_value(ongoing)),
        (log_records.encode_key("ty"), log_records.encode_value(empty, version=1)),
        (log_records.encode_key("tz"), None),
        (struct.pack(">h", 3) + b"\0\0", b"x"),
    ])
    assert data_lines(log, "--transaction-log-decoder") == [
        # Kafka's mutable.HashSet: t-1 (bucket 4) before t-0 (bucket 5); u-3 hashes to bucket 1
        "| key: transaction_metadata::transactionalId=tx payload: producerId:7,producerEpoch:1,state=Ongoing,"
        "partitions=[u-3,t-1,t-0],txnLastUpdateTimestamp=2000,txnTimeoutMs=60000",
        "| key: transaction_metadata::transactionalId=ty payload: producerId:8,producerEpoch:0,state=Empty,"
        "partitions=[],txnLastUpdateTimestamp=2100,txnTimeoutMs=60000",
        "| key: transaction_metadata::transactionalId=tz payload: <DELETE>",
        "| key: unknown::version=3",
    ]


def test_the_hash_set_order_grows_its_table_as_scala_does():
    # 12 partitions of one topic (an immutable HashSet: sized ahead to 32 buckets, no growth while adding)
    many = hash_set_order([("t", tuple(range(12)))])
    h = {p: 31 * (31 + p) + 116 for p in range(12)}  # "t".hashCode() == 116; no high bits to fold in
    assert many == [("t", p) for p in sorted(range(12), key=lambda p: (h[p] & 31, h[p]))]
    assert hash_set_order([("t", (0, 1))]) == [("t", 1), ("t", 0)]
