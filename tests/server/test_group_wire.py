"""The group APIs' newest versions as bytes on a socket to a real ``compactlog serve`` (no client library):
ApiVersions advertises Kafka 3.7's ranges, FindCoordinator v4 answers several keys at once, and the
flexible versions of the membership and offset APIs round-trip with their request and response headers
(v2 and v1, with tagged fields)."""

from __future__ import annotations

import pytest
import wire
from wire import RawClient, module_of, ms

GROUP_RANGES = {8: (2, 9), 9: (1, 9), 10: (0, 4), 11: (0, 9), 12: (0, 4), 13: (0, 5), 14: (0, 5), 15: (0, 5),
                16: (0, 5), 42: (0, 2)}
SUB = b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"  # ConsumerProtocolSubscription v0 of topic "t"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with wire.serving(tmp_path_factory.mktemp("group-wire") / "data") as s:
        with RawClient.to(s) as c:
            c.call(wire.metadata(["t"], auto_create=True))
        yield s


def request(api: str, version: int, **fields):
    mod = module_of(api, version, "request")
    return getattr(mod, "".join(p.capitalize() for p in api.split("_")) + "Request")(**fields)


def nested(api: str, version: int, entity: str, **fields):
    return getattr(module_of(api, version, "request"), entity)(**fields)


def test_api_versions_advertises_kafka_3_7s_group_ranges(server):
    with RawClient.to(server) as c:
        answer = c.call(wire.api_versions(3))
    advertised = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
    assert {key: advertised.get(key) for key in GROUP_RANGES} == GROUP_RANGES


def test_find_coordinator_v4_answers_each_key(server):
    with RawClient.to(server) as c:
        answer = c.call(request("find_coordinator", 4, key_type=0, coordinator_keys=("a", "b", "", "a")))
        assert [(x.key, x.error_code, x.node_id, x.port) for x in answer.coordinators] == [
            ("a", 0, 1, server.port), ("b", 0, 1, server.port), ("", 24, -1, -1), ("a", 0, 1, server.port)]
        assert {x.host for x in answer.coordinators if x.node_id == 1} == {"127.0.0.1"}
        assert c.call(request("find_coordinator", 4, key_type=0, coordinator_keys=())).coordinators == ()
        (tx,) = c.call(request("find_coordinator", 4, key_type=1, coordinator_keys=("tx",))).coordinators
        assert (tx.key, tx.error_code, tx.node_id, tx.port) == ("tx", 0, 1, server.port)  # the transaction coordinator
        old = c.call(request("find_coordinator", 3, key_type=0, key="a"))  # v3: one key, flexible too
        assert (old.error_code, old.node_id, old.port) == (0, 1, server.port)


