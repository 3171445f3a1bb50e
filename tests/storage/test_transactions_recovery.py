"""Transactions across restarts: a clean close and a SIGKILL of the writing process both leave the last
stable offset, the open transactions and the aborted transactions as they were; a damaged or missing
``.txnindex`` is rebuilt from the markers by recovery; truncation forgets what it cuts."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from storage_helpers import make_config

import compactlog
from compactlog.reading import READ_COMMITTED
from compactlog.records import BatchInfo, build_batch
from compactlog.storage import files
from compactlog.storage.log import Log
from compactlog.storage.producer_recovery import snapshot_offsets
from compactlog.storage.producer_state import ProducerStateManager
from compactlog.storage.index import CorruptIndexError
from compactlog.storage.transaction_index import AbortedTxn, TransactionIndex
from compactlog.storage.transactions import aborted_entry, apply_stored

TS = 1_700_000_000_000
CFG = {"segment_bytes": 700}


def tx(pid: int, seq: int, n: int, step: int) -> bytes:
    return build_batch([b"p%d-%d-%d" % (pid, step, i) for i in range(n)], [b"v" * 20] * n, [TS + step] * n,
                       info=BatchInfo(producer_id=pid, producer_epoch=0, base_sequence=seq, is_transactional=True))


def drive(part, seed: int, steps: int, pids: int = 0) -> None:
    """Interleaved transactions of four producers, ids ``pids`` + 1..4 (``part``: a Log or a Partition)."""
    rnd = random.Random(seed)
    seqs = {pids + p: 0 for p in range(1, 5)}
    open_: set[int] = set()
    for step in range(steps):
        pid = pids + rnd.randrange(1, 5)
        if pid in open_ and rnd.random() < 0.3:
            part.write_txn_marker(pid, 0, rnd.random() < 0.5, 1)
            open_.discard(pid)
        else:
            n = rnd.randrange(1, 4)
            part.append(tx(pid, seqs[pid], n, step))
            seqs[pid] += n
            open_.add(pid)


def facts(part) -> dict:
    """What must survive a restart, as plain data."""
    end = part.log_end_offset
    return {
        "end": end,
        "lso": part.last_stable_offset,
        "open": [(t.producer_id, t.producer_epoch, t.first_offset) for t in part.open_transactions()],
        "aborted": [list(t) for t in part.aborted_transactions(0, end)],
        "producers": [(p.producer_id, p.producer_epoch, p.last_sequence, p.coordinator_epoch, p.current_txn_start_offset)
                      for p in part.producers()],
    }


def truth(lg: Log) -> tuple[dict, dict[int, list[AbortedTxn]]]:
    """The open transactions and each segment's .txnindex entries a replay of the whole log gives."""
    state = ProducerStateManager()
    index: dict[int, list[AbortedTxn]] = {s.base_offset: [] for s in lg.segments}
    for b in lg.batches():
        entry = aborted_entry(apply_stored(state, b))
        if entry is not None:
            index[lg.segment_for(b.base_offset).base_offset].append(entry)
    return {"lso": state.last_stable_offset(lg.high_watermark, lg.log_start_offset),
            "open": [(t.producer_id, t.producer_epoch, t.first_offset) for t in state.open_transactions()]}, index


def stored_index(lg: Log) -> dict[int, list[AbortedTxn]]:
    return {s.base_offset: s.txn_index.all_aborted_txns() for s in lg.segments}


def jsonable(d: dict) -> dict:
    return json.loads(json.dumps(d))


def test_a_clean_close_and_reopen_keeps_the_transactions(tmp_path, clock):
    lg = Log(tmp_path / "t-0", make_config(**CFG), time=clock)
    drive(lg, 1, 150)
    assert len(lg.segments) > 3 and lg.open_transactions()
    before, index = facts(lg), stored_index(lg)
    assert any(index.values())
    lg.close()
    lg = Log(tmp_path / "t-0", make_config(**CFG), time=clock, clean_shutdown=True, recovery_point=before["end"])
    assert lg.producer_state.loaded is False  # nothing recovered: the state loads when first asked
    assert facts(lg) == before and stored_index(lg) == index
    assert lg.producer_state.loaded_from == before["end"]  # the close's snapshot, nothing replayed
    lg.close()


