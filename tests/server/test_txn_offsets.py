"""Offsets committed in transactions, driven in-process: TxnOffsetCommit through the wire handler and the
coordinator, the markers through ``GroupCoordinator.write_txn_marker`` (what the transaction
coordinator calls at EndTxn), OffsetFetch with and without ``require_stable``, and the replay of all of
it after a restart. A stand-in for the transaction coordinator answers the transaction check, so that
each case names what it expects of it; the real flow with real clients is in ``test_txn_offsets_clients.py``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from compactlog.group_records import OffsetCommitValue, decode_key, partition_for
from compactlog.records.control import read_control_record
from compactlog.security.acls import AclBinding, Operation, PatternType, Permission, ResourceType
from compactlog.server import apis
from compactlog.server.broker import Broker, Session
from compactlog.server.coordinator.manager import TOPIC
from compactlog.server.protocol import Connection, Request
from compactlog.server.server_config import ServerConfig
from compactlog.server.versions import SERVED, request_class

import importlib

SUB = b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"  # ConsumerProtocolSubscription v0 of topic "t"
CONFIG = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "100",
          "offsets.topic.num.partitions": "3"}
ANYONE = Session("127.0.0.1", 5555)
T0, T1 = ("t", 0), ("t", 1)


class Transactions:
    """Stands in for the transaction coordinator: answers ``verify_offsets_in_transaction`` with
    ``code`` (or awaits it when ``awaited``) and records what it was asked."""

    def __init__(self) -> None:
        self.code = 0
        self.awaited = False
        self.asked: list[tuple] = []

    def verify_offsets_in_transaction(self, transactional_id, producer_id, producer_epoch, group_id):
        self.asked.append((transactional_id, producer_id, producer_epoch, group_id))
        if not self.awaited:
            return self.code

        async def later() -> int:
            await asyncio.sleep(0)
            return self.code
        return later()


def run(data_dir: Path, scenario, **config: str) -> None:
    """``scenario(broker, coordinator, call, txns)`` against a started broker; ``call`` sends one request
    through the broker's handler table (and checks that the answer encodes at its version)."""
    async def main() -> None:
        broker = apis.install(Broker(data_dir, ServerConfig({**CONFIG, **config}), host="127.0.0.1", port=9092,
                                     background=False))
        txns = Transactions()
        broker.extras["transactions"] = txns
        try:
            await broker.start()
            coordinator = broker.extras["group_coordinator"]
            while coordinator.loading:
                await asyncio.sleep(0.01)
            for name, count in (("t", 2), ("u", 1)):
                if not broker.cl.has_topic(name):
                    broker.cl.create_topic(name, count)
            wire = Connection()

            async def call(key: int, version: int, session: Session = ANYONE, **fields):
                req = Request(key, version, 7, "client", request_class(key, version)(**fields), 0)
                resp = await broker.handle(req, session)
                assert wire.encode(req, resp)
                return resp

            await scenario(broker, coordinator, call, txns)
        finally:
            await broker.stop()
            broker.close()
    asyncio.run(asyncio.wait_for(main(), 30))


def offset(n: int, metadata: str = "") -> OffsetCommitValue:
    return OffsetCommitValue(n, -1, metadata, 1)


def nested(key: int, version: int, entity: str, **fields):
    module = importlib.import_module(f"kio.schema.{SERVED[key].name}.v{version}.request")
    return getattr(module, entity)(**fields)


async def txn_commit(c, group: str, pid: int, offsets: dict, epoch: int = 0, member: str = "", instance=None,
                     generation: int = -1, tid: str = "tx"):
    return await c.commit_txn_offsets(group, tid, pid, epoch, member, instance, generation, offsets)


def marker(c, group: str, pid: int, commit: bool, epoch: int = 0, coordinator_epoch: int = 0):
    return c.write_txn_marker(c.store.partition_for(group), pid, epoch, commit, coordinator_epoch)


def fetch(c, group: str, *tps):
    return dict(c.fetch_offsets(group, list(tps))[1])


