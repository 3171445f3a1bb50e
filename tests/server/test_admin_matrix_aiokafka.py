"""Every public method of aiokafka's AIOKafkaAdminClient against a real ``compactlog serve``: each works,
or gets the answer Kafka gives on a single-node cluster. ``test_every_method_is_covered`` fails when an
aiokafka release adds a method this module does not call. docs/admin-clients.md lists the outcomes."""

from __future__ import annotations

import asyncio

import pytest
import wire

pytest.importorskip("aiokafka")
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # noqa: E402
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete  # noqa: E402
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType  # noqa: E402
from aiokafka.errors import OffsetOutOfRangeError  # noqa: E402
from aiokafka.structs import OffsetAndMetadata, TopicPartition  # noqa: E402

T = 15
TOPIC, GROUP = "aio-data", "aio-group"
TOPIC_ALREADY_EXISTS, INVALID_REPLICATION_FACTOR, UNKNOWN_TOPIC_OR_PARTITION = 36, 38, 3
INVALID_CONFIG = 40


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with wire.serving(tmp_path_factory.mktemp("admin-aiokafka") / "data") as s:
        run(s, _fill)
        yield s


def run(server, work):
    """``await work(admin, server)`` with a started admin client, closed afterwards."""
    async def go():
        admin = AIOKafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=T * 1000)
        await admin.start()
        try:
            return await asyncio.wait_for(work(admin, server), 3 * T)
        finally:
            await admin.close()

    return asyncio.run(go())


async def _fill(admin, server) -> None:
    """TOPIC with 3 partitions and 10 records in partition 0; GROUP with offset 7 committed there."""
    await admin.create_topics([NewTopic(TOPIC, 3, 1)])
    p = AIOKafkaProducer(bootstrap_servers=server.bootstrap)
    await p.start()
    try:
        for i in range(10):
            await p.send_and_wait(TOPIC, b"v%d" % i, key=b"k%d" % i, partition=0)
    finally:
        await p.stop()
    c = AIOKafkaConsumer(bootstrap_servers=server.bootstrap, group_id=GROUP, enable_auto_commit=False)
    await c.start()
    try:
        tp = TopicPartition(TOPIC, 0)
        c.assign([tp])
        await c.commit({tp: OffsetAndMetadata(7, "")})
    finally:
        await c.stop()


def errors(response) -> dict[str, int]:
    """topic -> error code of a CreateTopics / CreatePartitions / DeleteTopics answer."""
    obj = response.to_object()
    rows = obj.get("topic_errors") or obj.get("topic_error_codes")
    return {r["topic"]: r["error_code"] for r in rows}


# the client's life -----------------------------------------------------------------------------------------

def test_start(broker):
    assert run(broker, lambda a, s: _true()) is True  # run() starts it: bootstrap and ApiVersions done


def test_close(broker):
    async def twice(a, s):
        await a.close()
        await a.close()  # closing again is harmless
        return True

    assert run(broker, twice)


async def _true() -> bool:
    return True


# topics ------------------------------------------------------------------------------------------------------

def test_create_topics(broker):
    async def go(a, s):
        return (errors(await a.create_topics([NewTopic("aio-new", 2, 1, topic_configs={"cleanup.policy": "compact"})])),
                errors(await a.create_topics([NewTopic("aio-new", 2, 1)])),
                errors(await a.create_topics([NewTopic("aio-three", 1, 3)])),
                errors(await a.create_topics([NewTopic("aio-dry", 1, 1)], validate_only=True)),
                await a.list_topics())

    made, again, three, dry, topics = run(broker, go)
    assert (made, again, three, dry) == ({"aio-new": 0}, {"aio-new": TOPIC_ALREADY_EXISTS},
                                         {"aio-three": INVALID_REPLICATION_FACTOR}, {"aio-dry": 0})
    assert "aio-new" in topics and "aio-dry" not in topics


def test_list_topics(broker):
    assert TOPIC in run(broker, lambda a, s: a.list_topics())


def test_describe_topics(broker):
    got = run(broker, lambda a, s: a.describe_topics([TOPIC]))
    assert [(t["topic"], t["error_code"], [p["partition"] for p in t["partitions"]]) for t in got] == \
        [(TOPIC, 0, [0, 1, 2])]
    assert {p["leader"] for p in got[0]["partitions"]} == {1}


