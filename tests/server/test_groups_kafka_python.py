"""Consumer groups with kafka-python against a real ``compactlog serve``: reading and committing, sharing
partitions, losing a member that left or died, resuming after broker restarts (SIGTERM and SIGKILL), and
KafkaAdminClient's group calls (ListGroups, DescribeGroups, OffsetFetch, OffsetDelete, LeaveGroup by
instance id, DeleteGroups)."""

from __future__ import annotations

import time

import pytest

kafka = pytest.importorskip("kafka")
from groups_support import (
    SESSION_MS,
    MemberProcess,
    create_topic,
    partitions,
    produce,
    read_through_restarts,
    values,
    wait_until,
)
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import GroupState, KafkaAdminClient, MemberToRemove
from kafka.protocol.consumer import OffsetFetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest

# kafka-python 3.0.12 loses a rejoin (no heartbeats, no assignment) when a poll() times out while the
# JoinGroup/SyncGroup of a rejoin its leader started for changed metadata is in flight. Two habits keep
# these tests clear of it: the topic's metadata is known before subscribing (so the first assignment is
# complete and no such rejoin follows), and polls wait longer than a join round trip.
POLL_MS = 1000


def consumer(bootstrap: str, group: str, *topics: str, **conf) -> KafkaConsumer:
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                      enable_auto_commit=False, session_timeout_ms=SESSION_MS, heartbeat_interval_ms=300,
                      max_poll_interval_ms=SESSION_MS, **conf)
    for t in topics:
        assert c.partitions_for_topic(t)
    if topics:
        c.subscribe(list(topics))
    return c


def read(c: KafkaConsumer, n: int, timeout: float = 30) -> list:
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < n:
        assert time.monotonic() < deadline, f"read {len(out)} of {n} records"
        for records in c.poll(POLL_MS).values():
            out.extend(records)
    return out


def read_all_and_commit(bootstrap: str, group: str, topic: str, expected: list[bytes]) -> None:
    c = consumer(bootstrap, group, topic)
    try:
        assert sorted(r.value for r in read(c, len(expected))) == sorted(expected)
        c.commit()
    finally:
        c.close()


def test_a_group_reads_from_the_beginning_and_resumes_after_restarts(server):
    read_through_restarts(server, read_all_and_commit)
    c = consumer(server.bootstrap, "shop")
    try:
        assert sum(c.committed(TopicPartition("prices", p)) for p in range(3)) == 120
        assert c.committed(TopicPartition("prices", 0)) is not None
    finally:
        c.close()


