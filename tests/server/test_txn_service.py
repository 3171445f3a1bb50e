"""The transaction coordinator in-process: a real Broker over a real data directory, the service's methods
called as the wire handlers call them, ``__transaction_state`` read back through the embedded API, the
clock a ``MockTime`` the test moves. Markers are recorded by a stand-in for the partition's marker write
(the storage's own is tested with the storage); a restart is a new Broker on the same directory."""

from __future__ import annotations

import asyncio
from pathlib import Path

from compactlog.clock import MockTime
from compactlog.server import apis
from compactlog.server.broker import Broker
from compactlog.server.server_config import ServerConfig
from compactlog.transactions.coordinator import TRANSACTION_STATE_TOPIC
from compactlog.transactions.log_records import decode_key, decode_value
from compactlog.transactions.state import (
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    EMPTY,
    ONGOING,
    PREPARE_COMMIT,
)

CONFIG = {"transaction.state.log.num.partitions": "3", "offsets.topic.num.partitions": "2",
          "transaction.max.timeout.ms": "60000"}
CONCURRENT, FENCED, MAPPING, TXN_STATE, TIMEOUT = 51, 90, 49, 48, 50
STORAGE_ERROR = 56


class Markers:
    """Records each marker write; ``fail`` makes the next writes answer a storage error."""

    def __init__(self) -> None:
        self.written: list[tuple] = []
        self.fail = 0

    async def __call__(self, broker, topic, partition, pid, epoch, commit, coordinator_epoch) -> int:
        if self.fail:
            self.fail -= 1
            return STORAGE_ERROR
        self.written.append((topic, partition, pid, epoch, "COMMIT" if commit else "ABORT"))
        return 0


def run(data_dir: Path, scenario, time: MockTime | None = None, markers: Markers | None = None, **config) -> None:
    async def main() -> None:
        broker = apis.install(Broker(data_dir, ServerConfig({**CONFIG, **config}), host="127.0.0.1", port=9092,
                                     background=False))
        try:
            txn = broker.extras["transactions"]
            txn.time = time or MockTime()
            txn.write_marker = markers or Markers()
            await broker.start()
            while txn.loading:
                await asyncio.sleep(0.01)
            for name in ("t", "u"):
                if not broker.cl.has_topic(name):
                    broker.cl.create_topic(name, 2)
            await scenario(broker, txn)
        finally:
            await broker.stop()
            broker.close()
    asyncio.run(asyncio.wait_for(main(), 30))


def stored(broker, transactional_id: str) -> list:
    """Every state stored for the id in ``__transaction_state``, in order (None: a tombstone)."""
    out = []
    cl = broker.cl
    for p in range(cl.partitions_for(TRANSACTION_STATE_TOPIC)):
        for r in cl.partition(TRANSACTION_STATE_TOPIC, p).records():
            if decode_key(r.key) == transactional_id:
                v = decode_value(r.value)
                out.append(None if v is None else (v.state, v.producer_id, v.producer_epoch))
    return out


def ids():
    counter = iter(range(100, 10_000))
    return lambda: next(counter)


def test_init_keeps_the_producer_id_bumps_the_epoch_and_survives_a_restart(tmp_path):
    new_id = ids()
    seen = {}

    async def first(broker, txn):
        code, pid, epoch = await txn.init_producer_id("app", 10_000, None, new_id)
        assert (code, epoch) == (0, 0)
        assert await txn.init_producer_id("app", 10_000, None, new_id) == (0, pid, 1)
        assert await txn.init_producer_id("app", 60_001, None, new_id) == (TIMEOUT, -1, -1)  # above the max
        assert await txn.init_producer_id("app", 0, None, new_id) == (TIMEOUT, -1, -1)
        assert await txn.init_producer_id("", 1000, None, new_id) == (42, -1, -1)
        assert stored(broker, "app") == [(EMPTY, pid, 0), (EMPTY, pid, 1)]
        seen["pid"] = pid

    async def second(broker, txn):
        assert txn.transactions["app"].producer_epoch == 1  # replayed from __transaction_state
        assert await txn.init_producer_id("app", 10_000, None, new_id) == (0, seen["pid"], 2)
        # KIP-360: a producer naming its current id and epoch gets the next epoch; an older epoch is fenced
        assert await txn.init_producer_id("app", 10_000, (seen["pid"], 2), new_id) == (0, seen["pid"], 3)
        assert await txn.init_producer_id("app", 10_000, (seen["pid"], 1), new_id) == (FENCED, -1, -1)

    run(tmp_path / "d", first)
    run(tmp_path / "d", second)