def log_batches(broker, group: str) -> list:
    part = broker.cl.partition(TOPIC, partition_for(group, 3))
    return list(part.batches())


def test_transactional_offsets_stay_pending_until_the_commit_marker(tmp_path):
    async def scenario(broker, c, call, txns):
        assert await c.commit_offsets("g", -1, "", None, {T0: offset(3)}) == {T0: 0}
        assert await txn_commit(c, "g", 1000, {T0: offset(7, "m"), T1: offset(8)}, epoch=2) == {T0: 0, T1: 0}
        assert txns.asked == [("tx", 1000, 2, "g")]
        # invisible: the committed offset (or none) is what OffsetFetch answers
        assert fetch(c, "g", T0, T1) == {T0: offset(3), T1: None}
        assert c.unstable_offsets("g", [T0, T1, ("t", 5)]) == {T0, T1}
        assert c.unstable_offsets("g", None) == {T0}  # all partitions means every committed one
        # in the log: one transactional batch of the producer, its id and epoch, no marker yet
        last = log_batches(broker, "g")[-1]
        assert (last.is_transactional, last.is_control, last.producer_id, last.producer_epoch) == (True, False, 1000, 2)
        assert sorted(decode_key(r.key).partition for r in last.records()) == [0, 1]

        await marker(c, "g", 1000, True, epoch=2, coordinator_epoch=5)
        assert fetch(c, "g", T0, T1) == {T0: offset(7, "m"), T1: offset(8)}
        assert c.unstable_offsets("g", [T0, T1]) == set()
        end = log_batches(broker, "g")[-1]
        assert end.is_control and end.producer_id == 1000
        assert (read_control_record(end).type_name, read_control_record(end).coordinator_epoch) == ("COMMIT", 5)

        # the producer's next transaction in the same epoch: its batch follows the first one's sequence
        assert await txn_commit(c, "g", 1000, {T0: offset(9)}, epoch=2) == {T0: 0}
        await marker(c, "g", 1000, True, epoch=2, coordinator_epoch=5)
        assert fetch(c, "g", T0) == {T0: offset(9)}
    run(tmp_path / "d", scenario)


def test_an_abort_marker_drops_the_pending_offsets(tmp_path):
    async def scenario(broker, c, call, txns):
        await c.commit_offsets("g", -1, "", None, {T0: offset(3)})
        assert await txn_commit(c, "g", 7, {T0: offset(10), T1: offset(11)}) == {T0: 0, T1: 0}
        await marker(c, "g", 7, False)
        assert fetch(c, "g", T0, T1) == {T0: offset(3), T1: None}
        assert c.unstable_offsets("g", [T0, T1]) == set()
        assert read_control_record(log_batches(broker, "g")[-1]).type_name == "ABORT"
        # a marker for another group's partition leaves this group's pending offsets alone
        other = next(g for g in (f"o{i}" for i in range(50)) if partition_for(g, 3) != partition_for("g", 3))
        assert await txn_commit(c, "g", 8, {T0: offset(12)}) == {T0: 0}
        await marker(c, other, 8, True)
        assert c.unstable_offsets("g", [T0]) == {T0}
        await marker(c, "g", 8, True)
        assert fetch(c, "g", T0) == {T0: offset(12)}
    run(tmp_path / "d", scenario)


def test_a_plain_commit_after_the_transactional_record_wins_at_the_commit_marker(tmp_path):
    """Kafka keeps whichever record is later in the log: a transaction's offset written before a plain
    commit of the same partition does not replace it when the transaction commits (nor at the replay)."""
    data = tmp_path / "d"

    async def first(broker, c, call, txns):
        await txn_commit(c, "g", 5, {T0: offset(7), T1: offset(8)})
        assert await c.commit_offsets("g", -1, "", None, {T0: offset(9)}) == {T0: 0}
        assert fetch(c, "g", T0) == {T0: offset(9)}  # visible at once, the transaction's still pending
        await marker(c, "g", 5, True)
        assert fetch(c, "g", T0, T1) == {T0: offset(9), T1: offset(8)}

    async def second(broker, c, call, txns):
        assert fetch(c, "g", T0, T1) == {T0: offset(9), T1: offset(8)}

    run(data, first)
    run(data, second)


