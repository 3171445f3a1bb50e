"""read_committed through the one read path: reads end at the last stable offset and skip the data of
aborted transactions, for the owner's log and for a snapshot of the directory (as another process
reads it), against a model of what was committed."""

from __future__ import annotations

import random

import pytest

from compactlog.clock import MockTime
from compactlog.reading import READ_COMMITTED, read_batches, read_records
from compactlog.records import BatchInfo, build_batch
from compactlog.storage.broker_config import BrokerConfig
from compactlog.storage.log import Log
from compactlog.storage.log_config import LogConfig
from compactlog.storage.snapshot import PartitionSnapshot


def make_config(**overrides) -> LogConfig:
    return LogConfig({k.replace("_", "."): str(v) for k, v in overrides.items()}, BrokerConfig({}))


def batch(keys: list[str], info: BatchInfo = BatchInfo()) -> bytes:
    return build_batch([k.encode() for k in keys], [b"v" for _ in keys], [1_700_000_000_000] * len(keys), info=info)


def tx(pid: int, seq: int, keys: list[str], epoch: int = 0) -> bytes:
    return batch(keys, info=BatchInfo(producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True))


def scenario(lg: Log, seed: int, steps: int = 120) -> dict[int, bytes]:
    """Interleaved transactions of four producers and plain appends; the committed records by offset
    (a model: what a read_committed reader must see below the LSO)."""
    rnd = random.Random(seed)
    seqs = {p: 0 for p in range(1, 5)}
    open_: dict[int, list[tuple[int, bytes]]] = {}
    committed: dict[int, bytes] = {}
    for step in range(steps):
        pid = rnd.randrange(1, 6)
        if pid == 5:  # a plain, non-transactional append: decided at once
            off = lg.append(batch([f"plain-{step}"])).first_offset
            committed[off] = f"plain-{step}".encode()
            continue
        if pid in open_ and rnd.random() < 0.3:
            commit = rnd.random() < 0.5
            lg.write_txn_marker(pid, 0, commit, 0)
            if commit:
                committed.update(open_[pid])
            del open_[pid]
            continue
        keys = [f"p{pid}-{step}-{i}" for i in range(rnd.randrange(1, 4))]
        off = lg.append(tx(pid, seqs[pid], keys)).first_offset
        seqs[pid] += len(keys)
        open_.setdefault(pid, []).extend((off + i, k.encode()) for i, k in enumerate(keys))
    return committed


def expected(committed: dict[int, bytes], lso: int, start: int = 0) -> list[tuple[int, bytes]]:
    return sorted((o, k) for o, k in committed.items() if start <= o < lso)


@pytest.mark.parametrize("seed", range(6))
def test_read_committed_reads_exactly_the_committed_records_in_order(tmp_path, seed):
    lg = Log(tmp_path / "t-0", make_config(segment_bytes=900), time=MockTime())
    committed = scenario(lg, seed)
    lso = lg.last_stable_offset
    assert len(lg.segments) > 2  # transactions span rolls
    got = [(r.offset, r.key) for r in read_records(lg, "t", 0, 0, isolation=READ_COMMITTED)]
    assert got == expected(committed, lso)
    # from any start, the same rule
    for start in random.Random(seed).sample(range(lso + 1), min(10, lso + 1)):
        got = [(r.offset, r.key) for r in read_records(lg, "t", 0, start, isolation=READ_COMMITTED)]
        assert got == expected(committed, lso, start)
    # the same through a snapshot of the directory, as another process reads it
    with PartitionSnapshot.of_directory(lg.dir) as snap:
        assert snap.last_stable_offset == lso
        assert [t.first_offset for t in snap.open_transactions()] == [t.first_offset for t in lg.open_transactions()]
        assert snap.aborted_transactions(0, lg.log_end_offset) == lg.aborted_transactions(0, lg.log_end_offset)
        got = [(r.offset, r.key) for r in read_records(snap, "t", 0, 0, isolation=READ_COMMITTED)]
        assert got == expected(committed, lso)
    lg.close()


