"""Admin APIs over the wire with librdkafka (confluent-kafka's AdminClient): CreateTopics, DeleteTopics,
CreatePartitions, DeleteRecords, DescribeConfigs, AlterConfigs and IncrementalAlterConfigs, each with
the error codes Kafka gives for what it refuses."""

from __future__ import annotations

import pytest
import wire

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import (  # noqa: E402
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from compactlog.storage.topic_config import TOPIC_CONFIGS  # noqa: E402

T = 15  # seconds any one admin call may take
pytestmark = pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """One server for the module, with one broker default set (log.retention.hours) to show its source."""
    with wire.serving(tmp_path_factory.mktemp("admin") / "data", {"log.retention.hours": "48"}) as s:
        yield s


@pytest.fixture(scope="module")
def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def result(futures: dict, key):
    return futures[key].result(T)


def error_of(futures: dict, key) -> KafkaError:
    with pytest.raises(KafkaException) as info:
        futures[key].result(T)
    return info.value.args[0]


def topic_configs(admin, topic: str) -> dict:
    r = ConfigResource(ResourceType.TOPIC, topic)
    return admin.describe_configs([r])[r].result(T)


def partitions_of(admin, topic: str) -> int:
    return len(admin.list_topics(topic, timeout=T).topics[topic].partitions)


def test_create_with_configs_then_describe_every_config_with_its_source(admin):
    fs = admin.create_topics([NewTopic("prices", 3, 1, config={"cleanup.policy": "compact", "segment.bytes": "1048576"})])
    assert result(fs, "prices") is None
    assert partitions_of(admin, "prices") == 3
    cfg = topic_configs(admin, "prices")
    assert set(cfg) == set(TOPIC_CONFIGS)  # every config, so kafka-python's alter_configs knows them all
    assert cfg["cleanup.policy"].value == "compact"
    assert cfg["cleanup.policy"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert cfg["retention.ms"].value == str(48 * 3600 * 1000)
    assert cfg["retention.ms"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert cfg["compression.type"].source == ConfigSource.DEFAULT_CONFIG.value
    assert not any(e.is_read_only for e in cfg.values())
    assert "log.retention.hours" in cfg["retention.ms"].synonyms


def test_default_counts_and_manual_assignment(admin):
    fs = admin.create_topics([NewTopic("defaults"), NewTopic("assigned", 2, replica_assignment=[[1], [1]])])
    assert result(fs, "defaults") is None and result(fs, "assigned") is None
    assert partitions_of(admin, "defaults") == 1  # num.partitions
    assert partitions_of(admin, "assigned") == 2


def test_validate_only_checks_everything_and_creates_nothing(admin):
    fs = admin.create_topics([NewTopic("dry", 2, 1), NewTopic("dry-bad", 1, 1, config={"retention.ms": "x"})],
                             validate_only=True)
    assert result(fs, "dry") is None
    assert error_of(fs, "dry-bad").code() == KafkaError.INVALID_CONFIG
    assert "dry" not in admin.list_topics(timeout=T).topics


def test_create_errors_carry_kafkas_codes_and_say_why(admin):
    admin.create_topics([NewTopic("taken", 1, 1)])["taken"].result(T)
    cases = {
        NewTopic("three-copies", 1, 3): (KafkaError.INVALID_REPLICATION_FACTOR, "only 1 broker(s) are registered"),
        NewTopic("bad name!", 1, 1): (KafkaError.TOPIC_EXCEPTION, "illegal"),
        NewTopic("tiny", 1, 1, config={"segment.bytes": "1"}):
            (KafkaError.INVALID_CONFIG, "Invalid value 1 for configuration segment.bytes: Value must be at least 14"),
        NewTopic("unknown-config", 1, 1, config={"no.such.config": "1"}):
            (KafkaError.INVALID_CONFIG, "Unknown topic config name: no.such.config"),
        NewTopic("taken", 1, 1): (KafkaError.TOPIC_ALREADY_EXISTS, "already exists"),
        NewTopic("elsewhere", 1, replica_assignment=[[2]]): (KafkaError.INVALID_REPLICA_ASSIGNMENT, "broker 2"),
        NewTopic("two-copies", 1, replica_assignment=[[1, 1]]): (KafkaError.INVALID_REPLICA_ASSIGNMENT, "twice"),
    }
    fs = admin.create_topics(list(cases))
    for new, (code, words) in cases.items():
        err = error_of(fs, new.topic)
        assert err.code() == code, (new.topic, err)
        assert words in err.str(), (new.topic, err.str())
    assert "three-copies" not in admin.list_topics(timeout=T).topics


def test_incremental_alter_set_delete_append_subtract(admin):
    admin.create_topics([NewTopic("inc", 1, 1, config={"cleanup.policy": "compact"})])["inc"].result(T)

    def alter(*entries):
        r = ConfigResource(ResourceType.TOPIC, "inc", incremental_configs=list(entries))
        return admin.incremental_alter_configs([r])[r]

    assert alter(ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET),
                 ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.APPEND)).result(T) is None
    cfg = topic_configs(admin, "inc")
    assert (cfg["cleanup.policy"].value, cfg["retention.ms"].value) == ("compact,delete", "1000")
    alter(ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SUBTRACT),
          ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)).result(T)
    cfg = topic_configs(admin, "inc")
    assert cfg["cleanup.policy"].value == "delete"
    assert cfg["retention.ms"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    # APPEND to a default list starts from the default (delete)
    alter(ConfigEntry("cleanup.policy", None, incremental_operation=AlterConfigOpType.DELETE)).result(T)
    alter(ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)).result(T)
    assert topic_configs(admin, "inc")["cleanup.policy"].value == "delete,compact"

    with pytest.raises(KafkaException) as info:
        alter(ConfigEntry("compression.type", "zstd", incremental_operation=AlterConfigOpType.APPEND)).result(T)
    assert info.value.args[0].code() == KafkaError.INVALID_CONFIG and "list" in info.value.args[0].str()
    with pytest.raises(KafkaException) as info:
        alter(ConfigEntry("min.cleanable.dirty.ratio", "2", incremental_operation=AlterConfigOpType.SET)).result(T)
    assert info.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert topic_configs(admin, "inc")["min.cleanable.dirty.ratio"].source == ConfigSource.DEFAULT_CONFIG.value
    r = ConfigResource(ResourceType.TOPIC, "no-such-topic",
                       incremental_configs=[ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)])
    assert error_of(admin.incremental_alter_configs([r]), r).code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_a_config_change_reaches_the_running_logs(admin, broker):
    admin.create_topics([NewTopic("small", 1, 1)])["small"].result(T)
    r = ConfigResource(ResourceType.TOPIC, "small", incremental_configs=[
        ConfigEntry("max.message.bytes", "200", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([r])[r].result(T)
    errors = []
    p = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 10000})
    p.produce("small", value=b"x" * 1000, on_delivery=lambda err, msg: errors.append(err))
    p.flush(T)
    assert errors and errors[0] is not None and errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE


def test_alter_configs_replaces_the_whole_set(admin):
    admin.create_topics([NewTopic("whole", 1, 1, config={"cleanup.policy": "compact"})])["whole"].result(T)
    r = ConfigResource(ResourceType.TOPIC, "whole", set_config={"retention.ms": "5000"})
    assert admin.alter_configs([r])[r].result(T) is None
    cfg = topic_configs(admin, "whole")
    assert cfg["retention.ms"].value == "5000"
    assert cfg["cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG.value  # left out: back to the default
    r = ConfigResource(ResourceType.TOPIC, "whole", set_config={"retention.ms": "soon"})
    assert error_of(admin.alter_configs([r]), r).code() == KafkaError.INVALID_CONFIG
    r = ConfigResource(ResourceType.TOPIC, "whole", set_config={"cleanup.policy": "compact"})
    assert admin.alter_configs([r], validate_only=True)[r].result(T) is None
    assert topic_configs(admin, "whole")["cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG.value


def test_the_broker_resource_lists_its_static_settings(admin, broker):
    r = ConfigResource(ResourceType.BROKER, "1")
    cfg = admin.describe_configs([r])[r].result(T)
    assert cfg["log.retention.hours"].value == "48"
    assert cfg["log.retention.hours"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert cfg["num.partitions"].source == ConfigSource.DEFAULT_CONFIG.value
    assert cfg["listeners"].value == "PLAINTEXT://127.0.0.1:0"  # as given; the bound port is in Metadata
    assert all(e.is_read_only for e in cfg.values())
    change = ConfigResource(ResourceType.BROKER, "1", set_config={"num.partitions": "3"})
    assert error_of(admin.alter_configs([change]), change).code() == KafkaError.INVALID_REQUEST
    missing = ConfigResource(ResourceType.TOPIC, "no-such-topic")
    assert error_of(admin.describe_configs([missing]), missing).code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_create_partitions_only_grows(admin):
    admin.create_topics([NewTopic("grow", 2, 1)])["grow"].result(T)
    assert result(admin.create_partitions([NewPartitions("grow", 4)], validate_only=True), "grow") is None
    assert partitions_of(admin, "grow") == 2
    assert result(admin.create_partitions([NewPartitions("grow", 4)]), "grow") is None
    assert partitions_of(admin, "grow") == 4
    for count in (4, 3):
        err = error_of(admin.create_partitions([NewPartitions("grow", count)]), "grow")
        assert err.code() == KafkaError.INVALID_PARTITIONS, err
    err = error_of(admin.create_partitions([NewPartitions("grow", 5, replica_assignment=[[2]])]), "grow")
    assert err.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    err = error_of(admin.create_partitions([NewPartitions("no-such-topic", 5)]), "no-such-topic")
    assert err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert partitions_of(admin, "grow") == 4


def _produce(bootstrap: str, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, value=f"v{i}".encode(), partition=0)
    assert p.flush(T) == 0


def _first_offset(bootstrap: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "first", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
        m = c.poll(T)
        assert m is not None and m.error() is None, m and m.error()
        return m.offset()
    finally:
        c.close()


def test_delete_records_moves_the_start_and_consumers_begin_there(server):
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    admin.create_topics([NewTopic("history", 1, 1)])["history"].result(T)
    _produce(server.bootstrap, "history", 10)
    tp = TopicPartition("history", 0, 4)
    assert admin.delete_records([tp])[tp].result(T).low_watermark == 4
    assert _first_offset(server.bootstrap, "history") == 4
    beyond = TopicPartition("history", 0, 11)
    assert error_of(admin.delete_records([beyond]), beyond).code() == KafkaError.OFFSET_OUT_OF_RANGE
    server.restart(kill=True)  # the new start was checkpointed before the answer
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    earliest = TopicPartition("history", 0)
    assert admin.list_offsets({earliest: OffsetSpec.earliest()})[earliest].result(T).offset == 4
    end = TopicPartition("history", 0, confluent_kafka.OFFSET_END)  # -1: the high watermark
    assert admin.delete_records([end])[end].result(T).low_watermark == 10


def test_delete_topics(admin):
    admin.create_topics([NewTopic("doomed", 2, 1)])["doomed"].result(T)
    fs = admin.delete_topics(["doomed", "never-was"])
    assert result(fs, "doomed") is None
    assert error_of(fs, "never-was").code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert "doomed" not in admin.list_topics(timeout=T).topics


def test_deleting_a_topic_deletes_the_offsets_groups_committed_for_it(admin, broker):
    """As Kafka does: a topic made again under the same name must not resume at the old group's offsets."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    for name in ("reborn", "kept"):
        admin.create_topics([NewTopic(name, 1, 1)])[name].result(T)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "remembers", "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition("reborn", 0, 5), TopicPartition("kept", 0, 3)], asynchronous=False)
    finally:
        c.close()
    result(admin.delete_topics(["reborn"]), "reborn")
    admin.create_topics([NewTopic("reborn", 1, 1)])["reborn"].result(T)
    fs = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(
        "remembers", [TopicPartition("reborn", 0), TopicPartition("kept", 0)])])
    got = {(tp.topic, tp.offset) for tp in fs["remembers"].result(T).topic_partitions}
    assert got == {("reborn", -1001), ("kept", 3)}  # -1001: librdkafka's "no committed offset"


def test_admin_requests_are_authorized_once_acls_exist(server):
    """With one ACL stored, what it does not allow is refused: CREATE of another topic (29) and the
    broker's configs (31); the topic it names stays open."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
    )

    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    acl = AclBinding(ResourceType.TOPIC, "open", ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                     AclOperation.ALL, AclPermissionType.ALLOW)
    admin.create_acls([acl])[acl].result(T)
    fs = admin.create_topics([NewTopic("open", 1, 1), NewTopic("closed", 1, 1)])
    assert result(fs, "open") is None
    assert error_of(fs, "closed").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert topic_configs(admin, "open")["cleanup.policy"].value == "delete"
    b = ConfigResource(ResourceType.BROKER, "1")
    assert error_of(admin.describe_configs([b]), b).code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    tp = TopicPartition("open", 0, 0)
    assert admin.delete_records([tp])[tp].result(T).low_watermark == 0