def test_a_restart_replays_pending_committed_and_aborted_transactions(tmp_path):
    data = tmp_path / "d"

    async def first(broker, c, call, txns):
        await c.commit_offsets("aborted", -1, "", None, {T0: offset(1)})
        await txn_commit(c, "pending", 1, {T0: offset(10)})
        await txn_commit(c, "committed", 2, {T0: offset(20), T1: offset(21)})
        await txn_commit(c, "aborted", 3, {T0: offset(30)})
        await marker(c, "committed", 2, True)
        await marker(c, "aborted", 3, False)

    async def second(broker, c, call, txns):
        assert set(c.groups) == {"pending", "committed", "aborted"}
        assert fetch(c, "pending", T0) == {T0: None} and c.unstable_offsets("pending", [T0]) == {T0}
        assert fetch(c, "committed", T0, T1) == {T0: offset(20), T1: offset(21)}
        assert fetch(c, "aborted", T0) == {T0: offset(1)}
        assert c.unstable_offsets("committed", [T0]) == c.unstable_offsets("aborted", [T0]) == set()
        # the transaction coordinator finishes the open one after the restart
        await marker(c, "pending", 1, True)
        assert fetch(c, "pending", T0) == {T0: offset(10)}
        # and the producer carries on in the same epoch: its sequence continues after the restart
        assert await txn_commit(c, "pending", 1, {T0: offset(11)}) == {T0: 0}
        assert c.unstable_offsets("pending", [T0]) == {T0}

    async def third(broker, c, call, txns):
        assert fetch(c, "pending", T0) == {T0: offset(10)} and c.unstable_offsets("pending", [T0]) == {T0}

    run(data, first)
    run(data, second)
    run(data, third)


def test_the_member_checks_of_a_transactional_commit_are_kafkas(tmp_path):
    async def scenario(broker, c, call, txns):
        first = await c.join_group("g", "", "i1", "client", "/127.0.0.1", 10_000, 5_000, "consumer",
                                   (("range", SUB),), True)
        a = await c.join_group("g", first.member_id, "i1", "client", "/127.0.0.1", 10_000, 5_000, "consumer",
                               (("range", SUB),), True)
        await c.sync_group("g", 1, a.member_id, "i1", {a.member_id: b"A"})
        ok = {T0: offset(4)}
        assert await txn_commit(c, "g", 1, ok, member=a.member_id, instance="i1", generation=1) == {T0: 0}
        assert await txn_commit(c, "g", 1, ok, member=a.member_id, instance="i1", generation=2) == {T0: 22}
        assert await txn_commit(c, "g", 1, ok, member="ghost", generation=1) == {T0: 25}
        assert await txn_commit(c, "g", 1, ok, member="ghost", instance="i1", generation=1) == {T0: 82}
        assert await txn_commit(c, "g", 1, ok, member=a.member_id, instance="i9", generation=1) == {T0: 25}
        # a producer naming no member (v0-2) may commit into a group with members, unlike OffsetCommit
        assert await txn_commit(c, "g", 1, ok) == {T0: 0}
        assert await c.commit_offsets("g", -1, "", None, ok) == {T0: 25}
        # an unknown group is made (Empty), so a named member is unknown rather than of an old generation
        assert await txn_commit(c, "new", 1, ok, member="m", generation=3) == {T0: 25}
        assert await txn_commit(c, "g", 1, {T0: offset(5, "x" * 5000), T1: offset(6)}) == {T0: 12, T1: 0}
        assert await txn_commit(c, "", 1, ok) == {T0: 24}
    run(tmp_path / "d", scenario)