def test_control_batches_stay_in_the_stream_and_are_no_records(tmp_path):
    lg = Log(tmp_path / "t-0", make_config(), time=MockTime())
    lg.append(tx(1, 0, ["a", "b"]))  # 0-1 aborted
    lg.append(tx(2, 0, ["c"]))  # 2 committed
    lg.write_txn_marker(1, 0, False, 0)  # 3
    lg.write_txn_marker(2, 0, True, 0)  # 4
    lg.append(tx(1, 2, ["d"]))  # 5: the same producer's next transaction, committed
    lg.write_txn_marker(1, 0, True, 0)  # 6
    lg.append(tx(3, 0, ["e"]))  # 7: open
    lg.append(batch(["f"]))  # 8
    assert lg.last_stable_offset == 7
    kinds = [(b.base_offset, b.is_control) for b in read_batches(lg, 0, isolation=READ_COMMITTED)]
    assert kinds == [(2, False), (3, True), (4, True), (5, False), (6, True)]
    assert [r.key for r in read_records(lg, "t", 0, 0, isolation=READ_COMMITTED)] == [b"c", b"d"]
    assert [r.key for r in read_records(lg, "t", 0, 0)] == [b"a", b"b", b"c", b"d", b"e", b"f"]
    assert list(read_batches(lg, 7, isolation=READ_COMMITTED)) == []  # at the LSO: nothing yet
    lg.write_txn_marker(3, 0, False, 0)
    assert [r.key for r in read_records(lg, "t", 0, 0, isolation=READ_COMMITTED)] == [b"c", b"d", b"f"]
    lg.close()


def test_a_snapshot_sees_the_lso_it_was_opened_with(tmp_path):
    lg = Log(tmp_path / "t-0", make_config(), time=MockTime())
    lg.append(tx(1, 0, ["a"]))
    with PartitionSnapshot.of_directory(lg.dir) as snap:
        assert snap.last_stable_offset == 0
        lg.write_txn_marker(1, 0, True, 0)
        assert snap.last_stable_offset == 0  # one load per snapshot
        assert list(read_records(snap, "t", 0, 0, isolation=READ_COMMITTED)) == []
    with PartitionSnapshot.of_directory(lg.dir) as snap:
        assert snap.last_stable_offset == 2
        assert [r.key for r in read_records(snap, "t", 0, 0, isolation=READ_COMMITTED)] == [b"a"]
    lg.close()


def test_a_later_snapshot_carries_on_from_the_state_an_earlier_one_loaded(tmp_path):
    lg = Log(tmp_path / "t-0", make_config(segment_bytes=100_000), time=MockTime())
    for i in range(50):
        lg.append(tx(1, 2 * i, ["a", "b"]))
    with PartitionSnapshot.of_directory(lg.dir) as snap:
        assert snap.last_stable_offset == 0
        assert snap._producers[0].batches_replayed == 50  # no producer snapshot yet: the log's batches
    lg.write_txn_marker(1, 0, True, 0)
    lg.append(tx(2, 0, ["c"]))
    with PartitionSnapshot.of_directory(lg.dir) as snap:
        assert snap.last_stable_offset == 101
        assert snap._producers[0].batches_replayed == 2  # only what was appended since
    # the owner cuts the log and writes other batches: the remembered state no longer applies
    lg.truncate_to(100)
    lg.write_txn_marker(1, 0, False, 0)
    lg.append(batch(["d"]))
    with PartitionSnapshot.of_directory(lg.dir) as snap:
        assert snap.last_stable_offset == 102 == lg.last_stable_offset
        assert snap.aborted_transactions(0, 102) == [(1, 0)]
        assert [r.key for r in read_records(snap, "t", 0, 0, isolation=READ_COMMITTED)] == [b"d"]
    lg.close()
