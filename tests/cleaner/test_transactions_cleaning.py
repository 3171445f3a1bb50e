"""Cleaning real logs holding transactions, after Kafka's LogCleanerTest transaction tests: aborted data
gone, markers kept while needed and removed in two rounds after their data, the ``.txnindex`` carried
into cleaned segments, producers' last sequences kept, never past the last stable offset.

Logs are written as a broker writes them: transactional batches through ``Partition.append``, markers
through ``Partition.write_txn_marker``; a round is the cleaner's own, over [first dirty, active base)."""

from __future__ import annotations

import os

import pytest

import compactlog
from compactlog.cleaner.cleaner import Cleaner
from compactlog.cleaner.offset_map import OffsetMap
from compactlog.clock import MockTime
from compactlog.records.batch import BatchInfo, build_batch
from compactlog.records.control import COMMIT, control_key, read_control_record
from compactlog.storage.transaction_index import AbortedTxn

RETENTION = 86_400_000
CONFIG = {"cleanup.policy": "compact", "segment.bytes": "1000000", "min.cleanable.dirty.ratio": "0.01",
          "delete.retention.ms": str(RETENTION), "file.delete.delay.ms": "0"}


@pytest.fixture
def clock():
    return MockTime()


@pytest.fixture
def cl(tmp_path, clock):
    with compactlog.open(tmp_path / "d", time=clock) as handle:
        handle.create_topic("t", 1, CONFIG)
        yield handle


class Producer:
    """A producer writing to partition 0 of ``t``: transactional (or only idempotent), sequences counted."""

    def __init__(self, cl, pid: int, epoch: int = 0, transactional: bool = True) -> None:
        self.part, self.pid, self.epoch, self.transactional, self.seq = cl.partition("t", 0), pid, epoch, transactional, 0
        self.time = cl.time

    def batch(self, keys, seq: int | None = None) -> bytes:
        info = BatchInfo(producer_id=self.pid, producer_epoch=self.epoch,
                         base_sequence=self.seq if seq is None else seq, is_transactional=self.transactional)
        now = self.time.milliseconds()
        return build_batch([str(k).encode() for k in keys], [b"v%d" % k for k in keys], [now] * len(keys), info=info)

    def __call__(self, *keys):
        done = self.part.append(self.batch(keys))
        self.seq += len(keys)
        return done

    def commit(self) -> int:
        return self.part.write_txn_marker(self.pid, self.epoch, True, 0)

    def abort(self) -> int:
        return self.part.write_txn_marker(self.pid, self.epoch, False, 0)


def plain(cl, *keys) -> None:
    now = cl.time.milliseconds()
    cl.partition("t", 0).append(build_batch([str(k).encode() for k in keys], [b"v"] * len(keys), [now] * len(keys)))


def clean(cl, first_dirty: int = 0, now: int | None = None, memory: int = 1 << 20) -> int:
    """One round over [first_dirty, active segment base) at ``now`` (the log's clock by default); the
    round's end offset.

    Kafka's tests clean a log with nothing dirty left again with a test map that keeps its last offset
    across rounds, so such a round still walks every segment (the markers' rules apply) and keeps
    every record; ours would map nothing and clean nothing, so such a round starts at 0 here: it walks
    the same segments and, the log being clean already, keeps the same records."""
    lg = cl.log("t")
    if first_dirty >= lg.active_segment.base_offset:
        first_dirty = 0
    cleaner = Cleaner(OffsetMap(memory), MockTime(cl.time.milliseconds() if now is None else now))
    return cleaner.clean(lg, first_dirty, lg.active_segment.base_offset)[0]


def two_pass(cl, first_dirty: int, now: int) -> int:
    clean(cl, first_dirty, now)
    return clean(cl, first_dirty, now + RETENTION + 1)


def keys(cl) -> list[int]:
    return [int(r.key) for b in cl.log("t").batches(0) if not b.is_control for r in b.records()]


def offsets(cl) -> list[int]:
    return [r.offset for b in cl.log("t").batches(0) for r in b.records()]


def last_offsets(cl) -> list[int]:
    return [b.last_offset for b in cl.log("t").batches(0)]


def aborted(cl) -> list[AbortedTxn]:
    lg = cl.log("t")
    return lg.aborted_txns(0, lg.log_end_offset)


LARGE = 2**63 - 1 - RETENTION - 1  # Kafka's largeTimestamp: a delete horizon stamped then never passes
NEVER = 2**63 - 1


