"""The records of ``__consumer_offsets``: Kafka's key/value bytes, the versions Kafka may have written, and
the group -> partition rule (checked against values printed by a JVM's ``String.hashCode``)."""

from __future__ import annotations

import pytest

from compactlog.errors import CorruptRecordError
from compactlog.group_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    consumer_subscription_topics,
    decode_group_metadata,
    decode_key,
    decode_offset_commit,
    encode_group_metadata,
    encode_key,
    encode_offset_commit,
    java_string_hash,
    partition_for,
)

TS = 1_700_000_000_000  # 0x0000018bcfe56800


# Bytes written out by hand from Kafka's schemas (OffsetCommitKey v1, OffsetCommitValue v3/v1,
# GroupMetadataKey v2, GroupMetadataValue v3): version int16, int16-length strings, big-endian ints.
OFFSET_KEY = bytes.fromhex("0001" "0002" "6731" "0001" "74" "00000003")  # group "g1", topic "t", partition 3
OFFSET_VALUE_V3 = bytes.fromhex("0003" "000000000000002a" "00000000" "0002" "6d64" "0000018bcfe56800")
OFFSET_VALUE_V1 = bytes.fromhex("0001" "000000000000002a" "0000" "0000018bcfe56800" "0000018bcfe57b88")
GROUP_KEY = bytes.fromhex("0002" "0002" "6731")
GROUP_VALUE_V3 = bytes.fromhex(
    "0003"
    "0008" + b"consumer".hex() +  # protocol type
    "00000005"  # generation
    "0005" + b"range".hex() +  # protocol
    "0001" "6d"  # leader "m"
    "0000018bcfe56800"  # current state timestamp
    "00000001"  # one member
    "0001" "6d"  # member id "m"
    "ffff"  # no group instance id
    "0001" "63"  # client id "c"
    "000a" + b"/127.0.0.1".hex() +
    "0000ea60"  # rebalance timeout 60000
    "00001770"  # session timeout 6000
    "00000002" "0102"  # subscription
    "00000001" "03"  # assignment
)
MEMBER = MemberMetadataValue("m", None, "c", "/127.0.0.1", 60000, 6000, b"\x01\x02", b"\x03")
GROUP = GroupMetadataValue("consumer", 5, "range", "m", TS, (MEMBER,))


def test_offset_commit_key_and_value_are_kafkas_bytes():
    assert encode_key(OffsetCommitKey("g1", "t", 3)) == OFFSET_KEY
    assert decode_key(OFFSET_KEY) == OffsetCommitKey("g1", "t", 3)
    value = OffsetCommitValue(42, 0, "md", TS)
    assert encode_offset_commit(value) == OFFSET_VALUE_V3
    assert decode_offset_commit(OFFSET_VALUE_V3) == value


def test_a_commit_with_its_own_retention_is_written_as_value_v1():
    value = OffsetCommitValue(42, -1, "", TS, TS + 5000)
    assert encode_offset_commit(value) == OFFSET_VALUE_V1
    assert decode_offset_commit(OFFSET_VALUE_V1) == value


def test_group_metadata_key_and_value_are_kafkas_bytes():
    assert encode_key(GroupMetadataKey("g1")) == GROUP_KEY
    assert decode_key(GROUP_KEY) == GroupMetadataKey("g1")
    assert encode_group_metadata(GROUP) == GROUP_VALUE_V3
    assert decode_group_metadata(GROUP_VALUE_V3) == GROUP


def test_older_value_versions_kafka_wrote_still_load():
    v0 = bytes.fromhex("0000" "0000000000000007" "0001" "78" "0000018bcfe56800")
    assert decode_offset_commit(v0) == OffsetCommitValue(7, -1, "x", TS)
    v2 = bytes.fromhex("0002" "0000000000000007" "0000" "0000018bcfe56800")
    assert decode_offset_commit(v2) == OffsetCommitValue(7, -1, "", TS)
    key_v0 = bytes.fromhex("0000" "0001" "67" "0001" "74" "00000000")
    assert decode_key(key_v0) == OffsetCommitKey("g", "t", 0)
    # group value v0: no rebalance timeout (the session timeout stands in), no state timestamp, no instance id
    g0 = bytes.fromhex("0000" "0000" "00000001" "ffff" "ffff" "00000001" "0001" "6d" "0001" "63" "0001" "68"
                       "00001770" "00000000" "ffffffff")
    assert decode_group_metadata(g0) == GroupMetadataValue(
        "", 1, None, None, -1, (MemberMetadataValue("m", None, "c", "h", 6000, 6000, b"", b""),))


def test_flexible_v4_values_load():
    # compact strings and bytes (length + 1 as an unsigned varint), an empty tag section per struct
    offset_v4 = bytes.fromhex("0004" "0000000000000009" "00000002" "03" "6d64" "0000018bcfe56800" "00")
    assert decode_offset_commit(offset_v4) == OffsetCommitValue(9, 2, "md", TS)
    group_v4 = bytes.fromhex("0004" "02" "63" "00000002" "00" "00" "0000018bcfe56800" "02"
                             "02" "6d" "00" "02" "63" "02" "68" "00000010" "00000020" "01" "02" "09" "00" "00")
    assert decode_group_metadata(group_v4) == GroupMetadataValue(
        "c", 2, None, None, TS, (MemberMetadataValue("m", None, "c", "h", 16, 32, b"", b"\x09"),))


def test_record_types_of_newer_group_protocols_are_skipped_not_misread():
    assert decode_key(bytes.fromhex("0003" "0001" "67")) is None


@pytest.mark.parametrize("data", [OFFSET_VALUE_V3[:-1], bytes.fromhex("0009") + OFFSET_VALUE_V3[2:], b"\x00"])
def test_a_truncated_or_unknown_value_is_a_corrupt_record(data):
    with pytest.raises(CorruptRecordError):
        decode_offset_commit(data)


@pytest.mark.parametrize("group, java_hash, partition_of_50", [
    ("", 0, 0),
    ("g1", 3242, 42),
    ("my-group", -1906497762, 12),
    ("console-consumer-12345", 158455506, 6),
    ("gr\u00fcppe-\u03b1\u03b2", -1041690822, 22),
    ("emoji-\U0001F600", 1164511306, 6),  # a surrogate pair: two UTF-16 code units
    ("polygenelubricants", -(2**31), 0),  # Integer.MIN_VALUE: Kafka's abs makes it 0
])
def test_group_partition_is_abs_java_hash_mod_partitions(group, java_hash, partition_of_50):
    assert java_string_hash(group) == java_hash
    assert partition_for(group, 50) == partition_of_50


def test_subscription_topics_are_read_from_any_consumer_protocol_version():
    v1 = bytes.fromhex("0001" "00000002" "0001" "61" "0002" "6262" "ffffffff" "00000000")
    assert consumer_subscription_topics(v1) == {"a", "bb"}
    assert consumer_subscription_topics(b"\x00") is None