def test_the_transaction_check_decides_before_anything_is_written(tmp_path):
    async def scenario(broker, c, call, txns):
        before = len(log_batches(broker, "g")) if broker.cl.has_topic(TOPIC) else 0
        for answer, expected in ((48, 48), (90, 47), (47, 47), (3, 15), (56, 16), (51, 51)):
            txns.code = answer
            assert await txn_commit(c, "g", 1, {T0: offset(4)}) == {T0: expected}, answer
        assert c.unstable_offsets("g", [T0]) == set()
        assert (len(log_batches(broker, "g")) if broker.cl.has_topic(TOPIC) else 0) == before
        txns.code, txns.awaited = 0, True  # a coordinator that answers asynchronously
        assert await txn_commit(c, "g", 1, {T0: offset(4)}) == {T0: 0}
        del broker.extras["transactions"]  # a broker without a transaction coordinator has nothing to check
        assert await txn_commit(c, "g", 2, {T1: offset(4)}) == {T1: 0}
        assert c.unstable_offsets("g", [T0, T1]) == {T0, T1}
    run(tmp_path / "d", scenario)


def test_expiry_keeps_pending_offsets_and_their_group(tmp_path):
    async def scenario(broker, c, call, txns):
        await c.commit_offsets("solo", -1, "", None, {("u", 0): offset(1)})
        await txn_commit(c, "solo", 4, {T0: offset(2)})
        c.retention_ms = 0
        assert await c.expire_offsets() == 1  # the committed one expires, the pending one stays
        assert "solo" in c.groups and c.unstable_offsets("solo", [T0]) == {T0}
        await marker(c, "solo", 4, True)
        assert fetch(c, "solo", T0, ("u", 0)) == {T0: offset(2), ("u", 0): None}
        assert await c.expire_offsets() == 1
        assert "solo" not in c.groups
    run(tmp_path / "d", scenario)


def test_deletions_drop_the_pending_offsets_of_their_partitions(tmp_path):
    """As Kafka's removeOffsets: OffsetDelete, a deleted group and a deleted topic take the pending
    transactional offsets of their partitions with them; a later COMMIT marker brings none back."""
    async def scenario(broker, c, call, txns):
        await c.commit_offsets("g", -1, "", None, {T0: offset(1)})
        await txn_commit(c, "g", 1, {T0: offset(2), T1: offset(3)})
        assert await c.delete_offsets("g", [T0]) == (0, {T0: 0})
        assert c.unstable_offsets("g", [T0, T1]) == {T1}
        await marker(c, "g", 1, True)
        assert fetch(c, "g", T0, T1) == {T0: None, T1: offset(3)}

        await txn_commit(c, "h", 2, {("u", 0): offset(5)})
        assert await c.offsets.delete_topic_offsets("u") == 0  # nothing committed to tombstone
        assert "h" not in c.groups  # an Empty group left with nothing is dead

        await c.commit_offsets("d", -1, "", None, {T0: offset(1)})
        await txn_commit(c, "d", 3, {T0: offset(9)})
        assert await c.delete_groups(["d"]) == {"d": 0}  # Empty: deleted, pending offsets and all
        await marker(c, "d", 3, True)
        assert "d" not in c.groups and fetch(c, "d", T0) == {T0: None}
    run(tmp_path / "d", scenario)


def test_a_marker_waits_for_the_replay_and_fails_once_stopped(tmp_path):
    async def scenario(broker, c, call, txns):
        await txn_commit(c, "g", 1, {T0: offset(2)})
        await c.stop()
        try:
            await marker(c, "g", 1, True)
        except Exception as exc:  # noqa: BLE001
            assert type(exc).__name__ == "CoordinatorNotAvailableError"
        else:
            raise AssertionError("a stopped coordinator wrote a marker")
    run(tmp_path / "d", scenario)


