"""Consumer groups with librdkafka (confluent-kafka) against a real ``compactlog serve``: reading and
committing, sharing partitions, losing a member that left or died, resuming after a broker restart
(SIGTERM and SIGKILL), and the admin calls ListGroups / DescribeGroups / DeleteGroups / OffsetFetch."""

from __future__ import annotations

import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, ConsumerGroupState, ConsumerGroupType, TopicPartition
from confluent_kafka.admin import AdminClient
from groups_support import (
    SESSION_MS,
    MemberProcess,
    create_topic,
    partitions,
    produce,
    read,
    read_through_restarts,
    values,
    wait_until,
)

OFFSET_INVALID = -1001  # librdkafka's "no committed offset"


def consumer(bootstrap: str, group: str, **conf) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 300,
                     "max.poll.interval.ms": SESSION_MS, **conf})


def read_all_and_commit(bootstrap: str, group: str, topic: str, expected: list[bytes]) -> None:
    c = consumer(bootstrap, group)
    c.subscribe([topic])
    try:
        got = read(c, len(expected))
        assert sorted(m.value() for m in got) == sorted(expected)
        c.commit(asynchronous=False)
    finally:
        c.close()


def test_a_group_reads_from_the_beginning_and_resumes_after_restarts(server):
    read_through_restarts(server, read_all_and_commit)
    c = consumer(server.bootstrap, "shop")
    try:
        committed = c.committed([TopicPartition("prices", p) for p in range(3)], timeout=10)
        assert sum(tp.offset for tp in committed) == 120
    finally:
        c.close()


def test_members_share_partitions_and_take_over_from_one_that_leaves_or_dies(server):
    create_topic(server.bootstrap, "orders", 4)
    a = consumer(server.bootstrap, "workers")
    a.subscribe(["orders"])
    wait_until(lambda: partitions(a) == [0, 1, 2, 3], 30, lambda: a.poll(0.1), "a alone owns every partition")
    # a member in another process joins, then dies without a word: a gets its partitions back after its session
    killed = MemberProcess("confluent", server.bootstrap, "workers", "orders")
    try:
        wait_until(lambda: len(partitions(a)) == 2 and len(killed.assignment) == 2, 30, lambda: a.poll(0.1),
                   "the partitions split between a and the other process")
        assert sorted(partitions(a) + killed.assignment) == [0, 1, 2, 3]
        killed.kill()
        started = time.monotonic()
        wait_until(lambda: partitions(a) == [0, 1, 2, 3], 30, lambda: a.poll(0.1), "a takes over after the session")
        assert time.monotonic() - started >= SESSION_MS / 1000 * 0.5
    finally:
        killed.kill()
    # b joins in this process, then closes (LeaveGroup): a gets everything back at once
    b = consumer(server.bootstrap, "workers")
    b.subscribe(["orders"])

    def both() -> None:
        a.poll(0.05)
        b.poll(0.05)

    wait_until(lambda: len(partitions(a)) == 2 and len(partitions(b)) == 2, 30, both, "a and b share")
    b.close()
    started = time.monotonic()
    wait_until(lambda: partitions(a) == [0, 1, 2, 3], 30, lambda: a.poll(0.1), "a takes over after b left")
    assert time.monotonic() - started < SESSION_MS / 1000  # a leave needs no session timeout
    a.close()


def listed_ids(admin, **filters) -> set[str]:
    return {g.group_id for g in admin.list_consumer_groups(**filters).result(10).valid}


def test_admin_lists_describes_and_deletes_groups(server):
    create_topic(server.bootstrap, "stock", 2)
    produce(server.bootstrap, "stock", values("s", 10))
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    c = consumer(server.bootstrap, "warehouse", **{"client.id": "picker"})
    c.subscribe(["stock"])
    read(c, 10)
    c.commit(asynchronous=False)

    listed = {g.group_id: g for g in admin.list_consumer_groups().result(10).valid}
    assert not listed["warehouse"].is_simple_consumer_group  # protocol type "consumer"
    assert listed["warehouse"].state == ConsumerGroupState.STABLE  # ListGroups v4+ answers each group's state
    assert listed["warehouse"].type == ConsumerGroupType.CLASSIC  # and v5+ its type
    assert listed_ids(admin, states={ConsumerGroupState.STABLE}) == {"warehouse"}
    assert listed_ids(admin, states={ConsumerGroupState.EMPTY, ConsumerGroupState.PREPARING_REBALANCING}) == set()
    assert listed_ids(admin, types={ConsumerGroupType.CLASSIC}) == {"warehouse"}
    assert listed_ids(admin, types={ConsumerGroupType.CONSUMER}) == set()  # no KIP-848 groups here
    desc = admin.describe_consumer_groups(["warehouse"])["warehouse"].result(10)
    assert desc.state == ConsumerGroupState.STABLE and desc.partition_assignor == "range"
    assert [m.client_id for m in desc.members] == ["picker"] and desc.members[0].host == "/127.0.0.1"
    assert sorted(tp.partition for tp in desc.members[0].assignment.topic_partitions) == [0, 1]
    with pytest.raises(confluent_kafka.KafkaException, match="NON_EMPTY_GROUP"):
        admin.delete_consumer_groups(["warehouse"])["warehouse"].result(10)

    c.close()
    wait_until(lambda: admin.describe_consumer_groups(["warehouse"])["warehouse"].result(10).state
               == ConsumerGroupState.EMPTY, 10, what="the group is empty")
    assert listed_ids(admin, states={ConsumerGroupState.EMPTY}) == {"warehouse"}
    assert listed_ids(admin, states={ConsumerGroupState.STABLE}) == set()
    admin.delete_consumer_groups(["warehouse"])["warehouse"].result(10)
    assert "warehouse" not in {g.group_id for g in admin.list_consumer_groups().result(10).valid}

    # no such group: nothing committed (OffsetFetch answers -1), and describing it says Dead
    fresh = consumer(server.bootstrap, "warehouse")
    try:
        assert [tp.offset for tp in fresh.committed([TopicPartition("stock", 0), TopicPartition("stock", 1)],
                                                    timeout=10)] == [OFFSET_INVALID, OFFSET_INVALID]
    finally:
        fresh.close()
    assert admin.describe_consumer_groups(["never"])["never"].result(10).state == ConsumerGroupState.DEAD
