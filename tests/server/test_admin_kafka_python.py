"""Admin APIs over the wire with kafka-python's KafkaAdminClient, and the requests no admin client
sends on its own (a broker resource that is not this node, repeated names) sent through its connection."""

from __future__ import annotations

import pytest
import wire

pytest.importorskip("kafka")
from kafka import KafkaConsumer, KafkaProducer  # noqa: E402
from kafka.admin import (  # noqa: E402
    ConfigResource,
    ConfigResourceType,
    KafkaAdminClient,
    NewPartitions,
    NewTopic,
)
from kafka.errors import UnknownTopicOrPartitionError  # noqa: E402
from kafka.protocol.admin import (  # noqa: E402
    CreateTopicsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)
from kafka.structs import TopicPartition  # noqa: E402

from compactlog.storage.topic_config import TOPIC_CONFIGS  # noqa: E402

MS = 15000


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with wire.serving(tmp_path_factory.mktemp("admin-kp") / "data") as s:
        yield s


@pytest.fixture(scope="module")
def admin(broker):
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=MS)
    yield a
    a.close()


def send(admin: KafkaAdminClient, request):
    """A request on the admin client's own connection to node 1 (our only node)."""

    async def go():
        return await admin._manager.send(request, node_id=1)

    return admin._manager.run(go)


def codes(answer) -> dict[str, int]:
    return {t["name"]: t["error_code"] for t in answer["topics"]}


def test_create_describe_alter_grow_trim_and_delete(admin, broker):
    assert codes(admin.create_topics([NewTopic("kp", 2, 1, topic_configs={"cleanup.policy": "compact"})])) == {"kp": 0}
    every = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp")], config_filter="all")
    assert set(every["topic"]["kp"]) == set(TOPIC_CONFIGS)
    assert every["topic"]["kp"]["cleanup.policy"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"

    # kafka-python alters through IncrementalAlterConfigs when the broker offers it
    assert admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "kp", configs={"retention.ms": "5000"})]) \
        == {"topic": {"kp": "OK"}}
    changed = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp")], include_synonyms=True)
    assert changed["topic"]["kp"]["retention.ms"]["value"] == "5000"
    assert changed["topic"]["kp"]["retention.ms"]["synonyms"][0]["source"] in (1, "DYNAMIC_TOPIC_CONFIG")

    admin.create_partitions({"kp": NewPartitions(3)})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(6):
        producer.send("kp", key=b"k%d" % i, value=b"v%d" % i, partition=2)
    producer.flush(MS / 1000)
    producer.close()
    trimmed = admin.delete_records({TopicPartition("kp", 2): 3})
    assert trimmed[TopicPartition("kp", 2)]["low_watermark"] == 3

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=MS, enable_auto_commit=False)
    consumer.assign([TopicPartition("kp", 2)])
    consumer.seek_to_beginning()
    first = next(iter(consumer))
    consumer.close()
    assert (first.offset, first.value) == (3, b"v3")

    assert codes(admin.delete_topics(["kp"])) == {"kp": 0}
    assert "kp" not in admin.list_topics()


@pytest.mark.parametrize("new, code", [
    (NewTopic("both", 1, 1, replica_assignments={0: [1]}), 42),
    (NewTopic("other-node", replica_assignments={0: [2]}), 39),
    (NewTopic("gap", replica_assignments={0: [1], 2: [1]}), 39),
    (NewTopic("nobody", replica_assignments={0: []}), 39),
    (NewTopic("rf2", 1, 2), 38),
    (NewTopic("rf0", 1, 0), 38),
    (NewTopic("none", 0, 1), 37),
], ids=lambda v: v.name if isinstance(v, NewTopic) else str(v))
def test_create_refusals(admin, new, code):
    answer = admin.create_topics([new], raise_errors=False)
    assert codes(answer) == {new.name: code}
    assert answer["topics"][0]["error_message"]
    assert new.name not in admin.list_topics()


def test_a_topic_named_twice_in_one_request_is_refused(admin):
    topic = (("twice", 1, 1, [], []),)
    answer = send(admin, CreateTopicsRequest(topics=topic * 2, timeout_ms=MS, validate_only=False))
    assert [t.error_code for t in answer.topics] == [42, 42]
    assert "twice" not in admin.list_topics()


def test_describe_configs_documentation_and_other_brokers(admin):
    admin.create_topics([NewTopic("docs", 1, 1)])
    answer = send(admin, DescribeConfigsRequest(resources=[(4, "7", None), (2, "docs", ["segment.bytes"]), (2, "docs", []),
                                                           (99, "x", None)],
                                                include_synonyms=False, include_documentation=True))
    other, docs, none, odd = answer.results
    assert other.error_code == 42 and "only broker is 1" in other.error_message
    assert [c.name for c in docs.configs] == ["segment.bytes"]
    assert docs.configs[0].documentation == TOPIC_CONFIGS["segment.bytes"].doc
    assert docs.configs[0].config_type == 3  # INT
    assert none.configs == [] and none.error_code == 0  # an empty key list asks for nothing
    assert odd.error_code == 42


def test_incremental_alter_refusals(admin):
    admin.create_topics([NewTopic("inc-kp", 1, 1)])
    resources = [
        (2, "inc-kp", [("retention.ms", 0, "1"), ("retention.ms", 1, None)]),  # one name twice
        (2, "inc-kp", [("no.such.config", 0, "1")]),
        (2, "inc-kp", [("retention.ms", 9, "1")]),  # no such operation
        (4, "1", [("num.partitions", 0, "2")]),  # static broker settings
    ]
    answer = send(admin, IncrementalAlterConfigsRequest(resources=resources, validate_only=False))
    assert [r.error_code for r in answer.responses] == [42, 40, 42, 42]
    assert all(r.error_message for r in answer.responses)


def test_delete_records_of_a_partition_that_does_not_exist(admin):
    admin.create_topics([NewTopic("short", 1, 1)])
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.delete_records({TopicPartition("short", 5): 0}, partition_leader_id=1)
