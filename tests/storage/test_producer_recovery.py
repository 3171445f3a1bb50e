"""Idempotent producer state across restarts: snapshots written at rolls and at a clean close, the newest
good one loaded and only the log after it replayed, damaged or missing ones falling back to the scan of
the last two segments, torn writes and killed processes leaving a directory that loads, and retention,
truncation and cleaning keeping the snapshots Kafka keeps."""

from __future__ import annotations

import logging
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from storage_helpers import batch, make_config

import compactlog
from compactlog.errors import OutOfOrderSequenceError
from compactlog.records import BatchInfo
from compactlog.storage import files
from compactlog.storage.log import Log
from compactlog.storage.producer_recovery import snapshot_offsets
from compactlog.storage.producer_snapshot import read_snapshot
from compactlog.storage.producer_state import ProducerStateManager, last_sequence

PIDS = (1000, 2000, 3000)
CFG = {"segment_bytes": 600}
TS = 1_700_000_000_000


def open_log(tmp_path, clock, **cfg) -> Log:
    return Log(tmp_path / "t-0", make_config(**{**CFG, **cfg}), time=clock)


def idem(pid: int, seq: int, n: int = 2, epoch: int = 0, ts: int = TS) -> bytes:
    return batch([f"k{pid}-{seq + i}" for i in range(n)], ts=ts,
                 info=BatchInfo(producer_id=pid, producer_epoch=epoch, base_sequence=seq))


def fill(lg: Log, rounds: int = 12) -> dict[int, tuple[bytes, int]]:
    """Batches of every producer over several segments; each producer's last batch and its first offset."""
    last = {}
    for r in range(rounds):
        for pid in PIDS:
            raw = idem(pid, 2 * r, ts=TS + r)
            last[pid] = (raw, lg.append(raw).first_offset)
    return last


def state_of(ps: ProducerStateManager) -> dict:
    return {pid: (e.epoch, e.batches[-1], e.last_timestamp) for pid, e in ps.producers.items()}


def truth(lg: Log) -> dict:
    """The state a scan of the whole log gives (what every load must agree with)."""
    ps = ProducerStateManager()
    for b in lg.batches():
        if b.producer_id >= 0:
            ps.record(b.producer_id, b.producer_epoch, b.base_sequence,
                      last_sequence(b.base_sequence, b.last_offset_delta), b.base_offset, b.last_offset, b.max_timestamp)
    return state_of(ps)


def check_answers(lg: Log, last: dict[int, tuple[bytes, int]], rounds: int = 12) -> None:
    """A retried last batch is answered with its first offsets; a sequence gap is refused; the next one is taken."""
    for pid, (raw, first) in last.items():
        again = lg.append(raw)
        assert again.duplicate and again.first_offset == first
        with pytest.raises(OutOfOrderSequenceError):
            lg.append(idem(pid, 2 * rounds + 1))
    end = lg.log_end_offset
    assert lg.append(idem(PIDS[0], 2 * rounds)).first_offset == end


def test_snapshots_are_written_at_each_roll_and_at_close(tmp_path, clock):
    lg = open_log(tmp_path, clock)
    fill(lg)
    bases = [s.base_offset for s in lg.segments]
    assert len(bases) >= 4
    before = state_of(lg.producer_state)
    end = lg.log_end_offset
    lg.close()
    offsets = snapshot_offsets(lg.dir)
    assert offsets == bases[1:] + [end]  # the first roll loaded the state, every later one wrote it
    entries = {e.producer_id: e for e in read_snapshot(files.producer_snapshot_file(lg.dir, end))}
    assert {pid: (e.epoch, e.last_offset, e.timestamp, e.coordinator_epoch, e.current_txn_first_offset)
            for pid, e in entries.items()} == {pid: (0, b.last_offset, ts, -1, -1) for pid, (_, b, ts) in before.items()}


def test_a_log_with_no_idempotent_producer_writes_no_snapshot(tmp_path, clock):
    lg = open_log(tmp_path, clock)
    for i in range(40):
        lg.append(batch([f"k{i}", f"j{i}"]))
    assert len(lg.segments) > 2
    lg.close()
    assert snapshot_offsets(lg.dir) == []
    assert not lg.producer_state.loaded


def test_a_reopened_log_with_snapshots_writes_one_at_a_roll_before_any_producer_writes(tmp_path, clock):
    lg = open_log(tmp_path, clock)
    fill(lg)
    lg.close()
    lg = open_log(tmp_path, clock)
    assert not lg.producer_state.loaded
    before = len(lg.segments)
    i = 0
    while len(lg.segments) == before:
        lg.append(batch([f"plain{i}"]))
        i += 1
    assert snapshot_offsets(lg.dir)[-1] == lg.active_segment.base_offset
    assert lg.producer_state.loaded and state_of(lg.producer_state) == truth(lg)
    lg.close()