def test_members_share_partitions_and_take_over_from_one_that_leaves_or_dies(server):
    create_topic(server.bootstrap, "orders", 4)
    a = consumer(server.bootstrap, "workers", "orders")
    wait_until(lambda: partitions(a) == [0, 1, 2, 3], 30, lambda: a.poll(POLL_MS), "a alone owns every partition")
    killed = MemberProcess("kafka-python", server.bootstrap, "workers", "orders")
    try:
        wait_until(lambda: len(partitions(a)) == 2 and len(killed.assignment) == 2, 30, lambda: a.poll(POLL_MS),
                   "the partitions split between a and the other process")
        assert sorted(partitions(a) + killed.assignment) == [0, 1, 2, 3]
        killed.kill()
        wait_until(lambda: partitions(a) == [0, 1, 2, 3], 30, lambda: a.poll(POLL_MS), "a takes over after the session")
    finally:
        killed.kill()
    b = consumer(server.bootstrap, "workers", "orders")

    def both() -> None:
        a.poll(POLL_MS // 2)
        b.poll(POLL_MS // 2)

    wait_until(lambda: len(partitions(a)) == 2 and len(partitions(b)) == 2, 30, both, "a and b share")
    b.close()
    started = time.monotonic()
    wait_until(lambda: partitions(a) == [0, 1, 2, 3], 30, lambda: a.poll(POLL_MS), "a takes over after b left")
    assert time.monotonic() - started < SESSION_MS / 1000
    a.close()


def listed_ids(admin: KafkaAdminClient, **filters) -> set[str]:
    return {g["group_id"] for g in admin.list_groups(**filters)}


def test_admin_client_group_calls(server):
    create_topic(server.bootstrap, "stock", 2)
    create_topic(server.bootstrap, "old", 1)
    produce(server.bootstrap, "stock", values("s", 10))
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    try:
        c = consumer(server.bootstrap, "warehouse", "stock", client_id="picker", group_instance_id="picker-1")
        read(c, 10)
        c.commit()
        # a partition of a topic nobody in the group reads, committed by a client outside the group
        standalone = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id="warehouse", enable_auto_commit=False)
        with pytest.raises(kafka.errors.KafkaError):  # a member-less commit into a live group is refused
            standalone.commit({TopicPartition("old", 0): kafka.structs.OffsetAndMetadata(5, "", -1)})
        standalone.close()

        # ListGroups v5: each group with its state and type, filtered by state and type on the broker
        assert {"group_id": "warehouse", "protocol_type": "consumer", "group_state": "Stable",
                "group_type": "classic"}.items() <= {g["group_id"]: g for g in admin.list_groups()}["warehouse"].items()
        assert listed_ids(admin, states_filter=["Stable"]) == {"warehouse"}
        assert listed_ids(admin, states_filter=["Empty", GroupState.COMPLETING_REBALANCE]) == set()
        assert listed_ids(admin, types_filter=["classic"]) == {"warehouse"}
        assert listed_ids(admin, types_filter=["consumer"]) == set()
        desc = admin.describe_groups(["warehouse"])["warehouse"]
        assert (desc["error"], desc["group_state"], desc["protocol_type"], desc["protocol_data"]) == (
            None, "Stable", "consumer", "range")
        assert sorted(desc["authorized_operations"]) == ["DELETE", "DESCRIBE", "READ"]
        (member,) = desc["members"]
        assert (member["client_id"], member["client_host"]) == ("picker", "/127.0.0.1")
        assert member["member_metadata"]["topics"] == ["stock"]  # decoded by the client: our bytes are its own
        assignment = member["member_assignment"]["assigned_partitions"]
        assert [(a["topic"], sorted(a["partitions"])) for a in assignment] == [("stock", [0, 1])]
        # FindCoordinator v4 with both keys in one request, then OffsetFetch v8 with both groups in one
        assert admin._manager.broker_version_data.api_version(OffsetFetchRequest) >= 8
        assert admin._manager.broker_version_data.api_version(FindCoordinatorRequest) >= 4
        both = admin.list_group_offsets({"warehouse": None, "nobody": [TopicPartition("stock", 1)]})
        offsets = both["warehouse"]
        assert sorted(offsets) == [TopicPartition("stock", 0), TopicPartition("stock", 1)]
        assert both["nobody"][TopicPartition("stock", 1)].offset == -1
        assert sum(om.offset for om in offsets.values()) == 10
        assert admin.delete_group_offsets("warehouse", [TopicPartition("stock", 0)]) == {
            TopicPartition("stock", 0): kafka.errors.GroupSubscribedToTopicError}
        assert admin.delete_groups(["warehouse"]) == {"warehouse": "NonEmptyGroupError"}

        # a static member does not leave on close; restarted with the same instance id, it takes its old
        # place without a rebalance (same generation, same partitions, a new member id)
        generation = c._coordinator._generation.generation_id
        c.close()
        assert admin.describe_groups(["warehouse"])["warehouse"]["group_state"] == "Stable"
        again = consumer(server.bootstrap, "warehouse", "stock", client_id="picker", group_instance_id="picker-1")
        wait_until(lambda: partitions(again) == [0, 1], 30, lambda: again.poll(POLL_MS), "the static member is back")
        assert again._coordinator._generation.generation_id == generation
        (back,) = admin.describe_groups(["warehouse"])["warehouse"]["members"]
        assert back["member_id"] != member["member_id"]
        again.close()
        # an administrator removes it by its instance id
        removed = admin.remove_group_members("warehouse", [MemberToRemove(group_instance_id="picker-1")])
        assert list(removed.values()) == [kafka.errors.NoError]
        assert admin.describe_groups(["warehouse"])["warehouse"]["group_state"] == "Empty"
        assert listed_ids(admin, states_filter=["Empty"]) == {"warehouse"}
        assert admin.delete_group_offsets("warehouse", [TopicPartition("stock", 0)]) == {
            TopicPartition("stock", 0): kafka.errors.NoError}
        assert list(admin.list_group_offsets({"warehouse": None})["warehouse"]) == [TopicPartition("stock", 1)]
        assert admin.delete_groups(["warehouse", "never"]) == {"warehouse": "OK", "never": "GroupIdNotFoundError"}
        assert "warehouse" not in {g["group_id"] for g in admin.list_groups()}
        # unknown group: OffsetFetch answers -1 for a named partition, nothing for "all"
        fetched = admin.list_group_offsets({"never": [TopicPartition("stock", 0)]})["never"]
        assert fetched[TopicPartition("stock", 0)].offset == -1
        assert admin.list_group_offsets({"never": None})["never"] == {}
        assert admin.describe_groups(["never"])["never"]["group_state"] == "Dead"
    finally:
        admin.close()
