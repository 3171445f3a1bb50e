"""The replay of ``__transaction_state`` (``transactions.load``): Kafka's rules over records given by hand,
then over a real topic written through the embedded API and read back from its files."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

import compactlog
from compactlog.transactions.coordinator import TRANSACTION_STATE_TOPIC, transaction_partition
from compactlog.transactions.load import LoadedTransactions, load_partition, replay
from compactlog.transactions.log_records import encode_key, encode_value
from compactlog.transactions.metadata import NO_PRODUCER_EPOCH, TransactionMetadata, log_record, to_log_value
from compactlog.transactions.state import (
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    EMPTY,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    PREPARE_EPOCH_FENCE,
    TransactionState,
)

NOW = 1_700_000_100_000
OPEN = frozenset({("balances", 0), ("balances", 2), ("__consumer_offsets", 12)})


def meta(tid: str, state: TransactionState, *, epoch: int = 3, start: int = NOW - 1_000,
         timeout_ms: int = 60_000) -> TransactionMetadata:
    """``tid`` stored in ``state`` as the coordinator stores it (no last epoch: it is never written)."""
    holds = state in (ONGOING, PREPARE_COMMIT, PREPARE_ABORT)
    return TransactionMetadata(tid, 1000 + len(tid), producer_epoch=epoch, timeout_ms=timeout_ms, state=state,
                               partitions=OPEN if holds else frozenset(),
                               start_timestamp=-1 if state is EMPTY else start, last_update_timestamp=start + 10)


def stored(*metas_or_records) -> list[tuple[int, bytes | None, bytes | None]]:
    """Records at offsets 0, 1, ...: a metadata is written as the coordinator writes it, a tuple as is."""
    out = []
    for offset, item in enumerate(metas_or_records):
        key, value = log_record(item) if isinstance(item, TransactionMetadata) else item
        out.append((offset, key, value))
    return out


def tombstone(tid: str) -> tuple[bytes, None]:
    return encode_key(tid), None


# the rules -----------------------------------------------------------------------------------------
def test_the_last_value_of_each_transactional_id_wins():
    first, then = meta("a", ONGOING), meta("a", PREPARE_COMMIT, epoch=3)
    loaded = replay(stored(meta("a", EMPTY), meta("b", EMPTY), first, then), 7, NOW)
    assert loaded.partition == 7
    assert dict(loaded.transactions) == {"a": then, "b": meta("b", EMPTY)}
    assert loaded.transactions["a"].last_producer_epoch == NO_PRODUCER_EPOCH


def test_a_tombstone_removes_the_id_and_a_later_value_brings_it_back():
    loaded = replay(stored(meta("a", EMPTY), meta("b", COMPLETE_COMMIT), tombstone("a"), tombstone("gone")), 0, NOW)
    assert set(loaded.transactions) == {"b"}
    again = replay(stored(meta("a", EMPTY), tombstone("a"), meta("a", ONGOING)), 0, NOW)
    assert dict(again.transactions) == {"a": meta("a", ONGOING)}


def test_a_key_of_an_unknown_version_is_skipped_whatever_its_value():
    future_key = bytes.fromhex("0001" "0001" "61")  # TransactionLogKey v1 does not exist (yet)
    loaded = replay(stored(meta("a", EMPTY), (future_key, b"\xff"), (future_key, None)), 0, NOW)
    assert (dict(loaded.transactions), loaded.skipped) == ({"a": meta("a", EMPTY)}, 2)


@pytest.mark.parametrize("record, names", [
    ((encode_key("a"), b"\x00\x00\x00"), "ProducerId"),  # a truncated value
    ((encode_key("a"), bytes.fromhex("0007") + b"\x00" * 40), "version"),  # a value version Kafka lacks
    ((encode_key("a")[:-1], None), "TransactionalId"),  # a truncated key
    ((None, b"\x00\x00"), "no key"),
    ((encode_key("a"), encode_value(replace(to_log_value(meta("a", ONGOING)), state=PREPARE_EPOCH_FENCE))),
     "never stored"),
])
def test_a_record_that_does_not_parse_is_skipped_with_a_warning_naming_partition_and_offset(record, names, caplog):
    records = stored(meta("a", EMPTY), meta("b", EMPTY), record, meta("c", EMPTY))
    loaded = replay(records, 4, NOW)
    assert (dict(loaded.transactions), loaded.unreadable) == (
        {"a": meta("a", EMPTY), "b": meta("b", EMPTY), "c": meta("c", EMPTY)}, 1)
    assert re.search(rf"__transaction_state-4 offset 2: .*{names}", caplog.text)


def test_a_damaged_value_is_replaced_by_the_later_one_of_its_id(caplog):
    loaded = replay(stored((encode_key("a"), b"\x00\x00\x01"), meta("a", EMPTY)), 0, NOW)
    assert (dict(loaded.transactions), loaded.unreadable) == ({"a": meta("a", EMPTY)}, 1)
    assert "offset 0" in caplog.text


def test_prepared_transactions_are_to_complete_and_timed_out_ones_to_abort():
    timeout = 60_000
    loaded = replay(stored(
        meta("commit", PREPARE_COMMIT), meta("abort", PREPARE_ABORT),
        meta("late", ONGOING, start=NOW - timeout - 1, timeout_ms=timeout),
        meta("just-in-time", ONGOING, start=NOW - timeout, timeout_ms=timeout),  # Kafka: start + timeout < now
        meta("fresh", ONGOING), meta("done", COMPLETE_ABORT), meta("idle", EMPTY),
    ), 0, NOW)
    assert [m.transactional_id for m in loaded.to_complete] == ["abort", "commit"]
    assert [m.state for m in loaded.to_complete] == [PREPARE_ABORT, PREPARE_COMMIT]
    assert [m.transactional_id for m in loaded.to_abort] == ["late"]
    assert loaded.to_complete[1].partitions == OPEN


def test_an_empty_partition_loads_nothing():
    assert replay([], 3, NOW) == LoadedTransactions(3, {}, (), ())


def test_a_flexible_value_loads_as_the_classic_one():
    m = meta("a", ONGOING)
    key, _ = log_record(m)
    _, v1 = log_record(m, value_version=1)
    assert dict(replay([(0, key, v1)], 0, NOW).transactions) == {"a": m}


# a real topic --------------------------------------------------------------------------------------
PARTITIONS = 3


def write(cl, *metas_or_records: TransactionMetadata | tuple[str, bytes, bytes | None]) -> None:
    """Append each to the partition of its transactional id, one produce per record (so several batches)."""
    for item in metas_or_records:
        if isinstance(item, TransactionMetadata):
            tid, (key, value) = item.transactional_id, log_record(item)
        else:
            tid, key, value = item
        cl.produce_batch(TRANSACTION_STATE_TOPIC, [(key, value)], partition=transaction_partition(tid, PARTITIONS))


def test_a_partition_written_through_the_api_loads_back_from_its_files(tmp_path):
    ids = ["billing-1", "billing-2", "orders-7", "txn-\u00e9", "\U0001F600"]
    home = {tid: transaction_partition(tid, PARTITIONS) for tid in ids}
    with compactlog.open(tmp_path) as cl:
        cl.create_topic(TRANSACTION_STATE_TOPIC, PARTITIONS, {"cleanup.policy": "compact"})
        write(cl, *(meta(t, EMPTY) for t in ids))
        write(cl, meta("billing-1", ONGOING), meta("billing-1", PREPARE_COMMIT), meta("billing-2", ONGOING, start=0),
              meta("orders-7", COMPLETE_ABORT), ("txn-\u00e9", *tombstone("txn-\u00e9")))
        # a whole batch of several records, as a coordinator appending in one write would
        cl.produce_batch(TRANSACTION_STATE_TOPIC, [log_record(meta("\U0001F600", ONGOING)),
                                                   log_record(meta("\U0001F600", PREPARE_ABORT))],
                         partition=home["\U0001F600"])
    with compactlog.open(tmp_path) as cl:  # reopened: what the files hold, not what a process remembered
        loads = [load_partition(cl, p, NOW) for p in range(PARTITIONS)]
    found = {tid: m for loaded in loads for tid, m in loaded.transactions.items()}
    assert found == {"billing-1": meta("billing-1", PREPARE_COMMIT), "billing-2": meta("billing-2", ONGOING, start=0),
                     "orders-7": meta("orders-7", COMPLETE_ABORT), "\U0001F600": meta("\U0001F600", PREPARE_ABORT)}
    assert all(home[tid] == loaded.partition for loaded in loads for tid in loaded.transactions)
    assert sorted(m.transactional_id for loaded in loads for m in loaded.to_complete) == ["billing-1", "\U0001F600"]
    assert [m.transactional_id for loaded in loads for m in loaded.to_abort] == ["billing-2"]


def test_a_damaged_record_in_a_real_partition_is_skipped_naming_its_offset(tmp_path, caplog):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic(TRANSACTION_STATE_TOPIC, PARTITIONS, {"cleanup.policy": "compact"})
        write(cl, meta("billing-1", EMPTY), meta("billing-1", ONGOING), ("billing-1", encode_key("billing-1"), b"\x00"))
        p = transaction_partition("billing-1", PARTITIONS)
        loaded = load_partition(cl, p, NOW)
    assert (dict(loaded.transactions), loaded.unreadable) == ({"billing-1": meta("billing-1", ONGOING)}, 1)
    assert f"__transaction_state-{p} offset 2: " in caplog.text


def test_no_topic_yet_loads_nothing(tmp_path):
    with compactlog.open(tmp_path) as cl:
        assert load_partition(cl, 0, NOW) == LoadedTransactions(0, {}, (), ())


def test_a_batch_that_fails_its_crc_is_skipped_and_the_later_ones_load(tmp_path, caplog):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic(TRANSACTION_STATE_TOPIC, PARTITIONS, {"cleanup.policy": "compact"})
        write(cl, meta("billing-1", EMPTY), meta("billing-1", ONGOING))
    p = transaction_partition("billing-1", PARTITIONS)
    segment = next((tmp_path / f"{TRANSACTION_STATE_TOPIC}-{p}").glob("*.log"))
    data = bytearray(segment.read_bytes())
    data[-3] ^= 0x01  # a byte of the last record's value: the batch's CRC no longer matches
    segment.write_bytes(bytes(data))
    with compactlog.open(tmp_path) as cl:
        assert dict(load_partition(cl, p, NOW).transactions) == {"billing-1": meta("billing-1", EMPTY)}
        write(cl, meta("billing-1", COMPLETE_ABORT))  # a batch after the damaged one still loads
        assert dict(load_partition(cl, p, NOW).transactions) == {"billing-1": meta("billing-1", COMPLETE_ABORT)}
    assert f"skipping the corrupt batch at offset 1 of __transaction_state-{p}" in caplog.text