def test_basic_transaction_aware_cleaning(cl, tmp_path, clock):
    p1, p2 = Producer(cl, 1), Producer(cl, 2)
    p1(1, 2)
    p2(2, 3)
    p1(3, 4)
    p1.abort()
    p2.commit()
    p1(2)
    p1.commit()
    before = aborted(cl)
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in before] == [(1, 0, 6)]
    cl.log("t").roll()
    clean(cl)
    assert keys(cl) == [3, 2]
    assert offsets(cl) == [3, 6, 7, 8, 9]
    assert aborted(cl) == before  # rewritten into the cleaned segment's index
    cl.close()
    with compactlog.open(tmp_path / "d", time=clock) as again:  # the index came with the swap, and stays
        assert aborted(again) == before
        part = again.partition("t", 0)
        assert part.aborted_transactions(0, part.log_end_offset) == [(1, 0)]
        assert [r.offset for r in again.consume("t", 0, from_beginning=True, isolation_level="read_committed")] == [3, 8]


def test_clean_with_transactions_spanning_segments(cl):
    p1, p2, p3 = Producer(cl, 1), Producer(cl, 2), Producer(cl, 3)
    p1(1, 2)
    p3(2, 3)
    p2(3, 4)
    cl.log("t").roll()
    p2(5, 6)
    p3(6, 7)
    p1(7, 8)
    p2.abort()
    p3(8, 9)
    p3.commit()
    p1(9, 10)
    p1.abort()
    dirty = clean(cl)  # only the first segment: the second is the active one
    assert keys(cl) == [2, 3, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10]
    cl.log("t").roll()
    p2(11)
    p1(12)
    clean(cl, dirty)
    assert keys(cl) == [2, 3, 6, 7, 8, 9, 11, 12]


def test_commit_marker_removal(cl):
    p = Producer(cl, 1)
    p(1)
    p(2, 3)
    p.commit()
    p(2)
    p.commit()
    cl.log("t").roll()
    dirty = clean(cl, 0, LARGE)  # the marker at 3 stays: records of its transaction are left
    assert keys(cl) == [1, 3, 2]
    assert offsets(cl) == [0, 2, 3, 4, 5]
    p(1, 3)
    p.commit()
    cl.log("t").roll()
    dirty = clean(cl, dirty, LARGE)  # this round read (and removed) its last records: still kept
    assert keys(cl) == [2, 1, 3]
    assert offsets(cl) == [3, 4, 5, 6, 7, 8]
    dirty = clean(cl, dirty, LARGE)  # now it may go: it gains a delete horizon, not yet passed
    assert offsets(cl) == [3, 4, 5, 6, 7, 8]
    marker = next(iter(cl.log("t").batches(3, 4)))
    assert read_control_record(marker).is_commit and marker.delete_horizon_ms == LARGE + RETENTION
    clean(cl, dirty, NEVER)
    assert keys(cl) == [2, 1, 3]
    assert offsets(cl) == [4, 5, 6, 7, 8]


def test_abort_marker_removal(cl):
    p = Producer(cl, 1)
    p(1)
    p(2, 3)
    p.abort()
    p(3)
    p.commit()
    cl.log("t").roll()
    dirty = clean(cl, 0, LARGE)
    assert keys(cl) == [3]
    assert offsets(cl) == [3, 4, 5]  # aborted records gone, the ABORT marker kept
    assert aborted(cl) == [AbortedTxn(1, 0, 3, 4)]
    two_pass(cl, dirty, LARGE)  # first its horizon, then its removal
    assert keys(cl) == [3]
    assert offsets(cl) == [4, 5]
    assert aborted(cl) == []