def test_state_after_a_restart_equals_the_state_before(tmp_path, clock):
    lg = open_log(tmp_path, clock)
    last = fill(lg)
    before = state_of(lg.producer_state)
    end = lg.log_end_offset
    lg.close()
    lg = open_log(tmp_path, clock)
    check_answers(lg, last)  # the first append loads the state
    assert lg.producer_state.loaded_from == end
    lg.close()
    lg = open_log(tmp_path, clock)
    lg.append(last[PIDS[1]][0])
    assert {p: s for p, s in state_of(lg.producer_state).items() if p != PIDS[0]} == \
        {p: s for p, s in before.items() if p != PIDS[0]}
    assert state_of(lg.producer_state) == truth(lg)
    lg.close()


def test_a_restart_reads_only_the_log_after_the_snapshot(tmp_path, clock):
    lg = open_log(tmp_path, clock)
    last = fill(lg)
    end = lg.log_end_offset
    lg.close()
    lg = open_log(tmp_path, clock)
    # The older segments are overwritten with garbage under the open log: a load that read them would
    # fail (their headers no longer check out) or lose producers (their CRCs fail).
    for seg in lg.segments[:-1]:
        with open(seg.log_path, "r+b") as f:
            f.write(b"\xa5" * seg.size)
    check_answers(lg, last)
    assert lg.producer_state.loaded_from == end
    assert lg.producer_state.batches_replayed == 0
    lg.close()


def test_after_a_crash_only_the_batches_after_the_last_roll_are_replayed(tmp_path, clock):
    lg = open_log(tmp_path, clock)
    last = fill(lg)
    active = lg.active_segment
    in_active = len(list(active.batches()))
    lg.flush()  # no close: no snapshot at the log end, as after a crash
    lg = Log(tmp_path / "t-0", make_config(**CFG), time=clock)
    check_answers(lg, last)
    assert lg.producer_state.loaded_from == active.base_offset
    assert lg.producer_state.batches_replayed == in_active
    lg.close()


def _header_damage():
    """Every byte of the header (version, CRC, entry count) with a bit flipped, and a few other ways."""
    for i in range(10):
        yield f"header byte {i}", lambda data, i=i: data[:i] + bytes([data[i] ^ 0x10]) + data[i + 1:]
    yield "entry byte", lambda data: data[:30] + bytes([data[30] ^ 1]) + data[31:]
    yield "truncated", lambda data: data[:-7]
    yield "padded", lambda data: data + b"\0"
    yield "empty", lambda data: b""


@pytest.mark.parametrize("how,damage", list(_header_damage()), ids=[h for h, _ in _header_damage()])
def test_a_damaged_snapshot_is_logged_skipped_and_the_state_stays_right(tmp_path, clock, caplog, how, damage):
    lg = open_log(tmp_path, clock)
    last = fill(lg)
    lg.close()
    newest, older = snapshot_offsets(lg.dir)[-1], snapshot_offsets(lg.dir)[-2]
    path = files.producer_snapshot_file(lg.dir, newest)
    path.write_bytes(damage(path.read_bytes()))
    lg = open_log(tmp_path, clock)
    with caplog.at_level(logging.WARNING, logger="compactlog.storage.producer_recovery"):
        check_answers(lg, last)
    assert str(path) in caplog.text
    assert lg.producer_state.loaded_from == older  # the next older one, and the batches after it
    assert lg.producer_state.batches_replayed > 0
    lg.close()


def test_with_every_snapshot_damaged_or_gone_the_tail_is_scanned(tmp_path, clock, caplog):
    lg = open_log(tmp_path, clock)
    last = fill(lg)
    lg.close()
    offsets = snapshot_offsets(lg.dir)
    for o in offsets[:-1]:
        files.producer_snapshot_file(lg.dir, o).unlink()
    newest = files.producer_snapshot_file(lg.dir, offsets[-1])
    newest.write_bytes(newest.read_bytes()[:3])
    lg = open_log(tmp_path, clock)
    tail = sum(len(list(s.batches())) for s in lg.segments[-2:])
    with caplog.at_level(logging.WARNING, logger="compactlog.storage.producer_recovery"):
        check_answers(lg, last)
    assert str(newest) in caplog.text
    assert lg.producer_state.loaded_from is None
    assert lg.producer_state.batches_replayed == tail  # today's scan of the last two segments
    lg.close()
    assert snapshot_offsets(lg.dir)[-1] == lg.log_end_offset  # the close wrote a good one again


