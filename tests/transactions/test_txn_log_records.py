"""``__transaction_state`` keys and values byte for byte, against fixtures written by hand from Kafka's
TransactionLogKey.json and TransactionLogValue.json, and round trips of any value."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactlog.errors import CorruptRecordError
from compactlog.transactions.log_records import TransactionLogValue, decode_key, decode_value, encode_key, encode_value
from compactlog.transactions.metadata import TransactionMetadata, from_log_value, log_record, to_log_value
from compactlog.transactions.state import DEAD, EMPTY, ONGOING, TransactionState


def hexbytes(text: str) -> bytes:
    """Bytes from hex pairs, ignoring whitespace and ``#`` comments to the end of each line."""
    return bytes.fromhex("".join(line.split("#")[0] for line in text.splitlines()))


KEY = hexbytes("""
    00 00                          # version 0
    00 09 62 69 6c 6c 69 6e 67 2d 31   # TransactionalId: int16 length 9, "billing-1"
""")

ONGOING_VALUE = TransactionLogValue(
    producer_id=1000, producer_epoch=3, transaction_timeout_ms=60000, state=ONGOING,
    partitions=(("balances", (0, 2)),), last_update_timestamp_ms=1700000000123,
    start_timestamp_ms=1700000000000)

ONGOING_V0 = hexbytes("""
    00 00                          # version 0
    00 00 00 00 00 00 03 e8        # ProducerId 1000
    00 03                          # ProducerEpoch 3
    00 00 ea 60                    # TransactionTimeoutMs 60000
    01                             # TransactionStatus 1 (Ongoing)
    00 00 00 01                    # TransactionPartitions: int32 count 1
    00 08 62 61 6c 61 6e 63 65 73  #   Topic: int16 length 8, "balances"
    00 00 00 02                    #   PartitionIds: int32 count 2
    00 00 00 00 00 00 00 02        #     0, 2
    00 00 01 8b cf e5 68 7b        # TransactionLastUpdateTimestampMs 1700000000123
    00 00 01 8b cf e5 68 00        # TransactionStartTimestampMs 1700000000000
""")

ONGOING_V1 = hexbytes("""
    00 01                          # version 1 (flexible)
    00 00 00 00 00 00 03 e8        # ProducerId 1000
    00 03                          # ProducerEpoch 3
    00 00 ea 60                    # TransactionTimeoutMs 60000
    01                             # TransactionStatus 1 (Ongoing)
    02                             # TransactionPartitions: compact count, 1 + 1
    09 62 61 6c 61 6e 63 65 73     #   Topic: compact length 8 + 1, "balances"
    03                             #   PartitionIds: compact count 2 + 1
    00 00 00 00 00 00 00 02        #     0, 2
    00                             #   the entry's tagged fields: none
    00 00 01 8b cf e5 68 7b        # TransactionLastUpdateTimestampMs
    00 00 01 8b cf e5 68 00        # TransactionStartTimestampMs
    00                             # tagged fields: none (all at their defaults)
""")

EMPTY_VALUE = TransactionLogValue(
    producer_id=1000, producer_epoch=4, transaction_timeout_ms=60000, state=EMPTY, partitions=None,
    last_update_timestamp_ms=1700000000123, start_timestamp_ms=-1)

EMPTY_V0 = hexbytes("""
    00 00                          # version 0
    00 00 00 00 00 00 03 e8        # ProducerId 1000
    00 04                          # ProducerEpoch 4
    00 00 ea 60                    # TransactionTimeoutMs 60000
    00                             # TransactionStatus 0 (Empty)
    ff ff ff ff                    # TransactionPartitions: null (int32 -1), as Kafka writes for Empty
    00 00 01 8b cf e5 68 7b        # TransactionLastUpdateTimestampMs
    ff ff ff ff ff ff ff ff        # TransactionStartTimestampMs -1
""")

TAGGED_VALUE = TransactionLogValue(
    producer_id=1000, producer_epoch=4, transaction_timeout_ms=60000, state=EMPTY, partitions=None,
    last_update_timestamp_ms=1700000000123, start_timestamp_ms=-1, previous_producer_id=999,
    client_transaction_version=2)

TAGGED_V1 = hexbytes("""
    00 01                          # version 1
    00 00 00 00 00 00 03 e8        # ProducerId 1000
    00 04                          # ProducerEpoch 4
    00 00 ea 60                    # TransactionTimeoutMs 60000
    00                             # TransactionStatus 0 (Empty)
    00                             # TransactionPartitions: null (compact 0)
    00 00 01 8b cf e5 68 7b        # TransactionLastUpdateTimestampMs
    ff ff ff ff ff ff ff ff        # TransactionStartTimestampMs -1
    02                             # tagged fields: 2
    00 08 00 00 00 00 00 00 03 e7  #   tag 0 PreviousProducerId, size 8: 999
    02 02 00 02                    #   tag 2 ClientTransactionVersion, size 2: 2 (NextProducerId -1 is left out)
""")