def test_multi_pass_cleaning_with_aborted_transactions_keeps_the_index(cl, clock):
    """Kafka's testMultiPassSegmentCleaningWithAbortedTransactions, with a map of three keys."""
    p1, p2 = Producer(cl, 1), Producer(cl, 2)
    p1(1, 2)  # [0, 1]
    p2(2, 3)  # [2, 3]
    p1(3, 4)  # [4, 5]
    p1.commit()  # 6
    p2.commit()  # 7
    p1(2, 3)  # [8, 9]
    p1.abort()  # 10
    p2(4, 5)  # [11, 12]
    p1(5, 6)  # [13, 14]
    p1.commit()  # 15
    p2.abort()  # 16
    p2(6, 7)  # [17, 18]
    p2.commit()  # 19
    lg = cl.log("t")
    lg.roll()
    expected = [AbortedTxn(1, 8, 10, 11), AbortedTxn(2, 11, 16, 17)]
    assert aborted(cl) == expected and cl.partition("t", 0).open_transactions() == []
    small = 4 * 24  # four slots: three keys at the 0.9 load factor
    bases = lambda: [b.base_offset for b in lg.batches(0)]  # noqa: E731

    dirty = clean(cl, 0, clock.milliseconds(), small)
    assert dirty == 4
    assert bases() == [0, 2, 4, 6, 7, 10, 13, 15, 16, 17, 19]
    assert offsets(cl) == [0, 2, 3, 4, 5, 6, 7, 10, 13, 14, 15, 16, 17, 18, 19]
    assert aborted(cl) == expected

    dirty = clean(cl, dirty, clock.milliseconds(), small)  # no aborted data is left: nothing to index
    assert dirty == 14
    assert bases() == [0, 2, 4, 6, 7, 10, 13, 15, 16, 17, 19]
    assert offsets(cl) == [0, 2, 4, 5, 6, 7, 10, 13, 14, 15, 16, 17, 18, 19]
    assert aborted(cl) == []

    clock.sleep(RETENTION)
    dirty = clean(cl, dirty, clock.milliseconds(), small)  # the ABORT markers' horizon has passed
    assert dirty == 20
    assert bases() == [0, 2, 4, 6, 7, 13, 15, 17, 19]
    assert offsets(cl) == [0, 2, 4, 5, 6, 7, 13, 15, 17, 18, 19]


def test_committed_transaction_spanning_segments(cl):
    p = Producer(cl, 1)
    p(1)
    cl.log("t").roll()
    p.commit()
    cl.log("t").roll()
    two_pass(cl, 0, LARGE)
    assert offsets(cl) == [0, 1] and last_offsets(cl) == [0, 1]


def test_aborted_transaction_spanning_segments(cl):
    p = Producer(cl, 1)
    p(1)
    cl.log("t").roll()
    p.abort()
    cl.log("t").roll()
    # the batch stays (empty) as the producer's last; the marker while that batch of its transaction does
    clean(cl, 0, LARGE)
    assert offsets(cl) == [1] and last_offsets(cl) == [0, 1]
    assert aborted(cl) == [AbortedTxn(1, 0, 1, 2)]
    clean(cl, 0, NEVER)
    assert offsets(cl) == [1] and last_offsets(cl) == [0, 1]


def test_abort_marker_retention_with_empty_batch(cl):
    p = Producer(cl, 1)
    p(2, 3)  # [0, 1]
    p.abort()  # 2
    cl.log("t").roll()
    entry = [AbortedTxn(1, 0, 2, 3)]
    assert aborted(cl) == entry
    dirty = clean(cl, 0, LARGE)
    assert aborted(cl) == entry and keys(cl) == [] and offsets(cl) == [2] and last_offsets(cl) == [1, 2]
    dirty = two_pass(cl, dirty, LARGE)  # the empty batch holds the last sequence: it and the marker stay
    assert aborted(cl) == entry and offsets(cl) == [2] and last_offsets(cl) == [1, 2]
    p(1)  # 3: the last sequence moves on
    cl.log("t").roll()
    dirty = clean(cl, dirty, LARGE)
    assert aborted(cl) == entry and keys(cl) == [1]
    assert offsets(cl) == [2, 3] and last_offsets(cl) == [2, 3]  # the round read the empty batch
    two_pass(cl, dirty, LARGE)
    assert keys(cl) == [1] and offsets(cl) == [3] and last_offsets(cl) == [3]
    assert aborted(cl) == []


def test_retains_producer_last_sequence_even_if_transaction_aborted(cl, tmp_path, clock):
    p = Producer(cl, 1)
    p(1)
    p(2, 3)
    p.abort()
    cl.log("t").roll()
    clean(cl)
    assert last_offsets(cl) == [2, 3] and keys(cl) == [] and offsets(cl) == [3]
    cl.close()
    with compactlog.open(tmp_path / "d", time=clock) as again:  # the empty batch rebuilds the state
        (info,) = again.partition("t", 0).producers()
        assert (info.producer_id, info.last_sequence) == (1, 2)
        p = Producer(again, 1)
        p.seq = 3
        p(1, 5)
        p.commit()
        again.log("t").roll()
        clean(again)
        assert last_offsets(again) == [3, 5, 6] and keys(again) == [1, 5] and offsets(again) == [3, 4, 5, 6]