def test_a_torn_snapshot_write_leaves_a_loadable_directory(tmp_path, clock):
    lg = open_log(tmp_path, clock)
    last = fill(lg)
    lg.close()
    newest = snapshot_offsets(lg.dir)[-1]
    good = files.producer_snapshot_file(lg.dir, newest).read_bytes()
    torn = lg.dir / (files.producer_snapshot_file(lg.dir, newest + 5).name + ".tmp")
    torn.write_bytes(good[:17])
    lg = open_log(tmp_path, clock)
    assert not torn.exists()
    check_answers(lg, last)
    assert lg.producer_state.loaded_from == newest
    lg.close()


CHILD = textwrap.dedent("""
    import sys
    from compactlog.records import BatchInfo, build_batch
    from compactlog.storage.log import Log
    from compactlog.storage.log_config import LogConfig
    from compactlog.storage.broker_config import BrokerConfig
    lg = Log(sys.argv[1], LogConfig({"segment.bytes": "300", "flush.messages": "1000000"}, BrokerConfig({})))
    seq, epoch = {}, int(sys.argv[2])  # each run is a new instance of the producers: a new epoch from 0
    i = 0
    while True:
        pid = 7000 + i % 3
        s = seq.get(pid, 0)
        lg.append(build_batch([b"k%d" % i], [b"v" * 40], [1_700_000_000_000 + i],  # recent for the test's clock
                              info=BatchInfo(producer_id=pid, producer_epoch=epoch, base_sequence=s)))
        seq[pid] = s + 1
        i += 1
        if i == 5:
            print("ready", flush=True)
""")


def test_a_process_killed_while_writing_snapshots_leaves_a_loadable_directory(tmp_path, clock):
    rng = random.Random(22)
    d = tmp_path / "t-0"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    for run in range(6):
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(d), str(run)], stdout=subprocess.PIPE, env=env)
        try:
            assert child.stdout.readline() == b"ready\n"
            want = len(snapshot_offsets(d)) + rng.randrange(1, 30)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and child.poll() is None:
                if run % 2 and any(n.endswith(".tmp") for n in os.listdir(d)):
                    break  # odd runs: killed while a snapshot is being written, when the poll sees one
                if not run % 2 and len(snapshot_offsets(d)) >= want:
                    break  # even runs: after a random number of rolls
            assert child.poll() is None, "the writer ended by itself"
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
            child.stdout.close()
        lg = Log(d, make_config(segment_bytes=300), time=clock)
        assert not [n for n in os.listdir(d) if n.endswith(".tmp")]
        expected = truth(lg)
        lg.append(batch([b"x"], info=BatchInfo(producer_id=7000, producer_epoch=run,
                                               base_sequence=expected[7000][1].last_seq + 1)))
        assert lg.producer_state.loaded_from is not None
        with pytest.raises(OutOfOrderSequenceError):
            lg.append(batch([b"y"], info=BatchInfo(producer_id=7001, producer_epoch=run,
                                                   base_sequence=expected[7001][1].last_seq + 2)))
        assert {p: s for p, s in state_of(lg.producer_state).items() if p != 7000} == \
            {p: s for p, s in expected.items() if p != 7000}
        lg.close()


def test_retention_removes_snapshots_below_the_log_start_and_truncation_those_above_the_end(tmp_path, clock):
    lg = open_log(tmp_path, clock)
    last = fill(lg)
    lg.close()
    lg = open_log(tmp_path, clock)
    lg.append(last[PIDS[0]][0])
    third = lg.segments[2].base_offset
    lg.increment_log_start_offset(third)
    lg.delete_old_segments()
    assert lg.log_start_offset == third
    assert min(snapshot_offsets(lg.dir)) >= third
    cut = lg.segments[-2].base_offset + 1
    lg.truncate_to(cut)
    assert max(snapshot_offsets(lg.dir)) <= cut
    lg.append(batch([b"z"], info=BatchInfo(producer_id=PIDS[2], producer_epoch=1, base_sequence=0)))
    assert lg.producer_state.loaded_from == cut - 1  # the snapshot at the last segment's base, kept
    assert state_of(lg.producer_state) == truth(lg)
    lg.close()
    lg = open_log(tmp_path, clock)
    lg.append(batch([b"w"], info=BatchInfo(producer_id=PIDS[2], producer_epoch=1, base_sequence=1)))
    with pytest.raises(OutOfOrderSequenceError):
        lg.append(batch([b"w"], info=BatchInfo(producer_id=PIDS[2], producer_epoch=1, base_sequence=5)))
    lg.close()