@pytest.mark.parametrize("damage", ["torn", "version", "deleted", "first above last", "lso above last", "out of order"])
def test_recovery_rebuilds_a_damaged_or_missing_txnindex(tmp_path, clock, damage):
    lg = Log(tmp_path / "t-0", make_config(**CFG), time=clock)
    drive(lg, 2, 150)
    before, index = facts(lg), stored_index(lg)
    lg.close()
    victim = next(b for b, entries in index.items() if len(entries) > (damage == "out of order"))
    path = files.segment_file(tmp_path / "t-0", victim, files.TXN_INDEX_SUFFIX)
    first = index[victim][0]
    flipped = {"first above last": AbortedTxn(first.producer_id, first.last_offset + 1, first.last_offset, first.last_stable_offset),
               "lso above last": AbortedTxn(first.producer_id, first.first_offset, first.last_offset, first.last_offset + 2),
               "out of order": index[victim][-1]}.get(damage)
    if flipped is not None:  # offsets no marker can have written: a reader would drop committed records or keep aborted ones
        with open(path, "r+b") as f:
            f.write(flipped.to_bytes())
        with pytest.raises(CorruptIndexError, match=str(path)):
            TransactionIndex(path, victim).sanity_check()
    elif damage == "torn":
        with open(path, "ab") as f:
            f.write(b"\x00" * 10)
    elif damage == "version":
        with open(path, "r+b") as f:
            f.write(b"\x00\x07")
    else:
        path.unlink()
    if damage == "deleted":  # a missing index is only noticed where recovery runs: after an unclean shutdown
        lg = Log(tmp_path / "t-0", make_config(**CFG), time=clock)
    else:  # a damaged one fails its check at any open
        lg = Log(tmp_path / "t-0", make_config(**CFG), time=clock, clean_shutdown=True, recovery_point=before["end"])
    assert stored_index(lg) == index
    assert facts(lg) == before
    lg.close()


def test_an_unclean_open_rebuilds_every_index_and_the_state_from_the_log(tmp_path, clock):
    lg = Log(tmp_path / "t-0", make_config(**CFG), time=clock)
    drive(lg, 3, 200)
    before, index = facts(lg), stored_index(lg)
    lg.close()
    for offset in snapshot_offsets(tmp_path / "t-0"):  # and with no snapshot: the rebuild reads the log from its start
        files.producer_snapshot_file(tmp_path / "t-0", offset).unlink()
    lg = Log(tmp_path / "t-0", make_config(**CFG), time=clock)  # recovery point 0: every segment recovered
    assert lg.producer_state.loaded  # the rebuild of the indexes left the state at the log end
    assert stored_index(lg) == index and facts(lg) == before
    want, _ = truth(lg)
    assert want["lso"] == before["lso"] and want["open"] == before["open"]
    lg.close()


def test_truncation_and_reopen(tmp_path, clock):
    lg = Log(tmp_path / "t-0", make_config(**CFG), time=clock)
    drive(lg, 4, 150)
    cut = next(e.last_offset for entries in stored_index(lg).values() for e in entries[1:])  # past one abort
    lg.truncate_to(cut)
    after = facts(lg)
    want, index = truth(lg)
    assert (after["lso"], after["open"]) == (want["lso"], want["open"]) and stored_index(lg) == index
    assert all(e.last_offset < cut for entries in index.values() for e in entries)
    lg.close()
    lg = Log(tmp_path / "t-0", make_config(**CFG), time=clock, clean_shutdown=True, recovery_point=after["end"])
    assert facts(lg) == after and stored_index(lg) == index
    lg.close()


CHILD = textwrap.dedent("""
    import json, sys, time
    sys.path.insert(0, sys.argv[3])
    import compactlog
    from test_transactions_recovery import drive, facts
    cl = compactlog.open(sys.argv[1])
    if "t" not in cl.list_topics():
        cl.create_topic("t", 1, {"segment.bytes": "700"})
    part = cl.partition("t", 0)
    seed = int(sys.argv[2])
    drive(part, seed, 120, pids=100 * seed)
    print(json.dumps(facts(part)), flush=True)
    if sys.argv[4] == "wait":
        time.sleep(600)
    drive(part, seed + 1000, 100000, pids=100 * seed + 50)
""")


def run_child(data, seed: int, mode: str):
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.Popen([sys.executable, "-c", CHILD, str(data), str(seed), os.path.dirname(__file__), mode],
                            stdout=subprocess.PIPE, env=env)