def test_idempotent_producers_keep_their_last_sequence(cl):
    plain(cl, 0)
    for pid in (1, 2, 3):
        Producer(cl, pid, transactional=False)(0)
    two = Producer(cl, 2, transactional=False)
    two.seq = 1
    two(1)
    cl.log("t").roll()
    clean(cl)
    assert last_offsets(cl) == [1, 3, 4]
    assert keys(cl) == [0, 1] and offsets(cl) == [3, 4]


def test_duplicate_check_after_cleaning(cl, tmp_path, clock):
    producers = {pid: Producer(cl, pid, transactional=False) for pid in (1, 2, 3, 4)}
    sent = {1: (1, 2, 3), 2: (3, 1, 4), 3: (1, 4)}
    for pid, ks in sent.items():
        producers[pid](*ks)
    cl.log("t").roll()
    clean(cl)
    assert last_offsets(cl) == [2, 5, 7]
    assert keys(cl) == [2, 3, 1, 4] and offsets(cl) == [1, 3, 6, 7]
    cl.close()
    with compactlog.open(tmp_path / "d", time=clock) as again:
        part = again.partition("t", 0)
        for pid, (first, last) in {1: (0, 2), 3: (6, 7), 2: (3, 5)}.items():
            done = part.append(Producer(again, pid, transactional=False).batch(sent[pid], seq=0))
            assert done.duplicate and (done.first_offset, done.last_offset) == (first, last)
        Producer(again, 4, transactional=False)(2)
        again.log("t").roll()
        clean(again)
        assert last_offsets(again) == [2, 5, 7, 8]
        assert keys(again) == [3, 1, 4, 2] and offsets(again) == [3, 6, 7, 8]
    with compactlog.open(tmp_path / "d", time=clock) as third:
        done = third.partition("t", 0).append(Producer(third, 1, transactional=False).batch(sent[1], seq=0))
        assert done.duplicate and (done.first_offset, done.last_offset) == (0, 2)


def test_keys_equal_to_marker_keys_are_not_shadowed_by_markers(cl):
    p1 = Producer(cl, 1)
    p1(1)
    p1.commit()
    part = cl.partition("t", 0)
    part.append(build_batch([control_key(COMMIT)], [b"foo"], [cl.time.milliseconds()],
                            info=BatchInfo(producer_id=2, producer_epoch=0, base_sequence=0, is_transactional=True)))
    part.write_txn_marker(2, 0, True, 0)
    cl.log("t").roll()
    assert offsets(cl) == [0, 1, 2, 3]
    clean(cl)
    assert last_offsets(cl) == [0, 1, 2, 3] and offsets(cl) == [0, 1, 2, 3]


def test_cleaning_stops_at_the_last_stable_offset(cl):
    """An open transaction's first offset bounds every round; once it ends, cleaning goes on."""
    for i in range(3):
        plain(cl, 1, 2)
    lg = cl.log("t")
    lg.roll()
    open_txn = Producer(cl, 9)
    open_txn(1, 2)  # opens at 6: the LSO
    lg.roll()
    plain(cl, 1, 2)
    lg.roll()
    assert cl.partition("t", 0).last_stable_offset == 6
    cl.clean("t")
    assert cl.cleaner.manager.checkpoints[("t", 0)] == 6  # the segment holding the LSO is not cleaned
    assert offsets(cl) == [4, 5, 6, 7, 8, 9]
    open_txn.abort()
    lg.roll()
    cl.clean("t")
    assert keys(cl) == [1, 2]
    assert offsets(cl) == [8, 9, 10]  # the aborted data is gone; its marker stays (the round saw its data)


def test_recompressing_keeps_the_segments_aborted_transactions_indexed(cl, tmp_path, clock):
    from compactlog.recompression import recompress_local

    p1, p2 = Producer(cl, 1), Producer(cl, 2)
    p1(1, 2)
    p2(3)
    p1.abort()
    p2.commit()
    cl.log("t").roll()
    before = aborted(cl)
    assert len(before) == 1
    recompress_local(cl, "t", "gzip", progress=lambda _m: None)
    assert aborted(cl) == before
    cl.close()
    with compactlog.open(tmp_path / "d", time=clock) as again:
        assert aborted(again) == before
        assert [r.key for r in again.consume("t", 0, from_beginning=True, isolation_level="read_committed")] == [b"3"]


