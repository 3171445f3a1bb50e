"""The transaction rules of cleaning on hand-built batches (no log): Kafka's CleanedTransactionMetadata
and the batch fates the survival rule applies, round by round, as in Kafka's LogCleanerTest.

``Round`` below is a cleaning round over a list of batches held in memory: the offset map built from
the dirty part (aborted records left out), then every batch filtered in order through the one survival
rule with the round's transaction walk -- the steps the log cleaner takes, without files."""

from __future__ import annotations

import pytest

from compactlog.cleaner.offset_map import OffsetMap
from compactlog.cleaner.survival import filter_batches, lookup, map_keys
from compactlog.cleaner.transactions import (
    AbortedRanges,
    CleanedTransactions,
    LastRecord,
    carried_states,
)
from compactlog.records.batch import BatchInfo, RecordBatch, build_batch
from compactlog.records.columns import Chunk
from compactlog.records.control import ABORT, COMMIT, build_end_txn_marker, read_control_record
from compactlog.storage.transaction_index import AbortedTxn

RETENTION = 86_400_000
LARGE = 2**63 - 1 - RETENTION - 1  # Kafka's largeTimestamp: a horizon set now never passes


class TxnLog:
    """Batches appended in offset order, with the aborted-transaction index and producer state that the
    log would keep (what lane storage keeps for a real log)."""

    def __init__(self) -> None:
        self.batches: list[RecordBatch] = []
        self.next = 0
        self.open: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self.aborted: list[AbortedTxn] = []
        self.seq: dict[int, int] = {}
        self.last: dict[int, LastRecord] = {}

    def append(self, keys, pid: int = -1, txn: bool = False, epoch: int = 0) -> None:
        seq = self.seq.get(pid, 0) if pid >= 0 else -1
        info = BatchInfo(self.next, producer_id=pid, producer_epoch=epoch if pid >= 0 else -1, base_sequence=seq,
                         is_transactional=txn)
        data = build_batch([str(k).encode() if k is not None else None for k in keys],
                           [b"v%d" % (self.next + i) for i in range(len(keys))], [1000 + self.next] * len(keys), info=info)
        self._add(data)
        if pid >= 0:
            self.seq[pid] = seq + len(keys)
            self.last[pid] = LastRecord(self.next - 1, epoch)
        if txn:
            self.open.setdefault(pid, self.next - len(keys))

    def marker(self, pid: int, commit: bool, epoch: int = 0) -> None:
        at = self.next
        self._add(build_end_txn_marker(COMMIT if commit else ABORT, 7, producer_id=pid, producer_epoch=epoch,
                                       timestamp=2000 + at, base_offset=at))
        first = self.open.pop(pid, None)
        if not commit and first is not None:
            lso = min([*self.open.values(), at + 1])
            self.aborted.append(AbortedTxn(pid, first, at, lso))
        self.last.setdefault(pid, LastRecord(-1, epoch))

    def _add(self, data: bytes) -> None:
        b = RecordBatch(data)
        self.batches.append(b)
        self.next = b.next_offset

    # what a test reads back
    def keys(self) -> list[str]:
        return [r.key.decode() for b in self.batches if not b.is_control for r in b.records() if r.key is not None]

    def offsets(self) -> list[int]:
        return [r.offset for b in self.batches for r in b.records()]

    def last_offsets(self) -> list[int]:
        return [b.last_offset for b in self.batches]