def reopened_facts(data) -> tuple[dict, list, list]:
    with compactlog.open(data) as cl:
        part = cl.partition("t", 0)
        got = facts(part)
        committed = [r.offset for r in part.records(isolation=READ_COMMITTED)]
        lg = cl.log("t", 0)
        want, index = truth(lg)
        assert stored_index(lg) == index
        assert (got["lso"], [tuple(o) for o in got["open"]]) == (want["lso"], want["open"])
        return got, committed, [r.offset for r in part.records(isolation=READ_COMMITTED)]


def test_sigkill_after_the_writes_keeps_the_transactions(tmp_path):
    data = tmp_path / "data"
    child = run_child(data, 5, "wait")
    try:
        before = json.loads(child.stdout.readline())
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    got, committed, again = reopened_facts(data)
    assert jsonable(got) == jsonable(before) and committed == again


def test_sigkill_while_writing_leaves_transactions_a_replay_of_the_log_agrees_with(tmp_path):
    data = tmp_path / "data"
    for run in range(3):
        child = run_child(data, 10 + run, "go")
        try:
            assert child.stdout.readline()
            time.sleep(random.Random(run).uniform(0.05, 0.3))  # killed at an arbitrary point of the writes
            assert child.poll() is None, "the writer ended by itself"
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
        reopened_facts(data)  # (asserts the rebuilt state and indexes against a replay of the whole log)


def test_damage_kept_in_a_segment_does_not_stop_the_rebuild_of_its_index(tmp_path, clock):
    lg = Log(tmp_path / "t-0", make_config(**CFG), time=clock)
    lg.append(tx(1, 0, 2, 0))  # 0-1
    plain = lg.append(build_batch([b"plain"], [b"x" * 30], [TS]))  # 2: to be damaged
    lg.write_txn_marker(1, 0, False, 1)  # 3
    while len(lg.segments) < 2:
        lg.append(build_batch([b"more"], [b"y" * 100], [TS]))
    index = stored_index(lg)
    assert index[0] == [AbortedTxn(1, 0, 3, 4)]
    position = lg.segments[0].translate_offset(plain.first_offset)[0]
    lg.close()
    with open(files.segment_file(tmp_path / "t-0", 0, files.LOG_SUFFIX), "r+b") as f:
        f.seek(position + 4)
        f.write(b"\x7f")  # the plain batch's base offset flipped far up: damage the header walk stops at, kept
    lg = Log(tmp_path / "t-0", make_config(**CFG), time=clock)  # unclean: every segment recovered
    assert lg.damage_on_load and stored_index(lg) == index
    assert lg.last_stable_offset == lg.log_end_offset and lg.open_transactions() == []
    lg.close()


def test_an_open_transaction_outlives_the_retention_of_its_first_batches_across_a_restart(tmp_path, clock):
    lg = Log(tmp_path / "t-0", make_config(segment_bytes=700, file_delete_delay_ms=0), time=clock)
    lg.append(tx(1, 0, 2, 0))  # opens at 0
    seq = 2
    while len(lg.segments) < 4:
        lg.append(tx(1, seq, 2, 1))
        seq += 2
    lg.increment_log_start_offset(lg.segments[2].base_offset)
    assert lg.delete_old_segments() == 2
    start = lg.log_start_offset
    assert lg.last_stable_offset == start and lg.open_transactions()[0].first_offset == 0
    lg.close()
    lg = Log(tmp_path / "t-0", make_config(segment_bytes=700), time=clock, clean_shutdown=True,
             recovery_point=lg.log_end_offset, log_start_offset=start)
    assert lg.last_stable_offset == start and [t.first_offset for t in lg.open_transactions()] == [0]
    marker = lg.write_txn_marker(1, 0, False, 0)
    assert lg.aborted_transactions(start, marker + 1) == [(1, 0)] and lg.last_stable_offset == marker + 1
    lg.close()


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "unclean"])
def test_a_damaged_first_batch_of_a_segment_does_not_hide_the_commit_after_it(tmp_path, clock, clean):
    """The active segment opens with the second batch of a committed transaction, and that batch's base
    offset is flipped one up (the CRC does not cover it). The replay of the producer state must judge the
    batches after it by the segment's base offset, as recovery does: else the shifted batch passes, the
    commit marker after it looks out of order and is dropped, and the transaction stays open for ever
    (the LSO stuck at its start, its records hidden from read_committed readers)."""
    lg = Log(tmp_path / "t-0", make_config(**CFG), time=clock)
    i = 0
    while len(lg.segments) < 2 or lg.active_segment.size > 0:  # fill up to a roll, with no batch after it
        lg.append(build_batch([b"k%d" % i], [b"x" * 40], [TS]))
        i += 1
        if len(lg.segments) == 2 and lg.active_segment.size > 0:
            lg.roll()
            break
    first = lg.append(tx(1, 0, 2, 0)).first_offset  # the transaction's first batch, in the old segment
    lg.roll()
    second = lg.append(tx(1, 2, 2, 1)).first_offset  # the active segment's first batch: to be damaged
    marker = lg.write_txn_marker(1, 0, True, 1)
    still_open = lg.append(tx(1, 4, 2, 2)).first_offset  # the producer's next transaction, left open
    end = lg.log_end_offset
    path = lg.active_segment.log_path
    assert lg.active_segment.base_offset == second
    if clean:
        lg.close()
    else:
        lg.flush()
        del lg
    with open(path, "r+b") as f:
        f.write((second + 1).to_bytes(8, "big"))
    lg = Log(tmp_path / "t-0", make_config(**CFG), time=clock, clean_shutdown=clean, recovery_point=end)
    assert lg.last_stable_offset == still_open, "the committed transaction is taken for open"
    assert [t.first_offset for t in lg.open_transactions()] == [still_open]
    lg.write_txn_marker(1, 0, False, 1)  # the open one aborted: its entry must not reach back
    assert lg.aborted_transactions(first, lg.log_end_offset) == [(1, still_open)]
    assert marker == second + 2
    lg.close()


