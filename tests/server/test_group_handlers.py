"""The group APIs on the wire, in-process: each version's request fields and response layout (every
response also goes through the encoder), and Kafka's access checks on groups and topics."""

from __future__ import annotations

import asyncio
import datetime
import importlib

from compactlog.security.acls import (
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from compactlog.server import apis
from compactlog.server.broker import Broker, Session
from compactlog.server.coordinator.manager import TOPIC, GroupMetadataManager
from compactlog.group_records import decode_offset_commit
from compactlog.server.protocol import Connection, Request
from compactlog.server.server_config import ServerConfig
from compactlog.server.versions import SERVED, request_class

SUB = b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"
ANYONE = Session("127.0.0.1", 5555)


def ms(n: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=n)


def nested(key: int, version: int, entity: str, **fields):
    """One of a request's nested entities (kio's class of that name at that version)."""
    module = importlib.import_module(f"kio.schema.{SERVED[key].name}.v{version}.request")
    return getattr(module, entity)(**fields)


def scenario(tmp_path, body) -> None:
    async def main() -> None:
        broker = apis.install(Broker(tmp_path / "d", ServerConfig({"group.initial.rebalance.delay.ms": "0",
                                                                   "offsets.topic.num.partitions": "2"}),
                                     host="127.0.0.1", port=9092, background=False))
        try:
            await broker.start()
            while broker.extras["group_coordinator"].loading:
                await asyncio.sleep(0.01)
            broker.cl.create_topic("t", 2)
            broker.cl.create_topic("u", 1)
            wire = Connection()

            async def call(key: int, version: int, session: Session = ANYONE, **fields):
                req = Request(key, version, 7, "client", request_class(key, version)(**fields), 0)
                resp = await broker.handle(req, session)
                assert wire.encode(req, resp)  # every answer encodes at its version
                return resp

            await body(broker, call)
        finally:
            await broker.stop()
            broker.close()
    asyncio.run(asyncio.wait_for(main(), 30))


def test_old_and_new_versions_of_the_membership_apis(tmp_path):
    async def body(broker, call):
        proto = (nested(11, 0, "JoinGroupRequestProtocol", name="range", metadata=SUB),)
        j = await call(11, 0, group_id="g", session_timeout=ms(6000), member_id="", protocol_type="consumer",
                       protocols=proto)  # v0: no MEMBER_ID_REQUIRED round, the session timeout is both
        assert (j.error_code, j.generation_id, j.leader) == (0, 1, j.member_id)
        assert j.member_id.startswith("client-") and len(j.members) == 1
        assignment = (nested(14, 0, "SyncGroupRequestAssignment", member_id=j.member_id, assignment=b"A"),)
        s = await call(14, 0, group_id="g", generation_id=1, member_id=j.member_id, assignments=assignment)
        assert (s.error_code, s.assignment) == (0, b"A")
        assert (await call(12, 0, group_id="g", generation_id=1, member_id=j.member_id)).error_code == 0
        assert (await call(12, 3, group_id="g", generation_id=9, member_id=j.member_id,
                           group_instance_id=None)).error_code == 22
        # v4+: MEMBER_ID_REQUIRED with the id to use
        proto5 = (nested(11, 5, "JoinGroupRequestProtocol", name="range", metadata=SUB),)
        first = await call(11, 5, group_id="g2", session_timeout=ms(6000), rebalance_timeout=ms(6000), member_id="",
                           group_instance_id=None, protocol_type="consumer", protocols=proto5)
        assert first.error_code == 79 and first.member_id and first.generation_id == -1
        # LeaveGroup v0-2: one member, its error is the request's; v3: a batch with an error each
        assert (await call(13, 0, group_id="g", member_id="nobody")).error_code == 25
        v3 = await call(13, 3, group_id="g", members=(
            nested(13, 3, "MemberIdentity", member_id=j.member_id, group_instance_id=None),
            nested(13, 3, "MemberIdentity", member_id="nobody", group_instance_id=None)))
        assert v3.error_code == 0 and [m.error_code for m in v3.members] == [0, 25]
        d = await call(15, 0, groups=("g", "missing"))
        assert [(x.group_id, x.group_state, x.error_code) for x in d.groups] == [
            ("g", "Empty", 0), ("missing", "Dead", 0)]
        listed = await call(16, 0)
        assert {g.group_id for g in listed.groups} == {"g", "g2"}
    scenario(tmp_path, body)


def test_offset_commit_and_fetch_layouts(tmp_path):
    async def body(broker, call):
        def commit_topic(version, name, *parts, metadata=None):
            cls = "OffsetCommitRequestPartition"
            fields = {"committed_metadata": metadata}
            if version >= 6:
                fields["committed_leader_epoch"] = 3
            return nested(8, version, "OffsetCommitRequestTopic", name=name, partitions=tuple(
                nested(8, version, cls, partition_index=p, committed_offset=10 + p, **fields) for p in parts))

        # v2 with its own retention: the value is written in v1, with an expiry; unknown partitions get 3
        c = await call(8, 2, group_id="solo", generation_id_or_member_epoch=-1, member_id="", retention_time=ms(60000),
                       topics=(commit_topic(2, "t", 0, 5), commit_topic(2, "nope", 0)))
        assert [[p.error_code for p in t.partitions] for t in c.topics] == [[0, 3], [3]]
        partition = GroupMetadataManager(broker.cl, broker.config).partition_for("solo")
        (rec,) = [r for b in broker.cl.manager.get_log(TOPIC, partition).batches() for r in b.records()]
        value = decode_offset_commit(rec.value)
        assert rec.value[:2] == b"\x00\x01" and value.expire_timestamp - value.commit_timestamp == 60000
        c = await call(8, 7, group_id="solo", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                       topics=(commit_topic(7, "t", 1, metadata="m"),))
        assert c.topics[0].partitions[0].error_code == 0
        # OffsetFetch v1: per partition; v2+: null topics means every committed partition
        f1 = await call(9, 1, group_id="solo", topics=(
            nested(9, 1, "OffsetFetchRequestTopic", name="t", partition_indexes=(0, 1)),))
        assert [(p.partition_index, p.committed_offset, p.metadata) for p in f1.topics[0].partitions] == [
            (0, 10, ""), (1, 11, "m")]
        f5 = await call(9, 5, group_id="solo", topics=None)
        assert [(p.committed_offset, p.committed_leader_epoch) for p in f5.topics[0].partitions] == [(10, -1), (11, 3)]
        unknown = await call(9, 5, group_id="never", topics=(
            nested(9, 5, "OffsetFetchRequestTopic", name="t", partition_indexes=(0,)),))
        assert (unknown.error_code, unknown.topics[0].partitions[0].committed_offset) == (0, -1)
        # while loading: v1 says so per partition, v2+ once for the request
        broker.extras["group_coordinator"].loading = True
        f1 = await call(9, 1, group_id="solo", topics=(
            nested(9, 1, "OffsetFetchRequestTopic", name="t", partition_indexes=(0,)),))
        assert f1.topics[0].partitions[0].error_code == 14
        f5 = await call(9, 5, group_id="solo", topics=None)
        assert (f5.error_code, f5.topics) == (14, ())
        broker.extras["group_coordinator"].loading = False
        # OffsetDelete: group errors at the top, partition errors below
        d = await call(47, 0, group_id="solo", topics=(nested(47, 0, "OffsetDeleteRequestTopic", name="t", partitions=(
            nested(47, 0, "OffsetDeleteRequestPartition", partition_index=0),)),))
        assert (d.error_code, d.topics[0].partitions[0].error_code) == (0, 0)
        d = await call(47, 0, group_id="never", topics=())
        assert d.error_code == 69
        assert [r.error_code for r in (await call(42, 1, groups_names=("solo", "never"))).results] == [0, 69]
    scenario(tmp_path, body)


def allow(broker, rtype: str, name: str, op: str, principal: str = "User:alice") -> None:
    broker.extras["acls"].add([AclBinding(ResourceType[rtype], name, PatternType.LITERAL, principal, "*",
                                          Operation[op], Permission.ALLOW)])


def test_access_to_groups_and_their_topics_is_checked_as_in_kafka(tmp_path):
    alice = Session("127.0.0.1", 5555, principal="User:alice")

    async def body(broker, call):
        allow(broker, "TOPIC", "t", "READ")  # an ACL exists now: whatever none allows is refused

        def topics(version, *names):
            return tuple(nested(8, version, "OffsetCommitRequestTopic", name=n, partitions=(
                nested(8, version, "OffsetCommitRequestPartition", partition_index=0, committed_offset=1,
                       committed_metadata=None),)) for n in names)

        proto = (nested(11, 5, "JoinGroupRequestProtocol", name="range", metadata=SUB),)
        j = await call(11, 5, alice, group_id="g", session_timeout=ms(6000), rebalance_timeout=ms(6000), member_id="",
                       group_instance_id=None, protocol_type="consumer", protocols=proto)
        assert j.error_code == 30
        c = await call(8, 3, alice, group_id="g", generation_id_or_member_epoch=-1, member_id="",
                       retention_time=ms(-1), topics=topics(3, "t"))
        assert c.topics[0].partitions[0].error_code == 30
        allow(broker, "GROUP", "g", "READ")
        c = await call(8, 3, alice, group_id="g", generation_id_or_member_epoch=-1, member_id="",
                       retention_time=ms(-1), topics=topics(3, "t", "u"))
        assert [t.partitions[0].error_code for t in c.topics] == [0, 29]
        f = await call(9, 5, alice, group_id="g", topics=(
            nested(9, 5, "OffsetFetchRequestTopic", name="t", partition_indexes=(0,)),
            nested(9, 5, "OffsetFetchRequestTopic", name="u", partition_indexes=(0,))))
        assert [(t.name, t.partitions[0].error_code, t.partitions[0].committed_offset) for t in f.topics] == [
            ("t", 0, 1), ("u", 29, -1)]
        # the anonymous session sees nothing of it: no group in the list, 30 when named
        await call(8, 3, ANYONE, group_id="other", generation_id_or_member_epoch=-1, member_id="",
                   retention_time=ms(-1), topics=topics(3, "t"))
        assert [g.group_id for g in (await call(16, 2, alice)).groups] == ["g"]  # READ implies DESCRIBE
        d = await call(15, 3, alice, groups=("g", "other"), include_authorized_operations=True)
        # Kafka computes the operations only for groups described without error
        assert [(x.error_code, x.authorized_operations) for x in d.groups] == [(0, (1 << 3) | (1 << 8)),
                                                                              (30, -(2**31))]
        assert [r.error_code for r in (await call(42, 1, alice, groups_names=("g",))).results] == [30]
        allow(broker, "GROUP", "g", "DELETE")
        assert [r.error_code for r in (await call(42, 1, alice, groups_names=("g",))).results] == [0]
    scenario(tmp_path, body)


def test_the_flexible_versions_of_kafka_3_7(tmp_path):
    alice = Session("127.0.0.1", 5555, principal="User:alice")

    async def body(broker, call):
        proto = (nested(11, 9, "JoinGroupRequestProtocol", name="range", metadata=SUB),)
        join = dict(group_id="g", session_timeout=ms(6000), rebalance_timeout=ms(6000), group_instance_id=None,
                    protocol_type="consumer", protocols=proto, reason="starting")
        first = await call(11, 9, member_id="", **join)
        # v7+: no protocol yet is null, not an empty string
        assert (first.error_code, first.protocol_type, first.protocol_name, first.skip_assignment) == (
            79, None, None, False)
        j = await call(11, 9, member_id=first.member_id, **join)
        assert (j.error_code, j.generation_id, j.protocol_type, j.protocol_name, j.leader) == (
            0, 1, "consumer", "range", j.member_id)
        pending = await call(11, 6, member_id="", **{k: v for k, v in join.items() if k != "reason"})
        assert (pending.error_code, pending.protocol_name) == (79, "")  # before v7: an empty string
        sync = dict(group_id="g", generation_id=1, member_id=j.member_id, group_instance_id=None, assignments=(
            nested(14, 5, "SyncGroupRequestAssignment", member_id=j.member_id, assignment=b"A"),))
        wrong = await call(14, 5, protocol_type="consumer", protocol_name="roundrobin", **sync)
        assert (wrong.error_code, wrong.protocol_name, wrong.assignment) == (23, None, b"")
        s = await call(14, 5, protocol_type="consumer", protocol_name="range", **sync)
        assert (s.error_code, s.protocol_type, s.protocol_name, s.assignment) == (0, "consumer", "range", b"A")
        assert (await call(12, 4, group_id="g", generation_id=1, member_id=j.member_id,
                           group_instance_id=None)).error_code == 0
        c = await call(8, 9, group_id="g", generation_id_or_member_epoch=1, member_id=j.member_id,
                       group_instance_id=None, topics=(nested(8, 9, "OffsetCommitRequestTopic", name="t", partitions=(
                           nested(8, 9, "OffsetCommitRequestPartition", partition_index=1, committed_offset=5,
                                  committed_leader_epoch=-1, committed_metadata=None),)),))
        assert c.topics[0].partitions[0].error_code == 0
        await call(8, 9, group_id="solo", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                   topics=(nested(8, 9, "OffsetCommitRequestTopic", name="u", partitions=(
                       nested(8, 9, "OffsetCommitRequestPartition", partition_index=0, committed_offset=9,
                              committed_leader_epoch=-1, committed_metadata="m"),)),))

        # ListGroups v4: states, and a states filter that ignores case; v5: every group is classic
        listed = await call(16, 4, states_filter=())
        assert sorted((g.group_id, g.protocol_type, g.group_state) for g in listed.groups) == [
            ("g", "consumer", "Stable"), ("solo", "", "Empty")]
        assert [g.group_id for g in (await call(16, 4, states_filter=("stable", "Dead"))).groups] == ["g"]
        assert [g.group_id for g in (await call(16, 4, states_filter=("Empty",))).groups] == ["solo"]
        assert (await call(16, 4, states_filter=("PreparingRebalance",))).groups == ()
        v5 = await call(16, 5, states_filter=("EMPTY",), types_filter=())
        assert [(g.group_id, g.group_type) for g in v5.groups] == [("solo", "classic")]
        assert len((await call(16, 5, states_filter=(), types_filter=("Classic",))).groups) == 2
        assert (await call(16, 5, states_filter=(), types_filter=("consumer",))).groups == ()

        # OffsetFetch v8-9: several groups in one request, each with its own error
        def group(version, group_id, topics, **extra):
            return nested(9, version, "OffsetFetchRequestGroup", group_id=group_id, topics=None if topics is None
                          else tuple(nested(9, version, "OffsetFetchRequestTopics", name=n, partition_indexes=p)
                                     for n, p in topics), **extra)
        f = await call(9, 8, require_stable=True, groups=(
            group(8, "g", [("t", (0, 1))]), group(8, "solo", None), group(8, "never", [("t", (0,))])))
        assert [(x.group_id, x.error_code) for x in f.groups] == [("g", 0), ("solo", 0), ("never", 0)]
        assert [(p.partition_index, p.committed_offset) for p in f.groups[0].topics[0].partitions] == [(0, -1), (1, 5)]
        assert [(t.name, t.partitions[0].committed_offset, t.partitions[0].metadata) for t in f.groups[1].topics] == [
            ("u", 9, "m")]
        assert f.groups[2].topics[0].partitions[0].committed_offset == -1
        f9 = await call(9, 9, require_stable=False, groups=(
            group(9, "g", [("t", (1,))], member_id=j.member_id, member_epoch=1),  # a classic group ignores these
            group(9, "g", [("t", (1,))], member_id="someone-else", member_epoch=42)))
        assert [x.topics[0].partitions[0].committed_offset for x in f9.groups] == [5, 5]

        # DescribeGroups v5: operations only when asked
        d = await call(15, 5, groups=("g", "never"), include_authorized_operations=False)
        assert [(x.group_state, x.authorized_operations) for x in d.groups] == [("Stable", -(2**31)), ("Dead", -(2**31))]
        assert d.groups[0].members[0].group_instance_id is None
        d = await call(15, 5, groups=("g",), include_authorized_operations=True)
        assert d.groups[0].authorized_operations == (1 << 3) | (1 << 6) | (1 << 8)  # READ, DELETE, DESCRIBE

        # FindCoordinator v4: an answer per key
        fc = await call(10, 4, key_type=0, coordinator_keys=("g", "", "other"))
        assert [(x.key, x.error_code, x.node_id) for x in fc.coordinators] == [("g", 0, 1), ("", 24, -1), ("other", 0, 1)]
        assert (await call(10, 4, key_type=1, coordinator_keys=("tx",))).coordinators[0].error_code == 0  # transactions
        assert (await call(10, 4, key_type=7, coordinator_keys=("g",))).coordinators[0].error_code == 42

        # LeaveGroup v5 with a reason; DeleteGroups v2
        left = await call(13, 5, group_id="g", members=(
            nested(13, 5, "MemberIdentity", member_id=j.member_id, group_instance_id=None, reason="shutting down"),
            nested(13, 5, "MemberIdentity", member_id=pending.member_id, group_instance_id=None, reason=None)))
        assert (left.error_code, [m.error_code for m in left.members]) == (0, [0, 0])
        assert [r.error_code for r in (await call(42, 2, groups_names=("g", "never"))).results] == [0, 69]

        # with ACLs: a group the client may not describe is refused by itself, the others answered
        allow(broker, "GROUP", "solo", "DESCRIBE")
        allow(broker, "TOPIC", "u", "DESCRIBE")
        f = await call(9, 8, alice, require_stable=False, groups=(group(8, "solo", None), group(8, "g", None)))
        assert [(x.group_id, x.error_code, len(x.topics)) for x in f.groups] == [("solo", 0, 1), ("g", 30, 0)]
        fc = await call(10, 4, alice, key_type=0, coordinator_keys=("solo", "g"))
        assert [x.error_code for x in fc.coordinators] == [0, 30]
        assert [g.group_id for g in (await call(16, 4, alice, states_filter=())).groups] == ["solo"]
    scenario(tmp_path, body)