def clean(log: TxnLog, first_dirty: int, now: int, upper: int | None = None) -> tuple[int, list[AbortedTxn]]:
    """One round over the whole log up to ``upper`` (default: its end); returns (the round's end, the
    index entries of the markers kept)."""
    upper = log.next if upper is None else upper
    m = OffsetMap(1 << 20)
    dirty = [b for b in log.batches if b.last_offset >= first_dirty and b.base_offset < upper]
    aborted = [t for t in log.aborted if t.last_offset >= first_dirty and t.first_offset < upper]
    map_keys(m, dirty, first_dirty, "offset", aborted=AbortedRanges(aborted))
    m.latest_offset = upper - 1
    txn = CleanedTransactions(log.aborted, log.last)
    cleaned, rest = [b for b in log.batches if b.base_offset < upper], [b for b in log.batches if b.base_offset >= upper]
    out = []
    for b in cleaned:  # one batch a chunk: the walk must carry its state from chunk to chunk
        chunk = Chunk.scan([b])
        mapped, exact = lookup(m, chunk, first_dirty, "offset")
        out += [RecordBatch(bytes(data)) for data, _, _ in
                filter_batches(chunk, mapped, exact, m.latest_offset, upper, now, RETENTION, txn=txn)]
    log.batches = out + rest
    kept = txn.take_index_entries()
    log.aborted = kept + [t for t in log.aborted if t.last_offset >= upper]
    return upper, kept


def two_pass(log: TxnLog, first_dirty: int, now: int) -> int:
    clean(log, first_dirty, now)
    return clean(log, first_dirty, now + RETENTION + 1)[0]


def test_aborted_ranges_cover_a_producers_batches_up_to_its_marker():
    ranges = AbortedRanges([AbortedTxn(1, 10, 20, 21)])
    log = TxnLog()
    log.next = 9
    log.append([1], pid=1, txn=True)  # 9: before the transaction
    log.append([1, 2], pid=1, txn=True)  # 10-11: in it
    log.append([1], pid=2, txn=True)  # 12: another producer
    log.append([1], pid=1)  # 13: not transactional
    log.next = 21
    log.append([1], pid=1, txn=True)  # 21: after the marker
    assert [ranges.is_aborted(b) for b in log.batches] == [False, True, False, False, False]
    assert ranges.aborted(log.batches) == [1]
    assert AbortedRanges([]).aborted(log.batches) is None


def test_basic_transaction_aware_cleaning():
    log = TxnLog()
    log.append([1, 2], pid=1, txn=True)  # 0-1 aborted
    log.append([2, 3], pid=2, txn=True)  # 2-3 committed
    log.append([3, 4], pid=1, txn=True)  # 4-5 aborted
    log.marker(1, commit=False)  # 6
    log.marker(2, commit=True)  # 7
    log.append([2], pid=1, txn=True)  # 8
    log.marker(1, commit=True)  # 9
    before = list(log.aborted)
    _, kept = clean(log, 0, 10_000)
    assert log.keys() == ["3", "2"]
    assert log.offsets() == [3, 6, 7, 8, 9]
    assert kept == before  # the ABORT marker stays, and so does its index entry


def test_commit_marker_removal_takes_two_rounds_after_its_data_goes():
    log = TxnLog()
    log.append([1], pid=1, txn=True)  # 0
    log.append([2, 3], pid=1, txn=True)  # 1-2
    log.marker(1, commit=True)  # 3
    log.append([2], pid=1, txn=True)  # 4
    log.marker(1, commit=True)  # 5
    dirty, _ = clean(log, 0, LARGE)
    assert log.keys() == ["1", "3", "2"]
    assert log.offsets() == [0, 2, 3, 4, 5]
    log.append([1, 3], pid=1, txn=True)  # 6-7
    log.marker(1, commit=True)  # 8
    dirty, _ = clean(log, dirty, LARGE)
    assert log.keys() == ["2", "1", "3"]
    # this round read (and dropped) the data before the marker at 3: the marker stays, as it is
    assert log.offsets() == [3, 4, 5, 6, 7, 8]
    assert next(b for b in log.batches if b.base_offset == 3).delete_horizon_ms is None
    dirty, _ = clean(log, dirty, LARGE)
    assert log.offsets() == [3, 4, 5, 6, 7, 8]  # now it may go: it gains a horizon, not yet passed
    marker = next(b for b in log.batches if b.base_offset == 3)
    assert marker.delete_horizon_ms == LARGE + RETENTION and read_control_record(marker).is_commit
    clean(log, dirty, 2**63 - 1)
    assert log.keys() == ["2", "1", "3"]
    assert log.offsets() == [4, 5, 6, 7, 8]