# (field, byte within the 34-byte entry, new value of that byte as a function of the old one)
ENTRY_FLIPS = [
    ("producer id", 9, lambda b: b ^ 0x01),
    ("last offset", 25, lambda b: b ^ 0x01),
    ("first offset onto another producer's batch", 17, None),
    ("first offset back into the producer's committed transaction", 17, "back"),
]


@pytest.mark.parametrize("field,byte,change", ENTRY_FLIPS, ids=[f[0] for f in ENTRY_FLIPS])
@pytest.mark.parametrize("clean", [True, False], ids=["clean", "unclean"])
def test_a_txnindex_entry_that_disagrees_with_the_log_is_rebuilt(tmp_path, clock, field, byte, change, clean):
    """The .txnindex has no checksum: an entry whose producer id or offsets were changed would hand
    aborted records to read_committed readers, or hide committed ones, with no error. At load each
    entry is held against the log (its ABORT marker, its first batch) and the index rebuilt if one
    disagrees."""
    lg = Log(tmp_path / "t-0", make_config(segment_bytes=100_000), time=clock)
    lg.append(tx(1, 0, 2, 0))  # 0-1: producer 1, committed
    lg.write_txn_marker(1, 0, True, 1)  # 2: commit
    lg.append(tx(1, 2, 2, 0))  # 3-4: producer 1, to be aborted
    other = lg.append(tx(2, 0, 2, 0)).first_offset  # 5-6: producer 2, committed
    lg.write_txn_marker(1, 0, False, 1)  # 7: abort
    lg.write_txn_marker(2, 0, True, 1)  # 8: commit
    lg.append(build_batch([b"plain"], [b"x"], [TS]))
    want = [AbortedTxn(1, 3, 7, 5)]
    assert stored_index(lg)[0] == want
    lg.roll()  # the segment with the entry is closed: a clean load does not recover it
    lg.append(build_batch([b"more"], [b"y"], [TS]))
    end = lg.log_end_offset
    path = files.segment_file(tmp_path / "t-0", 0, files.TXN_INDEX_SUFFIX)
    if clean:
        lg.close()
    else:
        lg.flush()
        del lg
    data = bytearray(path.read_bytes())
    if change is None:
        data[10:18] = other.to_bytes(8, "big")  # the first offset moved onto producer 2's batch
    elif change == "back":
        data[10:18] = (0).to_bytes(8, "big")  # onto the producer's own committed batch, before its commit
    else:
        data[byte] = change(data[byte])
    path.write_bytes(bytes(data))
    lg = Log(tmp_path / "t-0", make_config(segment_bytes=100_000), time=clock, clean_shutdown=clean,
             recovery_point=end)
    assert stored_index(lg)[0] == want
    assert lg.aborted_transactions(0, end) == [(1, 3)]  # what read_committed readers leave out
    lg.close()