def _txn_request(version: int, group: str = "g", tid: str = "tx", **extra):
    partition = dict(partition_index=0, committed_offset=42, committed_metadata=None)
    if version >= 2:
        partition["committed_leader_epoch"] = 3
    topics = (nested(28, version, "TxnOffsetCommitRequestTopic", name="t", partitions=(
        nested(28, version, "TxnOffsetCommitRequestPartition", **partition),)),
        nested(28, version, "TxnOffsetCommitRequestTopic", name="nope", partitions=(
            nested(28, version, "TxnOffsetCommitRequestPartition", **dict(partition, partition_index=0)),)))
    return dict(transactional_id=tid, group_id=group, producer_id=77, producer_epoch=1, topics=topics, **extra)


def _errors(resp) -> list:
    return [(t.name, p.partition_index, p.error_code) for t in resp.topics for p in t.partitions]


def test_txn_offset_commit_and_offset_fetch_on_the_wire(tmp_path):
    async def scenario(broker, c, call, txns):
        for v in (0, 1, 2):
            assert _errors(await call(28, v, **_txn_request(v, group=f"g{v}"))) == [("t", 0, 0), ("nope", 0, 3)]
        r = await call(28, 3, **_txn_request(3, generation_id=-1, member_id="", group_instance_id=None))
        assert _errors(r) == [("t", 0, 0), ("nope", 0, 3)]
        assert c.groups["g"].pending_txn_offsets[77][T0].value.leader_epoch == 3
        r = await call(28, 3, **_txn_request(3, generation_id=4, member_id="m", group_instance_id=None))
        assert _errors(r) == [("t", 0, 25), ("nope", 0, 3)]

        def topics(v, cls="OffsetFetchRequestTopic"):
            return (nested(9, v, cls, name="t", partition_indexes=(0, 1)),)
        # require_stable: the pending partition is unstable (retriable, no offset); without it, the committed one
        await c.commit_offsets("g", -1, "", None, {T1: offset(5)})
        f = await call(9, 7, group_id="g", topics=topics(7), require_stable=True)
        assert [(p.partition_index, p.committed_offset, p.error_code) for p in f.topics[0].partitions] == [
            (0, -1, 88), (1, 5, 0)]
        f = await call(9, 7, group_id="g", topics=topics(7), require_stable=False)
        assert [(p.partition_index, p.committed_offset, p.error_code) for p in f.topics[0].partitions] == [
            (0, -1, 0), (1, 5, 0)]
        f = await call(9, 6, group_id="g", topics=topics(6))
        assert [p.error_code for p in f.topics[0].partitions] == [0, 0]
        group = nested(9, 8, "OffsetFetchRequestGroup", group_id="g", topics=topics(8, "OffsetFetchRequestTopics"))
        f = await call(9, 8, groups=(group,), require_stable=True)
        assert [(p.partition_index, p.error_code) for p in f.groups[0].topics[0].partitions] == [(0, 88), (1, 0)]
        await marker(c, "g", 77, True, epoch=1)
        f = await call(9, 7, group_id="g", topics=topics(7), require_stable=True)
        assert [(p.committed_offset, p.committed_leader_epoch, p.error_code) for p in f.topics[0].partitions] == [
            (42, 3, 0), (5, -1, 0)]

        # while __consumer_offsets loads: v0-1 get COORDINATOR_NOT_AVAILABLE, v2+ COORDINATOR_LOAD_IN_PROGRESS
        c.loading = True
        try:
            assert _errors(await call(28, 1, **_txn_request(1)))[0] == ("t", 0, 15)
            assert _errors(await call(28, 2, **_txn_request(2)))[0] == ("t", 0, 14)
        finally:
            c.loading = False
    run(tmp_path / "d", scenario)