def test_abort_marker_removal():
    log = TxnLog()
    log.append([1], pid=1, txn=True)  # 0
    log.append([2, 3], pid=1, txn=True)  # 1-2
    log.marker(1, commit=False)  # 3
    log.append([3], pid=1, txn=True)  # 4
    log.marker(1, commit=True)  # 5
    dirty, kept = clean(log, 0, LARGE)
    assert log.keys() == ["3"] and log.offsets() == [3, 4, 5]
    assert kept == [AbortedTxn(1, 0, 3, 4)]  # its data was there this round: the entry is rewritten
    two_pass(log, dirty, LARGE)
    assert log.keys() == ["3"] and log.offsets() == [4, 5]
    assert log.aborted == []  # no data of it is left: no index entry either


def test_abort_marker_stays_while_the_producers_last_empty_batch_does():
    log = TxnLog()
    log.append([2, 3], pid=1, txn=True)  # 0-1
    log.marker(1, commit=False)  # 2
    dirty, kept = clean(log, 0, LARGE)
    assert log.keys() == [] and log.offsets() == [2] and log.last_offsets() == [1, 2]
    assert kept == [AbortedTxn(1, 0, 2, 3)]
    dirty = two_pass(log, dirty, LARGE)
    assert log.offsets() == [2] and log.last_offsets() == [1, 2] and len(log.aborted) == 1
    log.append([1], pid=1, txn=True)  # 3: the producer's last sequence moves on
    log.marker(1, commit=True)  # 4
    dirty, _ = clean(log, dirty, LARGE)
    assert log.offsets() == [2, 3, 4] and log.last_offsets() == [2, 3, 4]  # the empty batch went this round
    two_pass(log, dirty, LARGE)
    assert log.offsets() == [3, 4] and log.aborted == []


def test_retains_producer_last_sequence_even_if_transaction_aborted():
    log = TxnLog()
    log.append([1], pid=1, txn=True)  # 0
    log.append([2, 3], pid=1, txn=True)  # 1-2
    log.marker(1, commit=False)  # 3
    clean(log, 0, 10_000)
    assert log.last_offsets() == [2, 3] and log.keys() == [] and log.offsets() == [3]
    empty = log.batches[0]
    assert empty.record_count == 0 and empty.producer_id == 1 and empty.base_sequence == 1
    log.append([1, 5], pid=1, txn=True)  # 4-5
    log.marker(1, commit=True)  # 6
    clean(log, 0, 10_000)
    assert log.last_offsets() == [3, 5, 6] and log.keys() == ["1", "5"]


def test_idempotent_producers_keep_their_last_sequence_batch():
    log = TxnLog()
    log.append([0])  # 0, no producer
    log.append([0], pid=1)  # 1
    log.append([0], pid=2)  # 2
    log.append([0], pid=3)  # 3
    log.append([1], pid=2)  # 4
    clean(log, 0, 10_000)
    assert log.last_offsets() == [1, 3, 4]  # 1 and 2 lost their record; 1 is pid 1's last, kept empty
    assert [b.record_count for b in log.batches] == [0, 1, 1]
    assert log.keys() == ["0", "1"]


def test_keys_equal_to_marker_keys_are_not_shadowed_by_markers():
    commit_key = b"\x00\x00\x00\x01"
    log = TxnLog()
    log.append([1], pid=1, txn=True)
    log.marker(1, commit=True)
    info = BatchInfo(log.next, producer_id=2, producer_epoch=0, base_sequence=0, is_transactional=True)
    log._add(build_batch([commit_key], [b"foo"], [5], info=info))
    log.last[2] = LastRecord(2, 0)
    log.marker(2, commit=True)
    clean(log, 0, 10_000)
    assert log.last_offsets() == [0, 1, 2, 3] and log.offsets() == [0, 1, 2, 3]