def test_key_bytes():
    assert encode_key("billing-1") == KEY
    assert decode_key(KEY) == "billing-1"


def test_a_key_of_an_unknown_version_is_skipped():
    assert decode_key(b"\x00\x01" + KEY[2:]) is None


@pytest.mark.parametrize("value,version,data", [
    (ONGOING_VALUE, 0, ONGOING_V0),
    (ONGOING_VALUE, 1, ONGOING_V1),
    (EMPTY_VALUE, 0, EMPTY_V0),
    (TAGGED_VALUE, 1, TAGGED_V1),
], ids=["ongoing-v0", "ongoing-v1", "empty-v0", "tagged-v1"])
def test_value_bytes(value, version, data):
    assert encode_value(value, version) == data
    assert decode_value(data) == value


def test_unknown_tags_are_kept():
    data = TAGGED_V1[:-15] + hexbytes("03 00 08 00 00 00 00 00 00 03 e7 02 02 00 02 07 01 aa")
    value = decode_value(data)
    assert value.unknown_tags == ((7, b"\xaa"),)
    assert encode_value(value, 1) == data


FUTURE_V1 = hexbytes("""
    00 01                          # version 1, as a newer Kafka writes it (Kafka's testDeserializeFutureTransactionLogValue)
    00 00 00 00 00 00 03 e8        # ProducerId 1000
    00 64                          # ProducerEpoch 100
    00 00 03 e8                    # TransactionTimeoutMs 1000
    04                             # TransactionStatus 4 (CompleteCommit)
    02                             # TransactionPartitions: compact count 1 + 1
    06 74 6f 70 69 63              #   Topic "topic"
    02 00 00 00 01                 #   PartitionIds [1]
    02                             #   the entry's tagged fields: 2, unknown here
    64 05 00 03 66 6f 6f           #     tag 100, size 5: the string "foo"
    65 04 00 00 0f a0              #     tag 101, size 4: the int32 4000
    00 00 00 00 00 00 07 d0        # TransactionLastUpdateTimestampMs 2000
    00 00 00 00 00 00 0b b8        # TransactionStartTimestampMs 3000
    02                             # tagged fields: 2, unknown here
    64 05 00 03 66 6f 6f           #   tag 100, size 5: "foo"
    65 04 00 00 0f a0              #   tag 101, size 4: 4000
""")


def test_tagged_fields_of_a_newer_kafka_are_read_past():
    value = decode_value(FUTURE_V1)
    assert value == TransactionLogValue(1000, 100, 1000, TransactionState.COMPLETE_COMMIT, (("topic", (1,)),),
                                        2000, 3000, unknown_tags=((100, b"\x00\x03foo"), (101, b"\x00\x00\x0f\xa0")))
    meta = from_log_value("transaction-id", value)
    assert (meta.state, meta.partitions, meta.start_timestamp) == (TransactionState.COMPLETE_COMMIT,
                                                                   {("topic", 1)}, 3000)


def test_a_key_of_a_future_version_is_skipped():
    assert decode_key(b"\x7f\xff") is None


def test_v0_cannot_carry_tagged_fields():
    with pytest.raises(ValueError, match="v0 cannot carry tagged fields"):
        encode_value(TAGGED_VALUE, 0)
    with pytest.raises(ValueError, match="versions 0 and 1, not 2"):
        encode_value(EMPTY_VALUE, 2)


def test_an_expired_id_is_a_tombstone():
    meta = TransactionMetadata("billing-1", 1000, producer_epoch=4, state=DEAD, last_update_timestamp=5)
    assert log_record(meta) == (KEY, None)
    assert decode_value(None) is None


def test_metadata_records_as_kafka_writes_them():
    meta = TransactionMetadata("billing-1", 1000, producer_epoch=3, last_producer_epoch=2, timeout_ms=60000,
                               state=ONGOING, partitions=frozenset({("balances", 2), ("balances", 0)}),
                               start_timestamp=1700000000000, last_update_timestamp=1700000000123)
    assert log_record(meta) == (KEY, ONGOING_V0)
    assert log_record(meta, 1) == (KEY, ONGOING_V1)
    # A replay rebuilds it, except the last epoch, which Kafka does not store either.
    assert from_log_value("billing-1", decode_value(ONGOING_V0)) == TransactionMetadata(
        **{**{f: getattr(meta, f) for f in meta.__slots__}, "last_producer_epoch": -1})


def test_an_empty_state_holds_no_partitions():
    meta = TransactionMetadata("t", 1, producer_epoch=0, state=EMPTY, partitions=frozenset({("a", 0)}))
    with pytest.raises(ValueError, match="Empty but holds partitions"):
        to_log_value(meta)
    # ...and a stored Empty value that lists some is read without them, as Kafka's load does.
    listed = TransactionLogValue(1, 0, 100, EMPTY, (("a", (0,)),), 0, -1)
    assert from_log_value("t", listed).partitions == frozenset()