def test_describe_cluster(broker):
    got = run(broker, lambda a, s: a.describe_cluster())
    assert [b["node_id"] for b in got["brokers"]] == [1] and got["controller_id"] == 1 and got["cluster_id"]


def test_create_partitions(broker):
    """An error is raised (aiokafka raises the first topic error of the answer)."""
    from aiokafka.errors import InvalidPartitionsError, UnknownTopicOrPartitionError

    async def go(a, s):
        await a.create_topics([NewTopic("aio-grow", 1, 1)])
        grown = errors(await a.create_partitions({"aio-grow": NewPartitions(3)}))
        with pytest.raises(InvalidPartitionsError):
            await a.create_partitions({"aio-grow": NewPartitions(2)})
        with pytest.raises(UnknownTopicOrPartitionError):
            await a.create_partitions({"aio-nope": NewPartitions(2)})
        return grown

    assert run(broker, go) == {"aio-grow": 0}


def test_delete_topics(broker):
    async def go(a, s):
        await a.create_topics([NewTopic("aio-gone", 1, 1)])
        return errors(await a.delete_topics(["aio-gone"])), errors(await a.delete_topics(["aio-gone"]))

    assert run(broker, go) == ({"aio-gone": 0}, {"aio-gone": UNKNOWN_TOPIC_OR_PARTITION})


def test_delete_records(broker):
    tp = TopicPartition(TOPIC, 0)

    async def go(a, s):
        low = await a.delete_records({tp: RecordsToDelete(2)})
        try:
            await a.delete_records({tp: RecordsToDelete(99)})
        except OffsetOutOfRangeError:
            return low, "OFFSET_OUT_OF_RANGE"
        return low, None

    assert run(broker, go) == ({tp: 2}, "OFFSET_OUT_OF_RANGE")


# configs -----------------------------------------------------------------------------------------------------

def test_describe_configs(broker):
    async def go(a, s):
        topic = await a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC)])
        node = await a.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1", configs={"log.dirs": None})])
        nope = await a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "aio-nope")])
        return topic, node, nope

    topic, node, nope = run(broker, go)
    entries = {e[0]: e[1] for e in topic[0].resources[0][4]}
    assert entries["cleanup.policy"] == "delete"
    assert [e[0] for e in node[0].resources[0][4]] == ["log.dirs"]
    assert nope[0].resources[0][0] == UNKNOWN_TOPIC_OR_PARTITION


def test_alter_configs(broker):
    async def go(a, s):
        ok = await a.alter_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC, configs={"retention.ms": "86400000"})])
        bad = await a.alter_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC, configs={"retention.ms": "soon"})])
        return ok[0].resources[0][0], bad[0].resources[0][0]

    assert run(broker, go) == (0, INVALID_CONFIG)


# groups ------------------------------------------------------------------------------------------------------

def test_find_coordinator(broker):
    assert run(broker, lambda a, s: a.find_coordinator(GROUP)) == 1


def test_list_consumer_groups(broker):
    got = run(broker, lambda a, s: a.list_consumer_groups())
    assert (GROUP, "") in [tuple(g[:2]) for g in got]  # offsets only, never a member: no protocol type, as in Kafka


def test_describe_consumer_groups(broker):
    """One group per call: aiokafka 0.14 sends DescribeGroups v3 and reads the answer with v2's layout
    (without v3's authorized operations), so a second group in one answer comes out garbled; it does
    so against Kafka too, which serves v3."""
    def one(group):
        [r] = run(broker, lambda a, s: a.describe_consumer_groups([group]))
        [g] = r.groups
        return g[0], g[1], g[2]

    assert one(GROUP) == (0, GROUP, "Empty")
    assert one("aio-never") == (0, "aio-never", "Dead")  # Kafka: a group it does not know is Dead


def test_list_consumer_group_offsets(broker):
    got = run(broker, lambda a, s: a.list_consumer_group_offsets(GROUP))
    assert {tp: o.offset for tp, o in got.items()} == {TopicPartition(TOPIC, 0): 7}
    assert run(broker, lambda a, s: a.list_consumer_group_offsets("aio-never")) == {}


def test_every_method_is_covered():
    public = {m for m in dir(AIOKafkaAdminClient) if not m.startswith("_")}
    tested = {name[len("test_"):] for name in globals() if name.startswith("test_")}
    assert public - tested == set()