def test_an_empty_control_batch_may_go_and_a_marker_only_producer_keeps_its_marker():
    log = TxnLog()
    log.marker(1, commit=True)  # 0: a marker with nothing before it; producer 1's last entry
    log.append([2])  # 1
    log.append([3])  # 2
    dirty = two_pass(log, 0, LARGE)
    assert log.offsets() == [1, 2] and log.last_offsets() == [0, 1, 2]  # kept, emptied: it holds the epoch
    clean(log, dirty, 2**63 - 1)
    assert log.last_offsets() == [0, 1, 2]


def test_the_walk_split_at_group_starts_decides_as_one_walk():
    """The Spark job's split: each range walked from the state carried to its start agrees with one
    walk over everything, batch by batch and index entry by index entry."""
    log = TxnLog()
    for i in range(30):
        pid = 1 + i % 3
        log.append([i % 5, (i + 1) % 5], pid=pid, txn=True)
        if i % 4 == 3:
            log.marker(pid, commit=i % 8 != 3)
    for p in (1, 2, 3):
        log.marker(p, commit=False)
    whole = CleanedTransactions(log.aborted, log.last)
    expected = [whole.fates([b], LARGE) for b in log.batches]
    bounds = [0, 17, 40, 41, log.next]
    starts, ends = bounds[:-1], bounds[1:]
    states = list(carried_states(CleanedTransactions(log.aborted, log.last), log.batches, starts, ends))
    got, entries = [], []
    for state, lo, hi in zip(states, starts, ends):
        got += [state.fates([b], LARGE) for b in log.batches if lo <= b.base_offset < hi]
        entries += state.take_index_entries()
    assert got == expected
    assert entries == whole.take_index_entries()


@pytest.mark.parametrize("chunked", [False, True])
def test_fates_of_a_chunk_equal_those_batch_by_batch(chunked):
    log = TxnLog()
    log.append([1, 2], pid=1, txn=True)
    log.append([5], pid=9)
    log.append([3], pid=2, txn=True)
    log.marker(1, commit=False)
    log.append([4])
    log.marker(2, commit=True)
    one = CleanedTransactions(log.aborted, log.last)
    by_one = [one.fates([b], LARGE) for b in log.batches]
    many = CleanedTransactions(log.aborted, log.last)
    f = many.fates(log.batches, LARGE)
    for i, single in enumerate(by_one):
        s = single or type(f)()
        assert (i in f.discard, i in f.retain_empty, i in f.mark) == (0 in s.discard, 0 in s.retain_empty, 0 in s.mark)
    assert f.discard == {0} and f.mark == set() and f.retain_empty == {0, 1, 2}


def test_a_chunk_without_transactions_or_producers_is_left_to_the_plain_rules():
    log = TxnLog()
    log.append([1, 2])
    log.append([3])
    assert CleanedTransactions([], {}).fates(log.batches, 0) is None


def test_the_round_stops_at_the_segment_holding_the_last_stable_offset():
    from compactlog.cleaner.selection import SegmentFacts, log_to_clean

    segs = [SegmentFacts(b, 100, 1, 1) for b in (0, 10, 20, 30)]
    args = dict(log_start_offset=0, log_end_offset=35, checkpoint=None, min_compaction_lag_ms=0,
                max_compaction_lag_ms=2**63 - 1, now=10_000)
    assert log_to_clean("t", segs, **args).first_uncleanable_offset == 30
    assert log_to_clean("t", segs, **args, last_stable_offset=35).first_uncleanable_offset == 30
    assert log_to_clean("t", segs, **args, last_stable_offset=25).first_uncleanable_offset == 20
    assert log_to_clean("t", segs, **args, last_stable_offset=20).first_uncleanable_offset == 20
    c = log_to_clean("t", segs, **args, last_stable_offset=5)
    assert c.first_uncleanable_offset == 0 and c.cleanable_bytes == 0