def test_commit_writes_prepare_markers_then_complete(tmp_path):
    markers = Markers()

    async def scenario(broker, txn):
        _, pid, epoch = await txn.init_producer_id("app", 10_000, None, ids())
        assert txn.partition_in_transaction("app", pid, epoch, "t", 0) == TXN_STATE  # not added yet
        assert await txn.add_partitions("app", pid, epoch, [("t", 0), ("u", 1)]) == 0
        assert await txn.add_offsets("app", pid, epoch, "group") == 0
        assert txn.transactions["app"].state is ONGOING
        assert txn.partition_in_transaction("app", pid, epoch, "t", 0) == 0
        assert txn.partition_in_transaction("app", pid, epoch, "t", 1) == TXN_STATE
        assert txn.partition_in_transaction("app", pid, epoch + 1, "t", 0) == FENCED
        assert txn.partition_in_transaction("app", pid + 1, epoch, "t", 0) == MAPPING
        assert txn.partition_in_transaction("other", pid, epoch, "t", 0) == MAPPING
        assert txn.verify_offsets_in_transaction("app", pid, epoch, "group") == 0
        elsewhere = next(g for g in (f"g{i}" for i in range(100))
                         if txn.offsets_partition(g) != txn.offsets_partition("group"))
        assert txn.verify_offsets_in_transaction("app", pid, epoch, elsewhere) == TXN_STATE
        assert await txn.end_txn("app", pid, epoch, True) == 0
        offsets = ("__consumer_offsets", txn.offsets_partition("group"), pid, epoch, "COMMIT")
        assert sorted(markers.written) == sorted([("t", 0, pid, epoch, "COMMIT"), ("u", 1, pid, epoch, "COMMIT"),
                                                  offsets])
        assert txn.transactions["app"].state is COMPLETE_COMMIT and not txn.transactions["app"].partitions
        assert [s[0] for s in stored(broker, "app")] == [EMPTY, ONGOING, ONGOING, PREPARE_COMMIT, COMPLETE_COMMIT]
        assert await txn.end_txn("app", pid, epoch, True) == 0  # a retry of the completed commit
        assert await txn.end_txn("app", pid, epoch, False) == TXN_STATE
        assert txn.partition_in_transaction("app", pid, epoch, "t", 0) == TXN_STATE  # the transaction is over
        # the next transaction starts from CompleteCommit
        assert await txn.add_partitions("app", pid, epoch, [("t", 1)]) == 0
        assert await txn.end_txn("app", pid, epoch, False) == 0
        assert markers.written[-1] == ("t", 1, pid, epoch, "ABORT")
        assert txn.transactions["app"].state is COMPLETE_ABORT

    run(tmp_path / "d", scenario, markers=markers)


def test_a_new_producer_fences_the_old_one_and_aborts_its_transaction(tmp_path):
    markers = Markers()

    async def scenario(broker, txn):
        new_id = ids()
        _, pid, old = await txn.init_producer_id("app", 10_000, None, new_id)
        assert await txn.add_partitions("app", pid, old, [("t", 0)]) == 0
        # the newer instance: the open transaction is aborted with a bumped epoch; it retries
        assert await txn.init_producer_id("app", 10_000, None, new_id) == (CONCURRENT, -1, -1)
        await eventually(lambda: txn.transactions["app"].state is COMPLETE_ABORT)
        assert markers.written == [("t", 0, pid, old + 1, "ABORT")]
        assert await txn.init_producer_id("app", 10_000, None, new_id) == (0, pid, old + 2)
        # the zombie: every request of its epoch is fenced
        assert await txn.add_partitions("app", pid, old, [("t", 1)]) == FENCED
        assert await txn.end_txn("app", pid, old, True) == FENCED
        assert txn.partition_in_transaction("app", pid, old, "t", 0) == FENCED

    run(tmp_path / "d", scenario, markers=markers)