def test_a_group_through_the_flexible_versions(server):
    with RawClient.to(server) as c:
        join = dict(group_id="wired", session_timeout=ms(6000), rebalance_timeout=ms(6000), group_instance_id=None,
                    protocol_type="consumer", reason="first start",
                    protocols=(nested("join_group", 9, "JoinGroupRequestProtocol", name="range", metadata=SUB),))
        first = c.call(request("join_group", 9, member_id="", **join))
        assert first.error_code == 79 and first.protocol_name is None
        j = c.call(request("join_group", 9, member_id=first.member_id, **join))
        assert (j.error_code, j.generation_id, j.protocol_type, j.protocol_name, j.leader, j.skip_assignment) == (
            0, 1, "consumer", "range", j.member_id, False)
        s = c.call(request("sync_group", 5, group_id="wired", generation_id=1, member_id=j.member_id,
                           group_instance_id=None, protocol_type="consumer", protocol_name="range", assignments=(
                               nested("sync_group", 5, "SyncGroupRequestAssignment", member_id=j.member_id,
                                      assignment=b"all of it"),)))
        assert (s.error_code, s.protocol_type, s.protocol_name, s.assignment) == (0, "consumer", "range", b"all of it")
        assert c.call(request("heartbeat", 4, group_id="wired", generation_id=1, member_id=j.member_id,
                              group_instance_id=None)).error_code == 0
        commit = c.call(request("offset_commit", 9, group_id="wired", generation_id_or_member_epoch=1,
                                member_id=j.member_id, group_instance_id=None, topics=(
                                    nested("offset_commit", 9, "OffsetCommitRequestTopic", name="t", partitions=(
                                        nested("offset_commit", 9, "OffsetCommitRequestPartition", partition_index=0,
                                               committed_offset=42, committed_leader_epoch=0,
                                               committed_metadata="here"),)),)))
        assert commit.topics[0].partitions[0].error_code == 0
        fetched = c.call(request("offset_fetch", 9, require_stable=True, groups=tuple(
            nested("offset_fetch", 9, "OffsetFetchRequestGroup", group_id=g, member_id=None, member_epoch=-1,
                   topics=None) for g in ("wired", "nobody"))))
        assert [(g.group_id, g.error_code) for g in fetched.groups] == [("wired", 0), ("nobody", 0)]
        ((part,),) = [[p for t in g.topics for p in t.partitions] for g in fetched.groups[:1]]
        assert (part.partition_index, part.committed_offset, part.committed_leader_epoch, part.metadata) == (
            0, 42, 0, "here")
        assert fetched.groups[1].topics == ()
        listed = c.call(request("list_groups", 5, states_filter=("Stable",), types_filter=("classic",)))
        assert [(g.group_id, g.group_state, g.group_type) for g in listed.groups] == [("wired", "Stable", "classic")]
        (described,) = c.call(request("describe_groups", 5, groups=("wired",),
                                      include_authorized_operations=True)).groups
        assert (described.group_state, described.protocol_data, described.authorized_operations) == (
            "Stable", "range", (1 << 3) | (1 << 6) | (1 << 8))
        left = c.call(request("leave_group", 5, group_id="wired", members=(
            nested("leave_group", 5, "MemberIdentity", member_id=j.member_id, group_instance_id=None,
                   reason="done for the day"),)))
        assert (left.error_code, [m.error_code for m in left.members]) == (0, [0])
        deleted = c.call(request("delete_groups", 2, groups_names=("wired",)))
        assert [(r.group_id, r.error_code) for r in deleted.results] == [("wired", 0)]


def test_a_restarted_static_leader_skips_the_assignment_only_from_join_group_v9(server):
    def join(c, version: int, member_id: str = ""):
        fields = dict(group_id="static", session_timeout=ms(6000), rebalance_timeout=ms(6000), member_id=member_id,
                      group_instance_id="host-1", protocol_type="consumer", protocols=(
                          nested("join_group", version, "JoinGroupRequestProtocol", name="range", metadata=SUB),))
        if version >= 8:
            fields["reason"] = "restarted"
        return c.call(request("join_group", version, **fields))

    with RawClient.to(server) as c:
        first = join(c, 9)  # a static member gets its id at once
        assert (first.error_code, first.generation_id, first.leader) == (0, 1, first.member_id)
        s = c.call(request("sync_group", 5, group_id="static", generation_id=1, member_id=first.member_id,
                           group_instance_id="host-1", protocol_type="consumer", protocol_name="range", assignments=(
                               nested("sync_group", 5, "SyncGroupRequestAssignment", member_id=first.member_id,
                                      assignment=b"mine"),)))
        assert s.error_code == 0
        # before v9 the restarted leader is told the old leader id, so it computes nothing
        v8 = join(c, 8)
        assert (v8.error_code, v8.generation_id, v8.leader, v8.members) == (0, 1, first.member_id, ())
        # v9: named leader, with the members, and told to skip the assignment; the group stays Stable
        v9 = join(c, 9)
        assert (v9.error_code, v9.generation_id, v9.leader, v9.skip_assignment) == (0, 1, v9.member_id, True)
        assert [m.member_id for m in v9.members] == [v9.member_id]
        again = c.call(request("sync_group", 5, group_id="static", generation_id=1, member_id=v9.member_id,
                               group_instance_id="host-1", protocol_type="consumer", protocol_name="range",
                               assignments=()))
        assert (again.error_code, again.assignment) == (0, b"mine")