def test_cleaning_keeps_the_state_a_restart_loads(tmp_path, clock):
    with compactlog.open(tmp_path, time=clock) as cl:  # the batches' timestamps are recent for this clock
        cl.create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": "600", "min.cleanable.dirty.ratio": "0.01"})
        lg = cl.log("c", 0)
        last = {}
        for r in range(12):
            for pid in PIDS:
                raw = batch(["same"] * 2, ts=TS + r, info=BatchInfo(producer_id=pid, producer_epoch=0, base_sequence=2 * r))
                last[pid] = (raw, lg.append(raw).first_offset)
        cl.clean()
    with compactlog.open(tmp_path, time=clock) as cl:
        lg = cl.log("c", 0)
        for pid, (raw, first) in last.items():
            assert lg.append(raw).first_offset == first
        with pytest.raises(OutOfOrderSequenceError):
            lg.append(batch(["same"], info=BatchInfo(producer_id=PIDS[0], producer_epoch=0, base_sequence=40)))


def test_recovery_that_cuts_the_tail_removes_the_snapshots_above_the_new_end(tmp_path, clock):
    lg = open_log(tmp_path, clock)
    last = fill(lg)
    end, active = lg.log_end_offset, lg.active_segment
    positions = [p for p, _ in active.batches()]
    lg.close()
    assert snapshot_offsets(lg.dir)[-1] == end
    os.truncate(active.log_path, positions[-1] + 30)  # the last batch torn, as after a crash mid-write
    lg = Log(tmp_path / "t-0", make_config(**CFG), time=clock)  # an unclean open: the tail is recovered
    assert lg.log_end_offset < end
    assert snapshot_offsets(lg.dir)[-1] == active.base_offset  # the snapshot at the old end is gone
    cut_pid = next(pid for pid, (_, first) in last.items() if first >= lg.log_end_offset)
    raw, _ = last[cut_pid]
    again = lg.append(raw)  # the lost batch is new again: stored, not answered from the snapshot
    assert not again.duplicate and again.first_offset == lg.log_end_offset - 2
    assert lg.producer_state.loaded_from == active.base_offset
    assert state_of(lg.producer_state) == truth(lg)
    lg.close()


@pytest.mark.parametrize("delta", [1, -1], ids=["one byte longer", "one byte shorter"])
def test_a_damaged_last_batch_kept_after_an_unclean_stop_does_not_break_the_producer_state(tmp_path, clock, delta):
    """The newest snapshot sits at the log end; the last batch, acknowledged and flushed, has its length
    changed by a byte and is kept in place (below the recovery point). Loading the state must replay
    nothing and must not trip over the damage: every read of the LSO went through it (a fetch failed)."""
    lg = open_log(tmp_path, clock)
    last = fill(lg)
    end = lg.log_end_offset
    position = lg.active_segment.translate_offset(end - 1)[0]
    path = lg.active_segment.log_path
    lg.close()
    assert snapshot_offsets(lg.dir)[-1] == end
    with open(path, "r+b") as f:
        f.seek(position + 11)
        low = f.read(1)[0]
        f.seek(position + 11)
        f.write(bytes([low + delta]))
    lg = Log(tmp_path / "t-0", make_config(**CFG), time=clock, recovery_point=end)  # unclean
    assert lg.damage_on_load and lg.log_end_offset == end
    assert lg.last_stable_offset == end
    assert lg.producer_state.loaded_from == end and lg.producer_state.batches_replayed == 0
    lg.close()


def test_damage_holding_the_snapshot_offset_is_walked_past_and_the_batches_after_it_replayed(tmp_path, clock):
    """The batch at the newest snapshot's offset is damaged (its base offset flipped down, onto the batch
    before it): the replay cannot find its start by offset, so it walks the segment, past the damage,
    judging what follows by the last sound batch, and replays the batches after it."""
    lg = open_log(tmp_path, clock, segment_bytes=100_000)
    fill(lg, rounds=3)
    lg.close()
    lg = open_log(tmp_path, clock, segment_bytes=100_000)
    snap = snapshot_offsets(lg.dir)[-1]
    assert snap == lg.log_end_offset
    lg.append(idem(PIDS[0], 6))  # at the snapshot's offset: to be damaged
    retry, first = idem(PIDS[1], 6), lg.log_end_offset
    lg.append(retry)
    lg.append(idem(PIDS[2], 6))  # (recovery trusts a last batch after damage only if it starts where expected)
    lg.flush()
    end = lg.log_end_offset
    position = lg.active_segment.translate_offset(snap)[0]
    path = lg.active_segment.log_path
    del lg  # killed: no snapshot at the new end
    with open(path, "r+b") as f:
        f.seek(position + 7)
        low = f.read(1)[0]
        f.seek(position + 7)
        f.write(bytes([low ^ 0x02]))
    lg = Log(tmp_path / "t-0", make_config(segment_bytes=100_000), time=clock, recovery_point=end)
    assert lg.damage_on_load and lg.log_end_offset == end
    assert lg.last_stable_offset == end
    again = lg.append(retry)  # the batch after the damage was replayed: its retry is known
    assert again.duplicate and again.first_offset == first
    assert lg.producer_state.loaded_from == snap
    lg.close()
