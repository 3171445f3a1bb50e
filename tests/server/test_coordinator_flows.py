"""The group coordinator's rules, driven in-process: a real Broker over a real data directory, the
coordinator's methods called as the wire handlers call them, timers on a real event loop (kept short).

Each test is one scenario a client can cause; the real-client tests (``test_groups_*.py``) cover the wire.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from compactlog.clock import MockTime
from compactlog.server import apis
from compactlog.server.broker import Broker
from compactlog.server.coordinator.manager import TOPIC, GroupMetadataManager
from compactlog.records.batch import iter_batches
from compactlog.group_records import OffsetCommitValue, partition_for
from compactlog.server.coordinator.state import (
    COMPLETING_REBALANCE,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
)
from compactlog.server.server_config import ServerConfig

SUB = b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"  # ConsumerProtocolSubscription v0 of topic "t"
SUB2 = b"\x00\x00\x00\x00\x00\x01\x00\x02t2\xff\xff\xff\xff"
CONFIG = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "100",
          "offsets.topic.num.partitions": "3"}


def run(data_dir: Path, scenario, **config: str) -> None:
    """Run ``scenario(broker, coordinator)`` against a started broker, then stop it cleanly."""
    async def main() -> None:
        broker = apis.install(Broker(data_dir, ServerConfig({**CONFIG, **config}), host="127.0.0.1", port=9092,
                                     background=False))
        try:
            await broker.start()
            coordinator = broker.extras["group_coordinator"]
            while coordinator.loading:
                await asyncio.sleep(0.01)
            await scenario(broker, coordinator)
        finally:
            await broker.stop()
            broker.close()
    asyncio.run(asyncio.wait_for(main(), 30))


async def join(c, member_id="", group="g", instance=None, protocols=(("range", SUB),), session_ms=10_000,
               rebalance_ms=5_000, v4=True, protocol_type="consumer"):
    return await c.join_group(group, member_id, instance, "client", "/127.0.0.1", session_ms, rebalance_ms,
                              protocol_type, protocols, v4)


async def join_with_id(c, **kw):
    """A JoinGroup v4+ client: first MEMBER_ID_REQUIRED, then the same request with the id it got."""
    first = await join(c, **kw)
    assert first.error == 79 and first.member_id.startswith("client-") and first.generation_id == -1
    return await join(c, member_id=first.member_id, **kw)


async def eventually(check, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


def offset(n: int, metadata: str = "") -> OffsetCommitValue:
    return OffsetCommitValue(n, -1, metadata, 1)


def test_two_members_join_sync_heartbeat_commit_and_leave(tmp_path):
    async def scenario(broker, c):
        a = await join_with_id(c)
        assert (a.error, a.generation_id, a.protocol_name, a.leader_id) == (0, 1, "range", a.member_id)
        assert a.members == ((a.member_id, None, SUB),)
        assert (await c.sync_group("g", 1, a.member_id, None, {a.member_id: b"A1"})).assignment == b"A1"
        assert c.groups["g"].state is STABLE
        # b joins: a learns of the rebalance from its heartbeat and rejoins; both join the next generation
        b_first = await join(c)
        b_task = asyncio.create_task(join(c, member_id=b_first.member_id))
        await eventually(lambda: c.groups["g"].state is PREPARING_REBALANCE)
        assert c.heartbeat("g", 1, a.member_id, None) == 27
        a2 = await join(c, member_id=a.member_id)
        b2 = await b_task
        assert a2.generation_id == b2.generation_id == 2 and a2.leader_id == b2.leader_id == a.member_id
        assert len(a2.members) == 2 and b2.members == ()
        assert c.groups["g"].state is COMPLETING_REBALANCE
        assert c.heartbeat("g", 2, b2.member_id, None) == 0
        assert await c.commit_offsets("g", 2, b2.member_id, None, {("t", 0): offset(1)}) == {("t", 0): 27}
        b_sync = asyncio.create_task(c.sync_group("g", 2, b2.member_id, None, {}))  # a follower waits
        await asyncio.sleep(0.05)
        assert not b_sync.done()
        a_sync = await c.sync_group("g", 2, a.member_id, None, {a.member_id: b"A2", b2.member_id: b"B2"})
        assert (a_sync.assignment, (await b_sync).assignment) == (b"A2", b"B2")
        assert c.heartbeat("g", 1, a.member_id, None) == 22
        assert await c.commit_offsets("g", 2, a.member_id, None, {("t", 0): offset(5, "m")}) == {("t", 0): 0}
        assert c.fetch_offsets("g", [("t", 0), ("t", 1)]) == (0, [(("t", 0), offset(5, "m")), (("t", 1), None)])
        assert c.fetch_offsets("nobody", None) == (0, [])
        # a leaves: b is alone in generation 3 and becomes leader
        assert await c.leave_group("g", [(a.member_id, None)]) == (0, [0])
        assert c.heartbeat("g", 2, b2.member_id, None) == 27
        b3 = await join(c, member_id=b2.member_id)
        assert (b3.generation_id, b3.leader_id) == (3, b2.member_id)
        assert await c.leave_group("g", [(b2.member_id, None), ("ghost", None)]) == (0, [0, 25])
        await eventually(lambda: c.groups["g"].state is EMPTY)
        assert c.groups["g"].generation_id == 4
        code, group = c.describe_group("g")
        assert (code, group.state, group.protocol_type) == (0, EMPTY, "consumer")
    run(tmp_path / "d", scenario)


def test_request_errors_by_kafkas_codes(tmp_path):
    async def scenario(broker, c):
        assert (await join(c, group="")).error == 24
        assert (await join(c, session_ms=50)).error == 26
        assert (await join(c, member_id="stranger")).error == 25
        a = await join_with_id(c)
        assert (await join(c, protocol_type="connect")).error == 23
        assert (await join(c, protocols=(("sticky", SUB),))).error == 23
        assert c.heartbeat("g", 1, "stranger", None) == 25
        assert c.heartbeat("nope", 1, "x", None) == 25
        assert (await c.sync_group("g", 7, a.member_id, None, {})).error == 22
        await c.sync_group("g", 1, a.member_id, None, {})
        assert await c.commit_offsets("unknown", 3, "m", None, {("t", 0): offset(1)}) == {("t", 0): 22}
        assert await c.commit_offsets("g", 1, a.member_id, None, {("t", 0): offset(1, "x" * 5000)}) == {("t", 0): 12}
        assert await c.delete_groups(["g", "unknown", ""]) == {"g": 68, "unknown": 69, "": 24}
        assert await c.delete_offsets("g", [("t", 0)]) == (0, {("t", 0): 86})  # a member subscribes to "t"
        assert await c.delete_offsets("unknown", [("t", 0)]) == (69, {})
    run(tmp_path / "d", scenario)


def test_a_client_that_only_stores_offsets_commits_with_generation_minus_one(tmp_path):
    async def scenario(broker, c):
        assert await c.commit_offsets("solo", -1, "", None, {("t", 0): offset(3), ("t", 1): offset(4)}) == {
            ("t", 0): 0, ("t", 1): 0}
        assert c.list_groups() == (0, [("solo", "", "Empty")])
        assert await c.delete_offsets("solo", [("t", 1)]) == (0, {("t", 1): 0})
        assert c.fetch_offsets("solo", None) == (0, [(("t", 0), offset(3))])
        assert await c.delete_groups(["solo"]) == {"solo": 0}
        assert c.list_groups() == (0, []) and c.fetch_offsets("solo", [("t", 0)]) == (0, [(("t", 0), None)])
    run(tmp_path / "d", scenario)


def test_a_silent_member_is_removed_after_its_session_timeout(tmp_path):
    async def scenario(broker, c):
        a = await join_with_id(c, session_ms=300)
        await c.sync_group("g", 1, a.member_id, None, {})
        b_first = await join(c, session_ms=10_000)
        b_task = asyncio.create_task(join(c, member_id=b_first.member_id, session_ms=10_000))
        # a never heartbeats nor rejoins: after 300 ms it is gone and b completes the join alone
        b = await asyncio.wait_for(b_task, 5)
        assert (b.generation_id, b.leader_id, len(b.members)) == (2, b.member_id, 1)
        assert c.heartbeat("g", 2, a.member_id, None) == 25
    run(tmp_path / "d", scenario)


def test_members_that_do_not_rejoin_in_the_rebalance_timeout_are_dropped(tmp_path):
    async def scenario(broker, c):
        a = await join_with_id(c, rebalance_ms=300)
        await c.sync_group("g", 1, a.member_id, None, {})
        b_first = await join(c, rebalance_ms=300)
        loop = asyncio.get_running_loop()
        started = loop.time()
        b = await asyncio.wait_for(join(c, member_id=b_first.member_id, rebalance_ms=300), 5)
        assert loop.time() - started >= 0.25 and (b.generation_id, len(b.members)) == (2, 1)
        # a leader that never sends SyncGroup is dropped after the rebalance timeout too
        await eventually(lambda: c.groups["g"].state is EMPTY, 3)
        assert not c.groups["g"].members and c.groups["g"].generation_id == 3
    run(tmp_path / "d", scenario)


def test_the_initial_delay_gathers_members_that_start_together(tmp_path):
    async def scenario(broker, c):
        a = asyncio.create_task(join(c, v4=False, rebalance_ms=2_000))
        await asyncio.sleep(0.1)
        b = asyncio.create_task(join(c, v4=False, rebalance_ms=2_000))
        ra, rb = await asyncio.wait_for(asyncio.gather(a, b), 5)
        assert ra.generation_id == rb.generation_id == 1 and len(ra.members or rb.members) == 2
    run(tmp_path / "d", scenario, **{"group.initial.rebalance.delay.ms": "300"})


def test_a_static_member_rejoining_with_unchanged_metadata_keeps_its_assignment_without_a_rebalance(tmp_path):
    async def scenario(broker, c):
        s = await join(c, instance="inst")  # static members get their id at once (no MEMBER_ID_REQUIRED)
        assert s.error == 0 and s.member_id.startswith("inst-")
        await c.sync_group("g", 1, s.member_id, "inst", {s.member_id: b"S"})
        d_first = await join(c)  # a dynamic member joins; s rejoins as the leader does
        d_task = asyncio.create_task(join(c, member_id=d_first.member_id))
        await eventually(lambda: c.groups["g"].state is PREPARING_REBALANCE)
        assert (await join(c, member_id=s.member_id, instance="inst")).generation_id == 2
        d = await d_task
        await c.sync_group("g", 2, s.member_id, "inst", {s.member_id: b"S", d.member_id: b"D"})
        # s's client restarts: same instance id, no member id
        again = await join(c, instance="inst")
        assert again.error == 0 and again.member_id != s.member_id
        assert (again.generation_id, again.leader_id, again.members) == (2, s.member_id, ())
        assert c.groups["g"].state is STABLE and c.groups["g"].leader_id == again.member_id
        assert (await c.sync_group("g", 2, again.member_id, "inst", {})).assignment == b"S"
        assert c.heartbeat("g", 2, s.member_id, "inst") == 82  # the old id is fenced
        assert c.heartbeat("g", 2, d.member_id, None) == 0  # nobody else noticed
        # with new metadata it rebalances
        task = asyncio.create_task(join(c, instance="inst", protocols=(("range", SUB2),)))
        await eventually(lambda: c.groups["g"].state is PREPARING_REBALANCE)
        await join(c, member_id=d.member_id)
        assert (await task).generation_id == 3
        # an administrator removes it by instance id alone
        assert await c.leave_group("g", [("", "inst"), ("", "nobody")]) == (0, [0, 25])
    run(tmp_path / "d", scenario)


def test_group_max_size(tmp_path):
    async def scenario(broker, c):
        a = await join_with_id(c)
        await c.sync_group("g", 1, a.member_id, None, {})
        assert (await join(c)).error == 81
    run(tmp_path / "d", scenario, **{"group.max.size": "1"})


def test_while_loading_group_apis_say_so(tmp_path):
    async def scenario(broker, c):
        c.loading = True
        assert (await join(c)).error == 14
        assert (await c.sync_group("g", 1, "m", None, {})).error == 27  # as Kafka: old clients rejoin
        assert c.heartbeat("g", 1, "m", None) == 14
        assert await c.commit_offsets("g", -1, "", None, {("t", 0): offset(1)}) == {("t", 0): 14}
        assert c.fetch_offsets("g", None) == (14, []) and c.list_groups() == (14, [])
        assert await c.delete_groups(["g"]) == {"g": 14}
        c.loading = False
    run(tmp_path / "d", scenario)


def test_groups_and_offsets_survive_a_restart_and_deletions_are_tombstones(tmp_path):
    data = tmp_path / "d"
    ids = {}

    async def first(broker, c):
        a = await join_with_id(c)
        await c.sync_group("g", 1, a.member_id, None, {a.member_id: b"A"})
        await c.commit_offsets("g", 1, a.member_id, None, {("t", 0): offset(7, "x"), ("t", 1): offset(9)})
        await c.commit_offsets("solo", -1, "", None, {("u", 0): offset(1)})
        await c.commit_offsets("gone", -1, "", None, {("u", 0): offset(2)})
        assert await c.delete_groups(["gone"]) == {"gone": 0}
        ids["a"] = a.member_id

    async def second(broker, c):
        g = c.groups["g"]
        assert (g.state, g.generation_id, list(g.members), g.leader_id) == (STABLE, 1, [ids["a"]], ids["a"])
        assert g.members[ids["a"]].assignment == b"A"
        assert c.heartbeat("g", 1, ids["a"], None) == 0  # the member carries on where it was
        assert c.fetch_offsets("g", None) == (0, [(("t", 0), offset(7, "x")), (("t", 1), offset(9))])
        assert set(c.groups) == {"g", "solo"}
        partition = GroupMetadataManager(broker.cl, broker.config).partition_for("gone")
        tombstones = [r for b in broker.cl.manager.get_log(TOPIC, partition).batches() for r in b.records()
                      if r.value is None]
        assert len(tombstones) == 1
        assert broker.cl.describe_topic(TOPIC).config.compact

    run(data, first)
    run(data, second)


def test_a_corrupt_batch_in_consumer_offsets_loses_only_its_own_commits(tmp_path):
    """A flipped byte in the middle of one __consumer_offsets partition: the batch is skipped with an
    error logged, every other commit (same partition and others) loads, and the coordinator serves."""
    names = [f"g{i}" for i in range(40)]
    a = names[0]
    c = next(n for n in names[1:] if partition_for(n, 3) == partition_for(a, 3))
    b = next(n for n in names[1:] if partition_for(n, 3) != partition_for(a, 3))
    data = tmp_path / "d"

    async def first(broker, co):
        for group, n in ((a, 5), (a, 6), (c, 1), (b, 2)):  # one batch each
            await co.commit_offsets(group, -1, "", None, {("t", 0): offset(n)})

    run(data, first)
    seg = next((data / f"{TOPIC}-{partition_for(a, 3)}").glob("*.log"))
    raw = bytearray(seg.read_bytes())
    pos, batch = list(iter_batches(bytes(raw)))[1]  # a's second commit
    raw[pos + batch.size - 2] ^= 0xFF
    seg.write_bytes(bytes(raw))

    async def second(broker, co):
        assert not co.loading
        assert co.fetch_offsets(a, None) == (0, [(("t", 0), offset(5))])
        assert co.fetch_offsets(c, None) == (0, [(("t", 0), offset(1))])
        assert co.fetch_offsets(b, None) == (0, [(("t", 0), offset(2))])

    run(data, second)


def test_an_offset_delete_racing_a_commit_never_undoes_the_acknowledged_commit(tmp_path):
    """OffsetDelete (or expiry) while a commit of the same partition is on its way to the log: the
    commit is acknowledged, so it must still be there after a restart (no tombstone written after it)."""
    data = tmp_path / "d"

    async def first(broker, c):
        await c.commit_offsets("g", -1, "", None, {("t", 0): offset(5)})
        commit = asyncio.create_task(c.commit_offsets("g", -1, "", None, {("t", 0): offset(6)}))
        await asyncio.sleep(0)  # the commit is under way
        await c.delete_offsets("g", [("t", 0)])
        assert await commit == {("t", 0): 0}
        assert c.fetch_offsets("g", None) == (0, [(("t", 0), offset(6))])

    async def second(broker, c):
        assert c.fetch_offsets("g", None) == (0, [(("t", 0), offset(6))])

    run(data, first)
    run(data, second)


def test_offsets_of_an_empty_group_expire(tmp_path):
    async def scenario(broker, c):
        clock = MockTime()
        c.time = clock
        a = await join_with_id(c)
        await c.sync_group("g", 1, a.member_id, None, {})
        await c.commit_offsets("g", 1, a.member_id, None, {("t", 0): offset(7)})
        await c.leave_group("g", [(a.member_id, None)])
        assert c.groups["g"].state is EMPTY
        clock.sleep(59_999)
        assert await c.expire_offsets() == 0
        clock.sleep(1)
        assert await c.expire_offsets() == 1
        assert "g" not in c.groups  # no offsets left: the group is gone too
    run(tmp_path / "d", scenario, **{"offsets.retention.minutes": "1"})


def test_a_pending_member_id_that_is_never_used_expires(tmp_path):
    async def scenario(broker, c):
        first = await join(c, session_ms=200)
        assert first.error == 79 and c.groups["g"].pending_members == {first.member_id}
        await eventually(lambda: not c.groups["g"].pending_members, 3)
    run(tmp_path / "d", scenario)


def test_the_log_cleaner_compacts_consumer_offsets_and_a_reload_after_it_is_exact(tmp_path):
    data = tmp_path / "d"
    small = {"offsets.topic.segment.bytes": "2048", "offsets.topic.num.partitions": "1"}

    async def write(broker, c):
        for n in range(200):  # the same two partitions over and over: a compacted log keeps the last of each
            await c.commit_offsets("g", -1, "", None, {("t", 0): offset(n), ("t", 1): offset(1000 + n)})
        await c.commit_offsets("gone", -1, "", None, {("t", 0): offset(5)})
        assert await c.delete_groups(["gone"]) == {"gone": 0}
        log = broker.cl.manager.get_log(TOPIC, 0)
        before = log.size
        report = broker.cl.clean(TOPIC)
        assert report.compactions and log.size < before / 4
        survivors = [r for b in log.batches() for r in b.records()]
        assert len(survivors) < 40  # the active segment's records, the latest of each key, one tombstone

    async def reload(broker, c):
        assert c.fetch_offsets("g", None) == (0, [(("t", 0), offset(199)), (("t", 1), offset(1199))])
        assert "gone" not in c.groups

    run(data, write, **small)
    run(data, reload, **small)


def test_a_static_member_comes_back_after_a_broker_restart_without_a_rebalance(tmp_path):
    data = tmp_path / "d"
    both = (("range", SUB), ("roundrobin", SUB))
    ids = {}

    async def first(broker, c):
        s = await join(c, instance="inst", protocols=both)
        assert (await c.sync_group("g", 1, s.member_id, "inst", {s.member_id: b"S"})).error == 0
        ids["s"] = s.member_id

    async def second(broker, c):
        again = await join(c, instance="inst", protocols=both)  # the client restarted too: no member id
        assert (again.error, again.generation_id, again.leader_id) == (0, 1, ids["s"])
        assert (await c.sync_group("g", 1, again.member_id, "inst", {})).assignment == b"S"
        assert c.groups["g"].state is STABLE

    run(data, first)
    run(data, second)


def test_a_restarted_static_leader_on_join_group_v9_is_told_it_leads_and_to_skip_the_assignment(tmp_path):
    async def scenario(broker, c):
        s = await join(c, instance="lead")
        await c.sync_group("g", 1, s.member_id, "lead", {s.member_id: b"S"})
        f_task = asyncio.create_task(join(c, instance="follow"))
        await eventually(lambda: c.groups["g"].state is PREPARING_REBALANCE)
        assert (await join(c, member_id=s.member_id, instance="lead")).generation_id == 2
        f = await f_task
        await c.sync_group("g", 2, s.member_id, "lead", {s.member_id: b"S", f.member_id: b"F"})
        # v9: the leader's new id is named leader, with the members, and skips the assignment (Kafka 3.7)
        lead = await c.join_group("g", "", "lead", "client", "/127.0.0.1", 10_000, 5_000, "consumer",
                                  (("range", SUB),), True, reason="restarted", may_skip_assignment=True)
        assert (lead.error, lead.generation_id, lead.leader_id, lead.skip_assignment) == (0, 2, lead.member_id, True)
        assert {m for m, _, _ in lead.members} == {lead.member_id, f.member_id}
        # a follower restarting on v9 is not the leader: nothing to skip, no members
        follow = await c.join_group("g", "", "follow", "client", "/127.0.0.1", 10_000, 5_000, "consumer",
                                    (("range", SUB),), True, may_skip_assignment=True)
        assert (follow.leader_id, follow.skip_assignment, follow.members) == (lead.member_id, False, ())
        assert c.groups["g"].state is STABLE  # no rebalance: the assignment stands
        assert (await c.sync_group("g", 2, lead.member_id, "lead", {})).assignment == b"S"
        assert (await c.sync_group("g", 2, follow.member_id, "follow", {})).assignment == b"F"
    run(tmp_path / "d", scenario)


def test_sync_group_v5_names_the_protocol_and_refuses_another(tmp_path):
    async def scenario(broker, c):
        a = await join_with_id(c)
        synced = await c.sync_group("g", 1, a.member_id, None, {a.member_id: b"A"}, "consumer", "range")
        assert (synced.error, synced.protocol_type, synced.protocol_name, synced.assignment) == (
            0, "consumer", "range", b"A")
        assert (await c.sync_group("g", 1, a.member_id, None, {}, "connect", None)).error == 23
        assert (await c.sync_group("g", 1, a.member_id, None, {}, None, "roundrobin")).error == 23
        stable = await c.sync_group("g", 1, a.member_id, None, {})  # v0-4 name neither: no check
        assert (stable.error, stable.protocol_type, stable.protocol_name) == (0, "consumer", "range")
        assert (await c.sync_group("g", 7, a.member_id, None, {}, "connect", None)).error == 22  # generation first
        assert c.list_groups() == (0, [("g", "consumer", "Stable")])
    run(tmp_path / "d", scenario)
