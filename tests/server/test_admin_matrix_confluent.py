"""Every public method of confluent-kafka's AdminClient against a real ``compactlog serve``: each works,
or gets the answer Kafka gives on a single-node cluster. ``test_every_method_is_covered`` fails when a
confluent-kafka release adds a method this module does not call. docs/admin-clients.md lists the
outcomes."""

from __future__ import annotations

import pytest
import wire

pytest.importorskip("confluent_kafka")
from confluent_kafka import (  # noqa: E402
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    ElectionType,
    KafkaError,
    KafkaException,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (  # noqa: E402
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

T = 15  # seconds for any one call
TOPIC, GROUP = "cm-data", "cm-group"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    # allow.everyone.if.no.acl.found: the ACL test's rule names one topic; everything else stays open
    with wire.serving(tmp_path_factory.mktemp("admin-confluent") / "data",
                      {"allow.everyone.if.no.acl.found": "true"}) as s:
        yield s


@pytest.fixture(scope="module")
def admin(broker):
    """An AdminClient, and the data the methods look at: TOPIC (3 partitions, 10 records in partition 0,
    timestamps 1000..1009 with the largest on offset 4) and GROUP with committed offsets and no members."""
    from confluent_kafka import Consumer, Producer

    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in a.create_topics([NewTopic(TOPIC, 3, 1)]).values():
        f.result(T)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        p.produce(TOPIC, key=b"k%d" % i, value=b"v%d" % i, partition=0, timestamp=9000 if i == 4 else 1000 + i)
    assert p.flush(T) == 0
    for group in (GROUP, "cm-doomed"):
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
        c.commit(offsets=[TopicPartition(TOPIC, 0, 7)], asynchronous=False)
        c.close()
    return a


def code(exc: BaseException) -> int:
    assert isinstance(exc, KafkaException), exc
    return exc.args[0].code()


def fails_with(future, expected: int) -> None:
    with pytest.raises(KafkaException) as info:
        future.result(T)
    assert code(info.value) == expected, info.value


# topics --------------------------------------------------------------------------------------------------

def test_create_topics(admin):
    done = admin.create_topics([NewTopic("cm-new", 2, 1, config={"cleanup.policy": "compact"})])
    assert done["cm-new"].result(T) is None
    fails_with(admin.create_topics([NewTopic("cm-new", 1, 1)])["cm-new"], KafkaError.TOPIC_ALREADY_EXISTS)
    fails_with(admin.create_topics([NewTopic("cm-three", 1, 3)])["cm-three"], KafkaError.INVALID_REPLICATION_FACTOR)
    assert admin.create_topics([NewTopic("cm-dry", 1, 1)], validate_only=True)["cm-dry"].result(T) is None
    assert "cm-dry" not in admin.list_topics(timeout=T).topics


def test_list_topics(admin):
    md = admin.list_topics(timeout=T)
    assert len(md.topics[TOPIC].partitions) == 3 and list(md.brokers) == [1] and md.controller_id == 1


def test_describe_topics(admin):
    got = admin.describe_topics(TopicCollection([TOPIC, "cm-nope"]))
    d = got[TOPIC].result(T)
    assert [p.id for p in d.partitions] == [0, 1, 2] and d.partitions[0].leader.id == 1
    assert str(d.topic_id) != "AAAAAAAAAAAAAAAAAAAAAA"  # a real topic id (Metadata v10+)
    fails_with(got["cm-nope"], KafkaError.UNKNOWN_TOPIC_OR_PART)


def test_create_partitions(admin):
    admin.create_topics([NewTopic("cm-grow", 1, 1)])["cm-grow"].result(T)
    assert admin.create_partitions([NewPartitions("cm-grow", 3)])["cm-grow"].result(T) is None
    fails_with(admin.create_partitions([NewPartitions("cm-grow", 2)])["cm-grow"], KafkaError.INVALID_PARTITIONS)
    fails_with(admin.create_partitions([NewPartitions("cm-nope", 2)])["cm-nope"], KafkaError.UNKNOWN_TOPIC_OR_PART)


def test_delete_topics(admin):
    admin.create_topics([NewTopic("cm-gone", 1, 1)])["cm-gone"].result(T)
    assert admin.delete_topics(["cm-gone"])["cm-gone"].result(T) is None
    fails_with(admin.delete_topics(["cm-gone"])["cm-gone"], KafkaError.UNKNOWN_TOPIC_OR_PART)


def test_delete_records(admin):
    admin.create_topics([NewTopic("cm-trim", 1, 1)])["cm-trim"].result(T)
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": admin_bootstrap(admin)})
    for i in range(5):
        p.produce("cm-trim", b"r%d" % i)
    assert p.flush(T) == 0
    got = admin.delete_records([TopicPartition("cm-trim", 0, 3)])
    assert got[TopicPartition("cm-trim", 0, 3)].result(T).low_watermark == 3
    fails_with(admin.delete_records([TopicPartition("cm-trim", 0, 99)])[TopicPartition("cm-trim", 0, 99)],
               KafkaError.OFFSET_OUT_OF_RANGE)


def admin_bootstrap(admin) -> str:
    md = admin.list_topics(timeout=T)
    b = md.brokers[1]
    return f"{b.host}:{b.port}"


def test_list_offsets(admin):
    tp = TopicPartition(TOPIC, 0)
    got = admin.list_offsets({tp: OffsetSpec.earliest()})[tp].result(T)
    assert got.offset == 0
    assert admin.list_offsets({tp: OffsetSpec.latest()})[tp].result(T).offset == 10
    assert admin.list_offsets({tp: OffsetSpec.for_timestamp(1002)})[tp].result(T).offset == 2
    top = admin.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(T)  # KIP-734, ListOffsets v7
    assert (top.offset, top.timestamp) == (4, 9000)


# configs -------------------------------------------------------------------------------------------------

def test_describe_configs(admin):
    topic = admin.describe_configs([ConfigResource(ResourceType.TOPIC, TOPIC)])
    entries = next(iter(topic.values())).result(T)
    assert entries["cleanup.policy"].value == "delete"
    node = admin.describe_configs([ConfigResource(ResourceType.BROKER, "1")])
    assert "log.dirs" in next(iter(node.values())).result(T)
    fails_with(next(iter(admin.describe_configs([ConfigResource(ResourceType.TOPIC, "cm-nope")]).values())),
               KafkaError.UNKNOWN_TOPIC_OR_PART)


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_alter_configs(admin):
    res = ConfigResource(ResourceType.TOPIC, TOPIC, set_config={"retention.ms": "86400000"})
    assert next(iter(admin.alter_configs([res]).values())).result(T) is None
    bad = ConfigResource(ResourceType.TOPIC, TOPIC, set_config={"retention.ms": "soon"})
    fails_with(next(iter(admin.alter_configs([bad]).values())), KafkaError.INVALID_CONFIG)


def test_incremental_alter_configs(admin):
    res = ConfigResource(ResourceType.TOPIC, TOPIC, incremental_configs=[
        ConfigEntry("segment.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])
    assert next(iter(admin.incremental_alter_configs([res]).values())).result(T) is None
    shown = next(iter(admin.describe_configs([ConfigResource(ResourceType.TOPIC, TOPIC)]).values())).result(T)
    assert shown["segment.ms"].value == "3600000"


# ACLs ----------------------------------------------------------------------------------------------------

def test_create_acls(admin):
    acl = AclBinding(ResourceType.TOPIC, "cm-acl", ResourcePatternType.LITERAL, "User:nobody", "*",
                     AclOperation.READ, AclPermissionType.ALLOW)
    assert admin.create_acls([acl])[acl].result(T) is None


def test_describe_acls(admin):
    test_create_acls(admin)
    f = AclBindingFilter(ResourceType.TOPIC, "cm-acl", ResourcePatternType.ANY, None, None, AclOperation.ANY,
                         AclPermissionType.ANY)
    assert [b.principal for b in admin.describe_acls(f).result(T)] == ["User:nobody"]


def test_delete_acls(admin):
    test_create_acls(admin)
    f = AclBindingFilter(ResourceType.TOPIC, "cm-acl", ResourcePatternType.ANY, None, None, AclOperation.ANY,
                         AclPermissionType.ANY)
    assert [b.principal for b in admin.delete_acls([f])[f].result(T)] == ["User:nobody"]
    assert admin.describe_acls(f).result(T) == []


# the cluster -----------------------------------------------------------------------------------------------

def test_describe_cluster(admin):
    d = admin.describe_cluster(include_authorized_operations=True).result(T)
    assert [n.id for n in d.nodes] == [1] and d.controller.id == 1 and d.cluster_id
    assert AclOperation.DESCRIBE in d.authorized_operations


def test_cluster_id(admin):
    assert admin.cluster_id() == admin.describe_cluster().result(T).cluster_id


def test_elect_leaders(admin):
    """One replica per partition, already the leader: Kafka answers ELECTION_NOT_NEEDED for each."""
    tp = TopicPartition(TOPIC, 0)
    for kind in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
        got = admin.elect_leaders(kind, [tp]).result(T)
        assert got[tp].code() == KafkaError.ELECTION_NOT_NEEDED, got


def test_describe_user_scram_credentials(admin):
    assert admin.describe_user_scram_credentials().result(T) == {}
    fails_with(admin.describe_user_scram_credentials(["nobody"])["nobody"], KafkaError.RESOURCE_NOT_FOUND)


def test_alter_user_scram_credentials(admin):
    up = UserScramCredentialUpsertion("cm-user", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"pw")
    assert admin.alter_user_scram_credentials([up])["cm-user"].result(T) is None
    info = admin.describe_user_scram_credentials(["cm-user"])["cm-user"].result(T).scram_credential_infos
    assert [(i.mechanism, i.iterations) for i in info] == [(ScramMechanism.SCRAM_SHA_256, 4096)]
    gone = UserScramCredentialDeletion("cm-user", ScramMechanism.SCRAM_SHA_256)
    assert admin.alter_user_scram_credentials([gone])["cm-user"].result(T) is None


# groups --------------------------------------------------------------------------------------------------

def test_list_consumer_groups(admin):
    got = admin.list_consumer_groups().result(T)
    states = {g.group_id: g.state for g in got.valid}
    assert states[GROUP] == ConsumerGroupState.EMPTY  # ListGroups v4: states
    only_stable = admin.list_consumer_groups(states={ConsumerGroupState.STABLE}).result(T)
    assert GROUP not in {g.group_id for g in only_stable.valid}


@pytest.mark.filterwarnings("ignore:list_groups.. is deprecated:DeprecationWarning")
def test_list_groups(admin):
    assert GROUP in {g.id for g in admin.list_groups(timeout=T)}


def test_describe_consumer_groups(admin):
    got = admin.describe_consumer_groups([GROUP, "cm-never"])
    d = got[GROUP].result(T)
    assert d.state == ConsumerGroupState.EMPTY and d.members == [] and d.coordinator.id == 1
    assert got["cm-never"].result(T).state == ConsumerGroupState.DEAD  # Kafka: a group it does not know is Dead


def test_list_consumer_group_offsets(admin):
    got = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(GROUP)])[GROUP].result(T)
    assert [(tp.topic, tp.partition, tp.offset) for tp in got.topic_partitions] == [(TOPIC, 0, 7)]


def test_alter_consumer_group_offsets(admin):
    req = ConsumerGroupTopicPartitions(GROUP, [TopicPartition(TOPIC, 1, 0)])
    assert admin.alter_consumer_group_offsets([req])[GROUP].result(T).group_id == GROUP
    got = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(GROUP)])[GROUP].result(T)
    assert sorted((tp.partition, tp.offset) for tp in got.topic_partitions) == [(0, 7), (1, 0)]


def test_delete_consumer_groups(admin):
    assert admin.delete_consumer_groups(["cm-doomed"])["cm-doomed"].result(T) is None
    fails_with(admin.delete_consumer_groups(["cm-doomed"])["cm-doomed"], KafkaError.GROUP_ID_NOT_FOUND)


# the client itself ---------------------------------------------------------------------------------------

def test_poll(admin):
    assert admin.poll(0) >= 0


def test_set_sasl_credentials(broker):
    """Changes what the client logs in with next time; on a PLAINTEXT listener nothing is sent."""
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert a.set_sasl_credentials("someone", "secret") is None
    assert TOPIC in a.list_topics(timeout=T).topics


def test_every_method_is_covered():
    public = {m for m in dir(AdminClient) if not m.startswith("_")}
    tested = {name[len("test_"):] for name in globals() if name.startswith("test_")}
    assert public - tested == set()