@pytest.mark.parametrize("seed", [11, 12])
def test_rounds_over_random_transactions_keep_what_they_must(tmp_path, seed):
    """Round after round on a random log (tests/txn_logs.py), the horizons passing between them: the
    committed data read read_committed stays the same, no aborted record is left, every ABORT marker
    whose transaction still has a batch keeps its index entry, every producer's last batch stays, and
    markers go in the end."""
    from txn_logs import START_MS, build, committed_latest

    from compactlog.cleaner.transactions import AbortedRanges

    build(tmp_path / "d", seed)
    clock = MockTime(START_MS + 10**6)
    with compactlog.open(tmp_path / "d", time=clock) as cl:
        lg, part = cl.log("t"), cl.partition("t", 0)
        model = committed_latest(cl)
        entries = lg.aborted_txns(0, lg.log_end_offset)
        ever_aborted = AbortedRanges(entries)
        lasts = lg.last_records_of_active_producers()
        markers_before = sum(b.is_control for b in lg.batches(0))
        bound = max(s.base_offset for s in lg.segments if s.base_offset <= part.last_stable_offset)
        for _ in range(4):
            Cleaner(OffsetMap(1 << 20), clock).clean(lg, 0, bound)
            clock.sleep(2001)  # past delete.retention.ms: horizons stamped by this round pass
            assert committed_latest(cl) == model
            batches = list(lg.batches(0))
            assert not any(b.record_count and ever_aborted.is_aborted(b) for b in batches if b.last_offset < bound)
            indexed = set(lg.aborted_txns(0, lg.log_end_offset))
            for t in entries:  # an aborted transaction with a batch left keeps its marker and its entry
                left = any(b.producer_id == t.producer_id and b.is_transactional and not b.is_control
                           and t.first_offset <= b.base_offset < t.last_offset for b in batches)
                if left:
                    assert t in indexed and t.last_offset in {b.base_offset for b in batches if b.is_control}
            by_last = {b.last_offset: b for b in batches}
            for pid, (last, epoch) in lasts.items():
                if last >= 0:
                    assert by_last[last].producer_id == pid, f"producer {pid}'s last batch stays"
        markers_after = sum(b.is_control for b in lg.batches(0) if b.last_offset < bound)
        assert markers_after < markers_before


CRASHING_CLEAN = """
import os, sys
import compactlog
from compactlog.storage import files
from compactlog.storage.log import Log
from compactlog.storage.segment import LogSegment
stage = sys.argv[2]
if stage == "cleaned":  # the .cleaned files written, nothing renamed yet
    Log.replace_segments = lambda self, new, old: os._exit(0)
else:  # the new segment's files renamed to .swap, the old ones not yet to .deleted
    rename = LogSegment.change_suffix
    def change_suffix(self, old, new):
        rename(self, old, new)
        if new == files.SWAP_SUFFIX:
            os._exit(0)
    LogSegment.change_suffix = change_suffix
cl = compactlog.open(sys.argv[1])
cl.clean("t")
raise SystemExit("the round ended without reaching the crash")
"""


@pytest.mark.parametrize("stage", ["cleaned", "swap"])
def test_a_crash_during_the_swap_keeps_the_index_of_the_old_or_the_new_segment(tmp_path, stage):
    import subprocess
    import sys

    with compactlog.open(tmp_path / "d") as cl:
        cl.create_topic("t", 1, CONFIG)
        p1, p2 = Producer(cl, 1), Producer(cl, 2)
        p1(1, 2)
        p2(1, 3)
        p1.abort()
        p2.commit()
        plain(cl, 3, 4)
        cl.log("t").roll()
        before = aborted(cl)
        committed = [(r.offset, r.key, r.value) for r in cl.consume("t", 0, from_beginning=True,
                                                                     isolation_level="read_committed")]
    done = subprocess.run([sys.executable, "-c", CRASHING_CLEAN, str(tmp_path / "d"), stage], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    names = os.listdir(tmp_path / "d" / "t-0")
    assert any(n.endswith(".txnindex." + stage) for n in names), names
    with compactlog.open(tmp_path / "d") as cl:
        assert aborted(cl) == before  # the old segment's entry, or the same entry rewritten into the new one
        names = os.listdir(tmp_path / "d" / "t-0")
        assert not any(n.endswith((".cleaned", ".swap", ".deleted")) for n in names), names
        latest = {k: (o, v) for o, k, v in committed}
        rows = [(r.offset, r.key, r.value) for r in cl.consume("t", 0, from_beginning=True, isolation_level="read_committed")]
        assert {k: (o, v) for o, k, v in rows} == latest
        if stage == "swap":  # the swap was finished at open: the cleaned records are what is left
            assert len(rows) < len(committed)
        else:
            assert rows == committed
