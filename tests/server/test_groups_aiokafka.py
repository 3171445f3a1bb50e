"""Consumer groups with aiokafka against a real ``compactlog serve``: reading and committing, sharing
partitions, losing a member that left or died, resuming after broker restarts (SIGTERM and SIGKILL),
nothing committed for a group that never existed, and the admin client's group calls."""

from __future__ import annotations

import asyncio
import time

import pytest

aiokafka = pytest.importorskip("aiokafka")
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from groups_support import (
    SESSION_MS,
    MemberProcess,
    create_topic,
    partitions,
    read_through_restarts,
)


def consumer(bootstrap: str, group: str, *topics: str) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(*topics, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                            enable_auto_commit=False, session_timeout_ms=SESSION_MS, heartbeat_interval_ms=300,
                            max_poll_interval_ms=SESSION_MS, rebalance_timeout_ms=SESSION_MS)


async def until(check, timeout: float, what: str, *consumers: AIOKafkaConsumer) -> None:
    """Wait for ``check()`` while the consumers keep consuming (aiokafka leaves the group of a consumer
    whose application has not called getmany within max_poll_interval_ms)."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what} not reached within {timeout} s"
        if consumers:
            await asyncio.gather(*(c.getmany(timeout_ms=100) for c in consumers))
        else:
            await asyncio.sleep(0.05)


async def read_all_and_commit(bootstrap: str, group: str, topic: str, expected: list[bytes]) -> None:
    c = consumer(bootstrap, group, topic)
    await c.start()
    try:
        got = []
        deadline = time.monotonic() + 30
        while len(got) < len(expected):
            assert time.monotonic() < deadline, f"read {len(got)} of {len(expected)} records"
            for records in (await c.getmany(timeout_ms=500)).values():
                got.extend(r.value for r in records)
        assert sorted(got) == sorted(expected)
        await c.commit()
    finally:
        await c.stop()


def test_a_group_reads_from_the_beginning_and_resumes_after_restarts(server):
    read_through_restarts(server, lambda *args: asyncio.run(read_all_and_commit(*args)))

    async def committed() -> list:
        c = consumer(server.bootstrap, "shop")
        await c.start()
        try:
            return [await c.committed(TopicPartition("prices", p)) for p in range(3)]
        finally:
            await c.stop()

    assert sum(asyncio.run(committed())) == 120


def test_members_share_partitions_and_take_over_from_one_that_leaves_or_dies(server):
    create_topic(server.bootstrap, "orders", 4)

    async def scenario() -> None:
        a = consumer(server.bootstrap, "workers", "orders")
        await a.start()
        await until(lambda: partitions(a) == [0, 1, 2, 3], 30, "a alone owns every partition", a)
        killed = MemberProcess("aiokafka", server.bootstrap, "workers", "orders")
        try:
            await until(lambda: len(partitions(a)) == 2 and len(killed.assignment) == 2, 30,
                        "the partitions split between a and the other process", a)
            assert sorted(partitions(a) + killed.assignment) == [0, 1, 2, 3]
            killed.kill()
            await until(lambda: partitions(a) == [0, 1, 2, 3], 30, "a takes over after the session", a)
        finally:
            killed.kill()
        b = consumer(server.bootstrap, "workers", "orders")
        await b.start()
        await until(lambda: len(partitions(a)) == 2 and len(partitions(b)) == 2, 30, "a and b share", a, b)
        await b.stop()
        started = time.monotonic()
        await until(lambda: partitions(a) == [0, 1, 2, 3], 30, "a takes over after b left", a)
        assert time.monotonic() - started < SESSION_MS / 1000
        await a.stop()

    asyncio.run(asyncio.wait_for(scenario(), 90))


def test_a_group_that_never_committed_has_no_offsets(server):
    create_topic(server.bootstrap, "stock", 1)

    async def scenario() -> None:
        c = AIOKafkaConsumer(bootstrap_servers=server.bootstrap, group_id="never", enable_auto_commit=False)
        await c.start()
        try:
            assert await c.committed(TopicPartition("stock", 0)) is None  # OffsetFetch answered -1
        finally:
            await c.stop()

    asyncio.run(asyncio.wait_for(scenario(), 30))


def test_the_admin_client_sees_each_group_in_its_real_state(server):
    create_topic(server.bootstrap, "shelf", 2)

    async def described(admin: AIOKafkaAdminClient, group: str) -> tuple:
        # aiokafka reads even a DescribeGroups v3 answer with the v2 layout: no authorized operations
        (response,) = await admin.describe_consumer_groups([group])
        ((error, group_id, state, protocol_type, protocol, members),) = response.groups
        return error, state, protocol_type, protocol, len(members)

    async def scenario() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=server.bootstrap)
        await admin.start()
        c = consumer(server.bootstrap, "stockers", "shelf")
        try:
            await c.start()
            await until(lambda: partitions(c) == [0, 1], 30, "the member has both partitions", c)
            await c.commit({TopicPartition("shelf", 0): 4})
            assert await described(admin, "stockers") == (0, "Stable", "consumer", "roundrobin", 1)
            assert ("stockers", "consumer") in await admin.list_consumer_groups()
            assert (await admin.list_consumer_group_offsets("stockers"))[TopicPartition("shelf", 0)].offset == 4
            await c.stop()
            assert await described(admin, "stockers") == (0, "Empty", "consumer", "", 0)
            assert await described(admin, "never") == (0, "Dead", "", "", 0)
            assert ("stockers", "consumer") in await admin.list_consumer_groups()
        finally:
            await c.stop()
            await admin.close()

    asyncio.run(asyncio.wait_for(scenario(), 60))