def _set(data: bytes, at: int, new: str) -> bytes:
    b = bytes.fromhex(new)
    return data[:at] + b + data[at + len(b):]


@pytest.mark.parametrize("data,field", [
    (ONGOING_V0[:13], "TransactionTimeoutMs needs 4 bytes, 1 left at byte 12"),
    (ONGOING_V0[:2], "ProducerId needs 8 bytes, 0 left at byte 2"),
    (b"\x00", "version needs 2 bytes"),
    (_set(ONGOING_V0, 0, "0002"), "version is 2"),
    (_set(ONGOING_V0, 16, "09"), "TransactionStatus is 9, not a state id"),
    (_set(ONGOING_V0, 17, "7fffffff"), "TransactionPartitions claims 2147483647 entries"),
    (_set(ONGOING_V0, 17, "fffffffe"), "TransactionPartitions has a negative length -2"),
    (_set(ONGOING_V0, 21, "ffff"), "Topic is null"),
    (_set(ONGOING_V0, 23, "ff"), "Topic is not UTF-8"),
    (_set(ONGOING_V0, 31, "ffffffff"), "PartitionIds is null"),
    (ONGOING_V0[:40], "PartitionIds claims 2 entries, more than the 5 bytes left hold"),
    (ONGOING_V0[:-3], "TransactionStartTimestampMs needs 8 bytes, 5 left"),
    (ONGOING_V1[:-1], "tagged fields needs 1 bytes, 0 left"),
    (_set(TAGGED_V1, 36, "04"), "PreviousProducerId has size 4, not 8"),
    (TAGGED_V1[:-2], "ClientTransactionVersion needs 2 bytes, 0 left"),
    (_set(ONGOING_V1, 18, "ffffffffff"), "Topic is a varint longer than 5 bytes"),
], ids=lambda x: x if isinstance(x, str) else "")
def test_a_value_that_does_not_parse_names_the_field(data, field):
    with pytest.raises(CorruptRecordError, match="^__transaction_state value: ") as e:
        decode_value(data)
    assert field in str(e.value)


@pytest.mark.parametrize("data,field", [
    (KEY[:5], "TransactionalId needs 9 bytes, 1 left at byte 4"),
    (KEY[:2] + b"\xff\xff", "TransactionalId is null"),
    (KEY[:1], "version needs 2 bytes"),
], ids=lambda x: x if isinstance(x, str) else "")
def test_a_key_that_does_not_parse_names_the_field(data, field):
    with pytest.raises(CorruptRecordError, match="^__transaction_state key: ") as e:
        decode_key(data)
    assert field in str(e.value)


# round trips ---------------------------------------------------------------------------------------
I16, I32, I64 = (st.integers(-2 ** (b - 1), 2 ** (b - 1) - 1) for b in (16, 32, 64))
texts = st.text(max_size=20)
partitions = st.none() | st.lists(st.tuples(texts, st.lists(I32, max_size=4).map(tuple)), max_size=4).map(tuple)


def values(tagged: bool):
    extra = dict(previous_producer_id=I64, next_producer_id=I64, client_transaction_version=I16,
                 unknown_tags=st.lists(st.tuples(st.integers(3, 2 ** 20), st.binary(max_size=8)),
                                       unique_by=lambda t: t[0], max_size=3).map(lambda t: tuple(sorted(t))))
    return st.builds(TransactionLogValue, producer_id=I64, producer_epoch=I16, transaction_timeout_ms=I32,
                     state=st.sampled_from(TransactionState), partitions=partitions,
                     last_update_timestamp_ms=I64, start_timestamp_ms=I64, **(extra if tagged else {}))


@settings(max_examples=300, deadline=None)
@given(values(tagged=True))
def test_v1_round_trips_and_every_cut_is_refused(value):
    data = encode_value(value, 1)
    assert decode_value(data) == value
    for cut in range(len(data)):
        with pytest.raises(CorruptRecordError):
            decode_value(data[:cut])


@settings(max_examples=300, deadline=None)
@given(values(tagged=False))
def test_v0_round_trips_and_every_cut_is_refused(value):
    data = encode_value(value, 0)
    assert decode_value(data) == value
    for cut in range(len(data)):
        with pytest.raises(CorruptRecordError):
            decode_value(data[:cut])


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_keys_round_trip(transactional_id):
    assert decode_key(encode_key(transactional_id)) == transactional_id


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=80))
def test_any_bytes_decode_or_name_what_is_wrong(data):
    for decode in (decode_value, decode_key):
        try:
            decode(data)
        except CorruptRecordError as e:
            assert str(e).startswith("__transaction_state ")