def test_txn_offset_commit_needs_write_on_the_transactional_id_then_read_on_the_group(tmp_path):
    alice = Session("127.0.0.1", 5555, principal="User:alice")

    def allow(broker, rtype: str, name: str, op: str) -> None:
        broker.extras["acls"].add([AclBinding(ResourceType[rtype], name, PatternType.LITERAL, "User:alice", "*",
                                              Operation[op], Permission.ALLOW)])

    async def scenario(broker, c, call, txns):
        allow(broker, "TOPIC", "t", "READ")
        assert {e for *_, e in _errors(await call(28, 3, alice, **_txn_request(3)))} == {53}
        allow(broker, "TRANSACTIONAL_ID", "tx", "WRITE")
        assert {e for *_, e in _errors(await call(28, 3, alice, **_txn_request(3)))} == {30}
        allow(broker, "GROUP", "g", "READ")
        assert _errors(await call(28, 3, alice, **_txn_request(3))) == [("t", 0, 0), ("nope", 0, 29)]
    run(tmp_path / "d", scenario)


def test_a_stale_sequence_is_renumbered_from_the_partition_s_producer_state(tmp_path):
    """The coordinator remembers the next sequence of each producer's offsets batches; if that is wrong
    (the log refuses it as out of order, or takes it for a retry of an earlier batch), it asks the
    partition's producer state and writes the batch once, numbered right."""
    async def scenario(broker, c, call, txns):
        partition = c.store.partition_for("g")
        assert await txn_commit(c, "g", 9, {T0: offset(1)}) == {T0: 0}
        written = len(log_batches(broker, "g"))
        c.store._sequences[(partition, 9)] = (0, 57)  # out of order
        assert await txn_commit(c, "g", 9, {T0: offset(2)}) == {T0: 0}
        c.store._sequences[(partition, 9)] = (0, 0)  # the first batch's number: a retry of it to the log
        assert await txn_commit(c, "g", 9, {T0: offset(3)}) == {T0: 0}
        batches = log_batches(broker, "g")
        assert len(batches) == written + 2 and [b.base_sequence for b in batches[-3:]] == [0, 1, 2]
        await marker(c, "g", 9, True)
        assert fetch(c, "g", T0) == {T0: offset(3)}
    run(tmp_path / "d", scenario)


def test_a_marker_asked_for_before_the_replay_waits_for_it(tmp_path):
    """The transaction coordinator finishes a transaction left in PrepareCommit as soon as it starts,
    perhaps before __consumer_offsets is replayed: the marker waits, then commits what the replay found."""
    data = tmp_path / "d"

    async def first(broker, c, call, txns):
        await txn_commit(c, "g", 1, {T0: offset(4)})

    async def early_marker() -> None:
        broker = apis.install(Broker(data, ServerConfig(CONFIG), host="127.0.0.1", port=9092, background=False))
        broker.extras["transactions"] = Transactions()
        try:
            c = broker.extras["group_coordinator"]
            written = asyncio.create_task(marker(c, "g", 1, True))
            await asyncio.sleep(0.05)
            assert not written.done() and c.loading
            await broker.start()
            await asyncio.wait_for(written, 10)
            assert not c.loading and fetch(c, "g", T0) == {T0: offset(4)}
            assert read_control_record(log_batches(broker, "g")[-1]).type_name == "COMMIT"
        finally:
            await broker.stop()
            broker.close()

    run(data, first)
    asyncio.run(asyncio.wait_for(early_marker(), 30))


def test_a_group_deleted_under_an_open_transaction_comes_back_at_the_replay_once_it_commits(tmp_path):
    """Kafka's behaviour, kept: the deletion drops the pending offsets in memory, but the transaction's
    record and its COMMIT marker stay in the log, after the deletion's tombstones, so a restart
    applies them (the replay cannot tell a deletion's tombstone from expiry's)."""
    data = tmp_path / "d"

    async def first(broker, c, call, txns):
        await c.commit_offsets("d", -1, "", None, {T0: offset(1)})
        await txn_commit(c, "d", 3, {T0: offset(9)})
        assert await c.delete_groups(["d"]) == {"d": 0}
        await marker(c, "d", 3, True)
        assert "d" not in c.groups and fetch(c, "d", T0) == {T0: None}

    async def second(broker, c, call, txns):
        assert fetch(c, "d", T0) == {T0: offset(9)}

    run(data, first)
    run(data, second)
