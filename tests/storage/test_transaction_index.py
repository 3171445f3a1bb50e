"""The ``.txnindex`` file: Kafka's 34-byte entries byte for byte, the append rule, the fetch-range search
(the cases of Kafka's TransactionIndexTest, written anew), truncation, and the sanity check naming the
file and position of damage. A property test checks the search against a brute-force filter."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compactlog.storage import files
from compactlog.storage.index import CorruptIndexError
from compactlog.storage.transaction_index import (
    ENTRY_SIZE,
    AbortedTxn,
    TransactionIndex,
    transaction_index_file,
)

FOUR = [AbortedTxn(0, 0, 10, 11), AbortedTxn(1, 5, 15, 13), AbortedTxn(2, 18, 35, 25), AbortedTxn(3, 32, 50, 40)]


def _index(tmp_path: Path, txns=(), start: int = 0) -> TransactionIndex:
    idx = TransactionIndex(transaction_index_file(tmp_path, start), start)
    for t in txns:
        idx.append(t)
    return idx


def test_file_name_is_the_base_offset_in_20_digits(tmp_path):
    assert transaction_index_file(tmp_path, 1234).name == "00000000000000001234.txnindex"
    assert files.base_offset_of(transaction_index_file(tmp_path, 1234)) == 1234


def test_entry_bytes_are_kafkas_layout(tmp_path):
    expected = b"".join([
        struct.pack(">h", 0),  # version: AbortedTxn.CURRENT_VERSION
        struct.pack(">q", 983493),  # producer id
        struct.pack(">q", 137),  # first offset
        struct.pack(">q", 299),  # last offset (the ABORT marker's)
        struct.pack(">q", 200),  # last stable offset
    ])
    assert len(expected) == ENTRY_SIZE == 34
    assert AbortedTxn(983493, 137, 299, 200).to_bytes() == expected
    with _index(tmp_path, [AbortedTxn(983493, 137, 299, 200), AbortedTxn(2**63 - 1, 300, 301, 302)]) as idx:
        idx.flush()
    raw = transaction_index_file(tmp_path, 0).read_bytes()
    assert raw[:34] == expected
    assert raw[34:] == bytes.fromhex("0000" "7fffffffffffffff" "000000000000012c" "000000000000012d" "000000000000012e")


def test_a_file_written_by_hand_is_read(tmp_path):
    path = transaction_index_file(tmp_path, 100)
    path.write_bytes(struct.pack(">hqqqq", 0, 7, 100, 120, 110) + struct.pack(">hqqqq", 0, 8, 115, 130, 131))
    with TransactionIndex(path, 100) as idx:
        idx.sanity_check()
        assert idx.all_aborted_txns() == [AbortedTxn(7, 100, 120, 110), AbortedTxn(8, 115, 130, 131)]


def test_the_file_is_created_by_the_first_append_and_flushed(tmp_path):
    idx = _index(tmp_path)
    path = transaction_index_file(tmp_path, 0)
    idx.flush()  # nothing to flush, nothing created
    assert not path.exists()
    assert idx.all_aborted_txns() == []
    assert idx.collect_aborted_txns(0, 100) == ([], False)
    idx.append(AbortedTxn(0, 0, 10, 2))
    idx.flush()
    assert path.stat().st_size == 34
    idx.close()


def test_reopened_index_goes_on_after_its_entries(tmp_path):
    with _index(tmp_path, FOUR):
        pass
    with _index(tmp_path) as idx:
        idx.append(AbortedTxn(3, 50, 60, 55))
        assert idx.all_aborted_txns() == FOUR + [AbortedTxn(3, 50, 60, 55)]


@pytest.mark.parametrize("last", [15, 10])
def test_last_offset_must_increase(tmp_path, last):
    with _index(tmp_path, [AbortedTxn(1, 5, 15, 13)]) as idx:
        with pytest.raises(ValueError) as e:
            idx.append(AbortedTxn(0, 0, last, 11))
        assert str(e.value) == (
            f"The last offset of appended transactions must increase sequentially, but {last} is not greater "
            f"than current last offset 15 of index {transaction_index_file(tmp_path, 0).absolute()}"
        )
        assert idx.all_aborted_txns() == [AbortedTxn(1, 5, 15, 13)]


def test_last_offset_rule_holds_after_a_reopen(tmp_path):
    with _index(tmp_path, FOUR):
        pass
    with _index(tmp_path) as idx, pytest.raises(ValueError, match="50 is not greater than current last offset 50"):
        idx.append(AbortedTxn(9, 45, 50, 51))


def test_collect_aborted_transactions(tmp_path):
    with _index(tmp_path, FOUR) as idx:
        assert idx.collect_aborted_txns(0, 100) == (FOUR, False)  # no LSO reaches 100: look further
        assert idx.collect_aborted_txns(0, 32) == (FOUR[:3], True)  # stops at the LSO 40 >= 32
        assert idx.collect_aborted_txns(0, 35) == (FOUR, True)
        assert idx.collect_aborted_txns(10, 35) == (FOUR, True)  # last offset 10 is in range
        assert idx.collect_aborted_txns(11, 35) == (FOUR[1:], True)  # the first ends before 11
        assert idx.collect_aborted_txns(20, 41) == (FOUR[2:], False)
        assert idx.collect_aborted_txns(51, 60) == ([], False)  # all end before the range
        assert idx.collect_aborted_txns(0, 11) == (FOUR[:1], True)  # the first entry's LSO 11 ends it


def test_truncate(tmp_path):
    txns = [AbortedTxn(0, 0, 10, 2), AbortedTxn(1, 5, 15, 16), AbortedTxn(2, 18, 35, 25), AbortedTxn(3, 32, 50, 40)]
    path = transaction_index_file(tmp_path, 0)
    with _index(tmp_path, txns) as idx:
        idx.truncate_to(51)
        assert idx.all_aborted_txns() == txns
        idx.truncate_to(50)  # the entry whose marker is at 50 goes
        assert idx.collect_aborted_txns(0, 100).aborted == txns[:3]
        assert path.stat().st_size == 3 * 34
        idx.truncate_to(16)
        assert idx.all_aborted_txns() == txns[:2]
        idx.append(AbortedTxn(4, 16, 17, 18))  # the last offset is now 15's: 17 follows it
        with pytest.raises(ValueError, match="17 is not greater"):
            idx.append(AbortedTxn(5, 16, 17, 18))
        idx.reset()
        assert idx.collect_aborted_txns(0, 100).aborted == []
        assert path.stat().st_size == 0
        idx.append(AbortedTxn(0, 0, 1, 2))  # after a reset any last offset is accepted
        assert idx.all_aborted_txns() == [AbortedTxn(0, 0, 1, 2)]


def test_rename_and_delete(tmp_path):
    idx = _index(tmp_path, [AbortedTxn(0, 0, 10, 2)])
    moved = tmp_path / "00000000000000000000.txnindex.swap"
    idx.rename_to(moved)
    idx.append(AbortedTxn(1, 5, 15, 16))
    assert [t.first_offset for t in idx.collect_aborted_txns(0, 100).aborted] == [0, 5]
    assert not transaction_index_file(tmp_path, 0).exists() and moved.stat().st_size == 68
    assert idx.delete_if_exists() is True
    assert not moved.exists()
    assert idx.delete_if_exists() is False


def test_sanity_check_refuses_entries_below_the_start_offset(tmp_path):
    with _index(tmp_path, FOUR):
        pass
    with TransactionIndex(transaction_index_file(tmp_path, 0), 100) as idx:  # as if the base offset were 100
        with pytest.raises(CorruptIndexError) as e:
            idx.sanity_check()
        assert "is less than start offset 100" in str(e.value) and "at position 0" in str(e.value)


@pytest.mark.parametrize("extra", [1, 17, 33])
def test_sanity_check_finds_a_torn_tail_and_an_append_writes_over_it(tmp_path, extra):
    with _index(tmp_path, FOUR):
        pass
    path = transaction_index_file(tmp_path, 0)
    with open(path, "ab") as f:
        f.write(b"\x00" * extra)
    with TransactionIndex(path, 0) as idx:
        with pytest.raises(CorruptIndexError) as e:
            idx.sanity_check()
        assert str(e.value) == (
            f"transaction index {path} has size {136 + extra}, not a multiple of the entry size 34: "
            f"{extra} bytes of a torn entry at position 136"
        )
        assert idx.all_aborted_txns() == FOUR  # reads skip the torn tail, as Kafka's do
        idx.append(AbortedTxn(4, 51, 52, 53))
        idx.sanity_check()
        assert idx.all_aborted_txns() == FOUR + [AbortedTxn(4, 51, 52, 53)]
    assert path.stat().st_size == 5 * 34


@pytest.mark.parametrize("version", [1, -1, 256, 0x7FFF])
def test_a_bad_version_is_named_with_its_position(tmp_path, version):
    with _index(tmp_path, FOUR):
        pass
    path = transaction_index_file(tmp_path, 0)
    raw = bytearray(path.read_bytes())
    struct.pack_into(">h", raw, 2 * 34, version)  # the third entry's version
    path.write_bytes(bytes(raw))
    with TransactionIndex(path, 0) as idx:  # opening reads nothing: the damage is found by a read
        for call in (idx.sanity_check, idx.all_aborted_txns, lambda: idx.collect_aborted_txns(0, 100)):
            with pytest.raises(CorruptIndexError) as e:
                call()
            assert str(e.value) == (
                f"Unexpected aborted transaction version {version} in transaction index {path} at position 68, "
                f"current version is 0"
            )
        assert idx.collect_aborted_txns(0, 13) == (FOUR[:2], True)  # a search that stops before it is fine


def test_appending_to_an_index_whose_last_entry_is_damaged_names_it(tmp_path):
    with _index(tmp_path, FOUR):
        pass
    path = transaction_index_file(tmp_path, 0)
    raw = bytearray(path.read_bytes())
    raw[3 * 34] = 0x01  # the last entry's version
    path.write_bytes(bytes(raw))
    with TransactionIndex(path, 0) as idx, pytest.raises(CorruptIndexError, match="version 256 .* at position 102"):
        idx.append(AbortedTxn(4, 51, 52, 53))
    assert path.read_bytes() == bytes(raw)  # nothing was written


def test_a_long_index_is_read_in_chunks(tmp_path):
    txns = [AbortedTxn(i, 2 * i, 2 * i + 1, 2 * i + 1) for i in range(5000)]
    path = transaction_index_file(tmp_path, 0)
    path.write_bytes(b"".join(t.to_bytes() for t in txns))
    with TransactionIndex(path, 0) as idx:
        idx.sanity_check()
        assert idx.all_aborted_txns() == txns
        assert idx.collect_aborted_txns(8000, 8004) == (txns[4000:4002], True)
        idx.truncate_to(9001)
        assert os.path.getsize(path) == 4500 * 34


# --- the search against a brute-force filter ------------------------------------------------------
def _simulate(steps: list[tuple[int, int]]) -> list[AbortedTxn]:
    """Aborted transactions as a log would produce them: each step writes one offset, a batch of a
    producer (opening its transaction) or a marker ending one (0: commit, 1: abort). The LSO recorded
    for an abort is the first offset of the earliest transaction still open, or the marker's offset + 1."""
    open_txns: dict[int, int] = {}
    out: list[AbortedTxn] = []
    for offset, (pid, action) in enumerate(steps):
        if pid not in open_txns:
            open_txns[pid] = offset
            continue
        if action == 2:  # another batch of the open transaction
            continue
        first = open_txns.pop(pid)
        if action == 1:
            lso = min(open_txns.values(), default=offset + 1)
            out.append(AbortedTxn(pid, first, offset, lso))
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    steps=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 2)), max_size=80),
    start=st.integers(0, 90),
    length=st.integers(1, 60),
)
def test_search_finds_what_a_brute_force_filter_finds(tmp_path_factory, steps, start, length):
    txns = _simulate(steps)
    upper = start + length
    d = tmp_path_factory.mktemp("txn")
    with _index(d, txns) as idx:
        result = idx.collect_aborted_txns(start, upper)
        assert result.aborted == [t for t in txns if t.last_offset >= start and t.first_offset < upper]
        assert result.complete == any(t.last_stable_offset >= upper for t in txns)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rows=st.lists(st.tuples(st.integers(0, 50), st.integers(0, 50), st.integers(0, 60)), max_size=30),
    start=st.integers(0, 60),
    upper=st.integers(0, 70),
)
def test_search_of_any_entries_stops_at_the_first_lso_past_the_range(tmp_path_factory, rows, start, upper):
    """Whatever the entries, the search is the overlap filter over the entries up to the first whose
    LSO reaches the upper bound."""
    txns, last = [], -1
    for pid, (first_gap, length, lso) in enumerate(rows):
        last += 1 + length
        txns.append(AbortedTxn(pid, max(0, last - first_gap), last, lso))
    cut = next((i + 1 for i, t in enumerate(txns) if t.last_stable_offset >= upper), None)
    seen = txns[:cut] if cut else txns
    with _index(tmp_path_factory.mktemp("txn"), txns) as idx:
        assert idx.collect_aborted_txns(start, upper) == (
            [t for t in seen if t.last_offset >= start and t.first_offset < upper], cut is not None)