def test_requests_while_the_markers_are_being_written_are_concurrent(tmp_path):
    markers = Markers()

    async def scenario(broker, txn):
        _, pid, epoch = await txn.init_producer_id("app", 10_000, None, ids())
        assert await txn.add_partitions("app", pid, epoch, [("t", 0)]) == 0
        markers.fail = 1000  # the partition's disk fails: the Prepare stays
        txn.abort_interval_ms = 60_000
        assert await txn.end_txn("app", pid, epoch, True) == 0  # Prepare is stored: the outcome is decided
        assert txn.transactions["app"].state is PREPARE_COMMIT
        assert await txn.add_partitions("app", pid, epoch, [("t", 1)]) == CONCURRENT
        assert await txn.init_producer_id("app", 10_000, None, ids()) == (CONCURRENT, -1, -1)
        assert await txn.end_txn("app", pid, epoch, True) == CONCURRENT
        assert await txn.end_txn("app", pid, epoch, False) == TXN_STATE
        assert txn.partition_in_transaction("app", pid, epoch, "t", 0) == CONCURRENT
        markers.fail = 0
        await txn._abort_and_retry()  # the timer's round
        await eventually(lambda: txn.transactions["app"].state is COMPLETE_COMMIT)
        assert markers.written == [("t", 0, pid, epoch, "COMMIT")]

    run(tmp_path / "d", scenario, markers=markers)


def test_a_restart_between_prepare_and_complete_completes_at_load(tmp_path):
    failing = Markers()
    failing.fail = 1000
    seen = {}

    async def before(broker, txn):
        _, pid, epoch = await txn.init_producer_id("app", 10_000, None, ids())
        assert await txn.add_partitions("app", pid, epoch, [("t", 0), ("u", 0)]) == 0
        assert await txn.end_txn("app", pid, epoch, True) == 0
        assert stored(broker, "app")[-1] == (PREPARE_COMMIT, pid, epoch)
        seen.update(pid=pid, epoch=epoch)

    markers = Markers()

    async def after(broker, txn):
        await eventually(lambda: txn.transactions["app"].state is COMPLETE_COMMIT)
        pid, epoch = seen["pid"], seen["epoch"]
        assert sorted(markers.written) == [("t", 0, pid, epoch, "COMMIT"), ("u", 0, pid, epoch, "COMMIT")]
        assert stored(broker, "app")[-1] == (COMPLETE_COMMIT, pid, epoch)

    run(tmp_path / "d", before, markers=failing, **{"transaction.abort.timed.out.transaction.cleanup.interval.ms":
                                                    "600000"})
    run(tmp_path / "d", after, markers=markers)


def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced(tmp_path):
    markers = Markers()
    time = MockTime()

    async def scenario(broker, txn):
        _, pid, epoch = await txn.init_producer_id("app", 5_000, None, ids())
        assert await txn.add_partitions("app", pid, epoch, [("t", 0)]) == 0
        time.advance(5_000)
        assert await txn.abort_timed_out() == 0  # not past it yet
        time.advance(1)
        assert await txn.abort_timed_out() == 1
        await eventually(lambda: txn.transactions["app"].state is COMPLETE_ABORT)
        assert markers.written == [("t", 0, pid, epoch + 1, "ABORT")]
        assert await txn.end_txn("app", pid, epoch, True) == FENCED
        assert txn.partition_in_transaction("app", pid, epoch, "t", 0) == FENCED

    run(tmp_path / "d", scenario, time=time, markers=markers)


def test_an_unused_transactional_id_is_forgotten(tmp_path):
    time = MockTime()

    async def scenario(broker, txn):
        _, pid, _ = await txn.init_producer_id("idle", 5_000, None, ids())
        _, busy_pid, epoch = await txn.init_producer_id("busy", 5_000, None, ids())
        assert await txn.add_partitions("busy", busy_pid, epoch, [("t", 0)]) == 0
        time.advance(999)
        assert await txn.expire() == 0
        time.advance(1)  # unused for transactional.id.expiration.ms
        assert await txn.expire() == 1  # the open transaction keeps "busy"
        assert "idle" not in txn.transactions and "busy" in txn.transactions
        assert stored(broker, "idle") == [(EMPTY, pid, 0), None]

    run(tmp_path / "d", scenario, time=time, **{"transactional.id.expiration.ms": "1000"})


async def eventually(check, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)
