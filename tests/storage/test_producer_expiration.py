"""Idempotent producers expire as Kafka's do: one whose last batch is ``producer.id.expiration.ms`` older
than the storage's clock is forgotten by the log manager's periodic check and when the state is loaded,
snapshots written afterwards leave it out, and if it comes back it is a new producer. So the producers
kept stay bounded by the setting, not by how many ever wrote. Time is the injected clock throughout."""

from __future__ import annotations

import time

import pytest
from storage_helpers import batch

from compactlog.errors import OutOfOrderSequenceError
from compactlog.records import BatchInfo
from compactlog.server.server_config import SERVER_CONFIGS, ServerConfig
from compactlog.storage import files
from compactlog.storage.broker_config import BROKER_CONFIGS, BrokerConfig
from compactlog.storage.manager import LogManager
from compactlog.storage.producer_recovery import snapshot_offsets
from compactlog.storage.producer_snapshot import read_snapshot

DAY = 86_400_000
CHECK = 600_000


def idem(pid: int, seq: int, ts: int, n: int = 1, epoch: int = 0) -> bytes:
    return batch([f"k{pid}-{seq + i}" for i in range(n)], ts=ts,
                 info=BatchInfo(producer_id=pid, producer_epoch=epoch, base_sequence=seq))


def open_manager(tmp_path, clock, **props) -> LogManager:
    return LogManager(tmp_path / "data", BrokerConfig(props), time=clock)


def snapshot_pids(lg) -> set[int]:
    newest = snapshot_offsets(lg.dir)[-1]
    return {e.producer_id for e in read_snapshot(files.producer_snapshot_file(lg.dir, newest))}


def test_the_settings_are_the_storages_with_kafkas_defaults_and_shown_once_by_the_server():
    for name, default in (("producer.id.expiration.ms", DAY), ("producer.id.expiration.check.interval.ms", CHECK)):
        assert BROKER_CONFIGS[name].default == default and name not in SERVER_CONFIGS
        assert list(ServerConfig.TABLE).count(name) == 1
    with pytest.raises(Exception, match="producer.id.expiration.ms"):
        BrokerConfig({"producer.id.expiration.ms": "0"})


def test_housekeeping_forgets_a_producer_idle_past_the_expiration_and_keeps_a_recent_one(tmp_path, clock):
    mgr = open_manager(tmp_path, clock)
    mgr.create_topic("t", 1)
    lg = mgr.get_log("t", 0)
    assert lg.producer_state.expiration_ms == DAY  # the setting reaches each partition's state
    start = clock.milliseconds()
    lg.append(idem(1, 0, start))
    clock.advance(DAY - 2 * CHECK)
    lg.append(idem(2, 0, clock.milliseconds()))
    clock.advance(CHECK)
    mgr.housekeep()  # producer 1 idle for a day less one check interval: kept
    assert set(lg.producer_state.producers) == {1, 2}
    clock.advance(CHECK - 1)
    mgr.housekeep()  # not due yet (a check ran an interval minus 1 ms ago), though producer 1 is now expired
    assert set(lg.producer_state.producers) == {1, 2}
    clock.advance(1)
    mgr.housekeep()  # due; producer 1 idle for exactly the expiration: gone, as Kafka's >= has it
    assert set(lg.producer_state.producers) == {2}
    lg.roll()  # a snapshot written after the expiry does not hold it
    assert snapshot_pids(lg) == {2}
    mgr.close()


def test_the_background_thread_runs_the_check(tmp_path, clock):
    mgr = open_manager(tmp_path, clock, **{"producer.id.expiration.check.interval.ms": "1000"})
    mgr.create_topic("t", 1)
    lg = mgr.get_log("t", 0)
    lg.append(idem(1, 0, clock.milliseconds()))
    mgr.start_background()
    try:
        clock.advance(DAY)
        deadline = time.monotonic() + 15
        while lg.producer_state.producers and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not lg.producer_state.producers
    finally:
        mgr.close()


@pytest.mark.parametrize("with_snapshot", [True, False])
def test_a_restart_drops_the_expired_producers(tmp_path, clock, with_snapshot):
    mgr = open_manager(tmp_path, clock)
    mgr.create_topic("t", 1)
    lg = mgr.get_log("t", 0)
    lg.append(idem(1, 0, clock.milliseconds(), n=3))
    clock.advance(DAY // 2)
    lg.append(idem(2, 0, clock.milliseconds(), n=3))
    mgr.close()
    assert snapshot_pids(lg) == {1, 2}  # the clean close's snapshot holds both
    if not with_snapshot:  # the state is then rebuilt from the log's batches
        for offset in snapshot_offsets(lg.dir):
            files.producer_snapshot_file(lg.dir, offset).unlink()
    clock.advance(DAY // 2)
    mgr = open_manager(tmp_path, clock)
    lg = mgr.get_log("t", 0)
    with pytest.raises(OutOfOrderSequenceError):  # the recent producer is remembered
        lg.append(idem(2, 9, clock.milliseconds()))
    assert set(lg.producer_state.producers) == {2}
    assert lg.producer_state.loaded_from == (lg.log_end_offset if with_snapshot else None)
    mgr.close()
    assert snapshot_pids(lg) == {2}


def test_an_expired_producers_retry_is_stored_as_a_new_producers_batch(tmp_path, clock):
    mgr = open_manager(tmp_path, clock)
    mgr.create_topic("t", 1)
    lg = mgr.get_log("t", 0)
    first = idem(1, 0, clock.milliseconds(), n=2)
    stored = lg.append(first)
    assert lg.append(first).duplicate  # while it is known, a retry is answered with the first attempt
    clock.advance(DAY)
    mgr.housekeep()
    assert 1 not in lg.producer_state.producers
    again = lg.append(first)  # the same batch once the producer is forgotten: accepted at any sequence
    assert not again.duplicate and again.first_offset == stored.last_offset + 1
    assert lg.append(idem(1, 2, clock.milliseconds())).first_offset == again.last_offset + 1
    with pytest.raises(OutOfOrderSequenceError):  # and from then on its sequence is checked again
        lg.append(idem(1, 7, clock.milliseconds()))
    mgr.close()


def test_the_producers_kept_stay_bounded_while_short_lived_producers_write_for_two_days(tmp_path, clock):
    producers, span = 10_000, 2 * DAY
    step = span // producers
    mgr = open_manager(tmp_path, clock)
    mgr.create_topic("t", 1, {"segment.bytes": "65536"})
    lg = mgr.get_log("t", 0)
    most = 0
    kept_after_a_day = None
    for pid in range(producers):
        lg.append(idem(pid, 0, clock.milliseconds()))  # each writes once, then is never heard of again
        clock.advance(step)
        mgr.housekeep()
        most = max(most, len(lg.producer_state.producers))
        if pid == producers // 2:
            kept_after_a_day = len(lg.producer_state.producers)
    # Kept: the producers of the last expiration, plus those of one check interval not yet checked.
    bound = (DAY + CHECK) // step + 1
    assert most <= bound < producers // 2 + 100
    assert len(lg.producer_state.producers) <= kept_after_a_day + (CHECK // step + 1)  # no growth on day two
    snapshots = snapshot_offsets(lg.dir)
    assert len(snapshots) > 10  # segments rolled all along, each writing a snapshot
    for offset in snapshots:
        assert len(read_snapshot(files.producer_snapshot_file(lg.dir, offset))) <= bound
    mgr.close()
