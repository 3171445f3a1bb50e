"""Every public method of kafka-python's KafkaAdminClient against a real ``compactlog serve``: each works,
or gets the answer Kafka 3.7 gives on a one-node cluster (docs/admin-clients.md lists the outcomes).
The requests kafka-python cannot shape (DeleteTopics by id, DescribeTopicPartitions' cursor, quotas,
delegation tokens) go through a raw connection. One server for the module; ``super.users`` keeps the
module's own principal allowed once the ACL test has created ACLs."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import wire

pytest.importorskip("kafka")
from kafka import KafkaConsumer, KafkaProducer  # noqa: E402
from kafka.admin import (  # noqa: E402
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ConfigResource,
    ConfigResourceType,
    KafkaAdminClient,
    NewPartitions,
    NewTopic,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from kafka.errors import (  # noqa: E402
    IncompatibleBrokerVersion,
    LogDirNotFoundError,
    NoError,
    NoReassignmentInProgressError,
    UnknownTopicOrPartitionError,
)
from kafka.protocol.consumer.offsets import OffsetSpec  # noqa: E402
from kafka.structs import OffsetAndMetadata, TopicPartition, TopicPartitionReplica  # noqa: E402

MS = 15000
TOPIC = "every-method"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with wire.serving(tmp_path_factory.mktemp("admin-all") / "data", {"super.users": "User:ANONYMOUS"}) as s:
        yield s


@pytest.fixture(scope="module")
def admin(broker):
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=MS)
    a.create_topics([NewTopic(TOPIC, 3, 1, topic_configs={"cleanup.policy": "compact"})])
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True)
    for i in range(5):
        producer.send(TOPIC, key=b"k%d" % i, value=b"v", partition=0)
    producer.flush(MS / 1000)
    producer.close()
    yield a
    a.close()


def raw(broker, body):
    with wire.RawClient.to(broker) as c:
        return c.call(body)


# topics and partitions ------------------------------------------------------------------------------

def test_kafka_python_takes_the_broker_for_kafka_3_3_or_newer(admin):
    assert admin.get_broker_version_data(1).broker_version >= (3, 3)
    versions = admin.api_versions()
    assert versions[19] == (2, 7) and versions[60] == (0, 1) and versions[75] == (0, 0)


def test_create_topics_answers_counts_configs_and_the_topic_id(admin, broker):
    made = admin.create_topics([NewTopic("made", 2, 1, topic_configs={"retention.ms": "5000"})])["topics"][0]
    assert (made["error_code"], made["num_partitions"], made["replication_factor"]) == (0, 2, 1)
    assert made["configs"]["retention.ms"]["value"] == "5000"
    assert made["configs"]["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert made["configs"]["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"
    listed = admin.describe_topic_partitions(["made"])["topics"][0]
    assert str(listed["topic_id"]) == str(made["topic_id"]) != str(uuid.UUID(int=0))
    checked = admin.create_topics([NewTopic("checked", 4, 1)], validate_only=True)["topics"][0]
    assert (checked["error_code"], checked["num_partitions"]) == (0, 4)
    assert "checked" not in admin.list_topics()
    admin.wait_for_topics(["made"])


@pytest.mark.parametrize("name, value, typ", [("retention.ms", "9" * 5000, "LONG"),
                                              ("segment.ms", "1" * 5000, "LONG"),
                                              ("segment.bytes", "-" + "7" * 4400, "INT")])
def test_a_number_of_thousands_of_digits_is_invalid_config_not_a_closed_connection(admin, name, value, typ):
    made = admin.create_topics([NewTopic("huge", 1, 1, topic_configs={name: value})], raise_errors=False)
    assert made["topics"][0]["error_code"] == 40
    assert made["topics"][0]["error_message"].endswith(f"for configuration {name}: Not a number of type {typ}")
    altered = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC, configs={name: value})])
    assert "Not a number of type" in altered["topic"][TOPIC]
    old = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC, configs={name: value})],
                              incremental=False)
    assert "Not a number of type" in old["topic"][TOPIC]
    assert admin.list_topics()  # the connection is still served


def test_describe_grow_trim_and_offsets(admin):
    assert {t["name"] for t in admin.describe_topics([TOPIC])} == {TOPIC}
    admin.create_partitions({"made": NewPartitions(3)})
    assert len(admin.describe_topics(["made"])[0]["partitions"]) == 3
    assert admin.delete_records({TopicPartition(TOPIC, 0): 2})[TopicPartition(TOPIC, 0)]["low_watermark"] == 2
    offsets = admin.list_partition_offsets({TopicPartition(TOPIC, 0): OffsetSpec.EARLIEST})
    assert offsets[TopicPartition(TOPIC, 0)].offset == 2


def test_delete_topics(admin):
    admin.create_topics([NewTopic("doomed", 1, 1)])
    assert admin.delete_topics(["doomed"])["topics"][0]["error_code"] == 0
    assert "doomed" not in admin.list_topics()


def test_delete_topics_v6_by_id(admin, broker):
    made = admin.create_topics([NewTopic("by-id", 1, 1)])["topics"][0]
    request = wire.module_of("delete_topics", 6, "request")
    topic_id = uuid.UUID(str(made["topic_id"]))
    answer = raw(broker, request.DeleteTopicsRequest(timeout=wire.ms(MS), topics=(
        request.DeleteTopicState(name=None, topic_id=topic_id),
        request.DeleteTopicState(name=None, topic_id=uuid.uuid4()),
        request.DeleteTopicState(name="x", topic_id=uuid.uuid4()))))
    gone, unknown, both = answer.responses
    assert (gone.name, gone.topic_id, gone.error_code) == ("by-id", topic_id, 0)
    assert unknown.error_code == 100  # UNKNOWN_TOPIC_ID
    assert both.error_code == 42 and "both topic name and topic id" in both.error_message
    assert "by-id" not in admin.list_topics()

    admin.create_topics([NewTopic("twice", 1, 1)])
    twice = uuid.UUID(str(admin.describe_topic_partitions(["twice"])["topics"][0]["topic_id"]))
    answer = raw(broker, request.DeleteTopicsRequest(timeout=wire.ms(MS), topics=(
        request.DeleteTopicState(name="twice", topic_id=None), request.DeleteTopicState(name="twice", topic_id=None),
        request.DeleteTopicState(name=None, topic_id=twice), request.DeleteTopicState(name=None, topic_id=twice),
        request.DeleteTopicState(name=None, topic_id=None))))
    assert [(r.error_code, r.error_message) for r in answer.responses] == [
        (42, "Duplicate topic name."), (42, "Duplicate topic name."), (42, "Duplicate topic id."),
        (42, "Duplicate topic id."), (42, "Neither topic name nor id were specified.")]
    older = wire.module_of("delete_topics", 4, "request")
    answer = raw(broker, older.DeleteTopicsRequest(timeout=wire.ms(MS), topic_names=("twice", "twice")))
    assert [r.error_code for r in answer.responses] == [42, 42]
    assert "twice" in admin.list_topics()  # a name given twice is refused, not deleted


def test_describe_topic_partitions_pages_by_cursor(admin, broker):
    admin.create_topics([NewTopic("paged-a", 3, 1), NewTopic("paged-b", 2, 1)])
    first = admin.describe_topic_partitions(["paged-a", "paged-b"], response_partition_limit=2)
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in first["topics"]] == \
        [("paged-a", [0, 1])]
    assert first["next_cursor"] == {"topic_name": "paged-a", "partition_index": 2}
    rest = admin.describe_topic_partitions(["paged-a", "paged-b"], response_partition_limit=2,
                                           cursor=first["next_cursor"])
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in rest["topics"]] == \
        [("paged-a", [2]), ("paged-b", [0])]
    assert rest["next_cursor"] == {"topic_name": "paged-b", "partition_index": 1}
    request = wire.module_of("describe_topic_partitions", 0, "request")
    odd = raw(broker, request.DescribeTopicPartitionsRequest(
        topics=(request.TopicRequest(name="paged-a"), request.TopicRequest(name="nope"),
                request.TopicRequest(name="bad name")), response_partition_limit=10))
    assert [(t.name, t.error_code) for t in odd.topics] == [("bad name", 17), ("nope", 3), ("paged-a", 0)]
    stray = raw(broker, request.DescribeTopicPartitionsRequest(
        topics=(request.TopicRequest(name="paged-a"),), response_partition_limit=10,
        cursor=request.Cursor(topic_name="paged-b", partition_index=0)))
    assert [t.error_code for t in stray.topics] == [42]


# configs ----------------------------------------------------------------------------------------------

def test_describe_alter_and_reset_configs(admin, broker):
    topic = ConfigResource(ConfigResourceType.TOPIC, TOPIC)
    assert admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC, configs={"retention.ms": "7000"})]) \
        == {"topic": {TOPIC: "OK"}}
    assert admin.describe_configs([topic])["topic"][TOPIC]["retention.ms"]["value"] == "7000"
    admin.reset_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC, configs={"retention.ms": None})])
    assert "retention.ms" not in admin.describe_configs([topic])["topic"][TOPIC]  # back to the default


def test_the_broker_reports_the_directory_it_serves(admin, broker):
    rows = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1")], config_filter="all")["broker"]["1"]
    served = str(Path(broker.data_dir).resolve())
    assert rows["log.dir"]["value"] == rows["log.dirs"]["value"] == served
    assert rows["log.dirs"]["config_source"] == "STATIC_BROKER_CONFIG"


# the cluster and its log directory ---------------------------------------------------------------------

def test_describe_cluster_v1(admin, broker):
    cluster = admin.describe_cluster()
    assert cluster["brokers"] == [{"broker_id": 1, "host": "127.0.0.1", "port": broker.port, "rack": None}]
    assert cluster["controller_id"] == 1


def test_describe_log_dirs_sizes_and_space(admin, broker):
    (answer,) = admin.describe_log_dirs({TOPIC: [0, 1, 7]})
    (d,) = answer["log_dirs"]
    assert d["log_dir"] == str(Path(broker.data_dir).resolve()) and d["error_code"] == 0
    assert d["total_bytes"] > 0 and 0 <= d["usable_bytes"] <= d["total_bytes"]
    (t,) = d["topics"]
    sizes = {p["partition_index"]: p["partition_size"] for p in t["partitions"]}
    assert set(sizes) == {0, 1} and sizes[0] > 0 and sizes[1] == 0  # partition 7 does not exist


def test_alter_replica_log_dirs(admin, broker):
    here = str(Path(broker.data_dir).resolve())
    moved = admin.alter_replica_log_dirs({TopicPartitionReplica(TOPIC, 0, 1): here,
                                          TopicPartitionReplica(TOPIC, 1, 1): "/elsewhere",
                                          TopicPartitionReplica("nope", 0, 1): here})
    assert moved[TopicPartitionReplica(TOPIC, 0, 1)] is NoError
    assert moved[TopicPartitionReplica(TOPIC, 1, 1)] is LogDirNotFoundError
    assert moved[TopicPartitionReplica("nope", 0, 1)] is UnknownTopicOrPartitionError


def test_log_dirs_command_prints_what_kafka_log_dirs_prints(admin, broker):
    run = subprocess.run([sys.executable, "-m", "compactlog", "log-dirs", "--bootstrap-server", broker.bootstrap,
                          "--describe", "--topic-list", TOPIC], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[:2] == ["Querying brokers for log directories information",
                         "Received log directory information from brokers 1"]
    assert lines[2].startswith('{"brokers":[{"broker":1,"logDirs":[{"partitions":[{"partition":"every-method-0",')
    parsed = json.loads(lines[2])
    assert parsed["version"] == 1
    assert [p["partition"] for p in parsed["brokers"][0]["logDirs"][0]["partitions"]] == \
        [f"{TOPIC}-{i}" for i in range(3)]
    bad = subprocess.run([sys.executable, "-m", "compactlog", "log-dirs", "--bootstrap-server", broker.bootstrap,
                          "--describe", "--broker-list", "2"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1
    assert bad.stderr.strip() == ("Error: The given brokers do not exist from --broker-list: 2. "
                                  "Current existent brokers: 1")


def test_elect_leaders_is_never_needed(admin):
    answer = admin.elect_leaders(0, {TOPIC: [0, 9]}, raise_errors=False)
    (result,) = answer.replica_election_results
    assert [(p.partition_id, p.error_code) for p in result.partition_result] == [(0, 84), (9, 3)]
    every = admin.elect_leaders(1)  # unclean, on every partition: nothing to elect, no error raised
    assert all(p.error_code == 84 for r in every.replica_election_results for p in r.partition_result)


def test_partition_reassignments(admin):
    assert admin.list_partition_reassignments() == {}
    answer = admin.alter_partition_reassignments({TopicPartition(TOPIC, 0): None, TopicPartition(TOPIC, 1): [1],
                                                  TopicPartition(TOPIC, 2): [1, 2]})
    assert answer[TopicPartition(TOPIC, 0)] is NoReassignmentInProgressError
    assert answer[TopicPartition(TOPIC, 1)] is None  # this node alone: the assignment it has
    assert answer[TopicPartition(TOPIC, 2)].errno == 39


def test_describe_producers(admin):
    states = admin.describe_producers([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)])
    (producer,) = states[TopicPartition(TOPIC, 0)].active_producers
    assert (producer.producer_epoch, producer.last_sequence, producer.coordinator_epoch) == (0, 4, -1)
    assert producer.last_timestamp > 0
    assert states[TopicPartition(TOPIC, 1)].active_producers == []


def test_features_are_none(admin):
    assert admin.describe_features() == {}


# ACLs at v3 ---------------------------------------------------------------------------------------------

def test_acls(admin):
    acl = ACL("User:bob", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
              ResourcePattern(ResourceType.TOPIC, TOPIC, ACLResourcePatternType.LITERAL))
    assert admin.create_acls([acl])["failed"] == []
    every = ACLFilter(principal=None, host="*", operation=ACLOperation.ANY, permission_type=ACLPermissionType.ANY,
                      resource_pattern=ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))
    found, error = admin.describe_acls(every)
    assert error is NoError and [a.principal for a in found] == ["User:bob"]
    ((_filter, removed, error),) = admin.delete_acls([every])
    assert error is NoError and len(removed) == 1


# groups (their lane's tests go further) ------------------------------------------------------------------

def test_group_methods(admin, broker):
    tp = TopicPartition(TOPIC, 0)
    admin.alter_group_offsets("g1", {tp: OffsetAndMetadata(3, "", -1)})
    assert admin.list_group_offsets({"g1": None})["g1"][tp].offset == 3
    reset = admin.reset_group_offsets("g1", {tp: OffsetSpec.LATEST})[tp]
    assert reset["error"] is NoError and reset["offset"] == 5
    assert admin.list_group_offsets({"g1": [tp]})["g1"][tp].offset == 5
    assert "g1" in [g["group_id"] for g in admin.list_groups()]
    assert admin.describe_groups(["g1"])
    admin.delete_group_offsets("g1", [tp])
    admin.remove_group_members("g1", [])  # naming nobody: nothing to do
    assert admin.delete_groups(["g1"])


# what a one-node broker without these features answers -----------------------------------------------------

@pytest.mark.parametrize("call", [
    lambda a: a.describe_metadata_quorum(),  # no KRaft quorum here
    lambda a: a.update_features({}),  # no features to finalize
    lambda a: a.list_config_resources(),  # Kafka 4.1's API
], ids=["describe_metadata_quorum", "update_features", "list_config_resources"])
def test_apis_not_served_are_refused_by_the_client_before_sending(admin, call):
    with pytest.raises(IncompatibleBrokerVersion):
        call(admin)


def test_list_transactions_filters_out_what_matches_no_transaction(admin):
    assert admin.api_versions()[66] == (0, 0) and admin.api_versions()[65] == (0, 0)
    unused = 2**62  # a producer id no transaction of this module's server holds, whatever ran before
    assert admin.list_transactions(producer_id_filters=[unused]) == {1: []}
    assert admin.list_transactions(state_filters=["Ongoing"], producer_id_filters=[unused]) == {1: []}
    assert admin.find_hanging_transactions() == []


def test_list_transactions_returns_unknown_state_filters_as_kafka_does(broker):
    request = wire.module_of("list_transactions", 0, "request")
    answer = raw(broker, request.ListTransactionsRequest(state_filters=("Ongoing", "Nonsense", "ongoing", "Nonsense")))
    assert answer.error_code == 0 and answer.transaction_states == ()
    assert answer.unknown_state_filters == ("Nonsense", "ongoing")  # names are case-sensitive in Kafka


def test_describe_transactions_answers_not_found_for_every_id(broker):
    request = wire.module_of("describe_transactions", 0, "request")
    answer = raw(broker, request.DescribeTransactionsRequest(transactional_ids=("t1", "", "t2")))
    assert [(s.transactional_id, s.error_code) for s in answer.transaction_states] == [
        ("t1", 105), ("", 42), ("t2", 105)]  # TRANSACTIONAL_ID_NOT_FOUND; an empty id INVALID_REQUEST
    assert all(s.topics == () and s.producer_id == 0 for s in answer.transaction_states)


def test_a_kafka_python_transaction_is_listed_and_described(broker, admin):
    from kafka.errors import TransactionalIdNotFoundError

    with pytest.raises(TransactionalIdNotFoundError):  # the coordinator holds no such id
        admin.describe_transactions(["never"])
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="kp-txn", request_timeout_ms=MS)
    producer.init_transactions()
    producer.begin_transaction()
    producer.send(TOPIC, key=b"t", value=b"v", partition=1)
    producer.commit_transaction()
    producer.close()
    (described,) = admin.describe_transactions(["kp-txn"]).values()
    assert described.state == "CompleteCommit" and described.producer_epoch == 0
    (listed,) = admin.list_transactions(state_filters=["CompleteCommit"]).values()  # one broker's listing
    assert [x.transactional_id for x in listed] == ["kp-txn"]


def test_abort_transaction_writes_an_abort_marker(broker, admin):
    from kafka.admin import AbortTransactionSpec
    from kafka.admin import NewTopic as _NewTopic

    admin.create_topics([_NewTopic("abort-here", 1, 1)])
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    tp = TopicPartition("abort-here", 0)
    assert consumer.end_offsets([tp])[tp] == 0
    admin.abort_transaction(AbortTransactionSpec(tp, 1, 0, 0))  # WriteTxnMarkers: a marker, even with nothing open
    assert consumer.end_offsets([tp])[tp] == 1
    consumer.close()


def test_scram_credential_methods(admin):
    from kafka.admin import ScramMechanism, UserScramCredentialUpsertion

    assert "carol" not in admin.describe_user_scram_credentials()
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion("carol", ScramMechanism.SCRAM_SHA_256,
                                                                     "carol-secret")])
    (info,) = admin.describe_user_scram_credentials()["carol"]["credential_infos"]
    assert info["mechanism"] == ScramMechanism.SCRAM_SHA_256 and info["iterations"] == 4096


# quotas and delegation tokens (kafka-python has no methods for them) ---------------------------------------

def test_client_quotas_are_refused_not_stored(broker):
    describe = wire.module_of("describe_client_quotas", 1, "request")
    none = raw(broker, describe.DescribeClientQuotasRequest(components=(), strict=False))
    assert (none.error_code, none.entries) == (0, ())
    alter = wire.module_of("alter_client_quotas", 1, "request")
    entity = (alter.EntityData(entity_type="user", entity_name="alice"),)
    answer = raw(broker, alter.AlterClientQuotasRequest(validate_only=False, entries=(
        alter.EntryData(entity=entity, ops=(alter.OpData(key="producer_byte_rate", value=1024.0, remove=False),)),
        alter.EntryData(entity=entity, ops=(alter.OpData(key="producer_byte_rate", value=0.0, remove=True),)))))
    refused, removed = answer.entries
    assert refused.error_code == 42 and "does not enforce client quotas" in refused.error_message
    assert removed.error_code == 0


def _error_code_of(broker, body) -> int:
    """The error code leading a flexible response body (kio cannot read the -1 timestamps Kafka puts
    in a refused token's answer, so the bytes are read here)."""
    with wire.RawClient.to(broker) as c:
        c.send(body)
        payload = c.read_frame()
    return int.from_bytes(payload[5:7], "big", signed=True)  # after the correlation id and the header's tags


def test_delegation_tokens_over_plaintext(broker):
    create = wire.module_of("create_delegation_token", 3, "request")
    assert _error_code_of(broker, create.CreateDelegationTokenRequest(
        owner_principal_type=None, owner_principal_name=None, renewers=(), max_lifetime=wire.ms(-1))) == 64
    renew = wire.module_of("renew_delegation_token", 2, "request")
    assert _error_code_of(broker, renew.RenewDelegationTokenRequest(hmac=b"x", renew_period=wire.ms(1))) == 64
    describe = wire.module_of("describe_delegation_token", 3, "request")
    assert raw(broker, describe.DescribeDelegationTokenRequest(owners=None)).error_code == 64  # not allowed here


# the rest of the wire answers --------------------------------------------------------------------------

@pytest.mark.parametrize("endpoint, code", [(1, 0), (2, 114), (9, 115)])  # broker, controller, unknown
def test_describe_cluster_v1_endpoint_types(broker, endpoint, code):
    request = wire.module_of("describe_cluster", 1, "request")
    answer = raw(broker, request.DescribeClusterRequest(include_cluster_authorized_operations=False,
                                                        endpoint_type=endpoint))
    assert (answer.error_code, answer.endpoint_type) == (code, 1)
    assert bool(answer.brokers) == (code == 0)


def test_describe_cluster_authorized_operations(broker):
    request = wire.module_of("describe_cluster", 1, "request")
    asked = raw(broker, request.DescribeClusterRequest(include_cluster_authorized_operations=True, endpoint_type=1))
    assert asked.cluster_authorized_operations == sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))  # a super user
    unasked = raw(broker, request.DescribeClusterRequest(include_cluster_authorized_operations=False,
                                                         endpoint_type=1))
    assert unasked.cluster_authorized_operations == -(2**31)


def test_elect_leaders_of_an_unknown_election_type(broker):
    request = wire.module_of("elect_leaders", 2, "request")
    answer = raw(broker, request.ElectLeadersRequest(election_type=7, timeout=wire.ms(MS), topic_partitions=(
        request.TopicPartitions(topic=TOPIC, partitions=(0,)),)))
    assert answer.error_code == 42
    assert answer.replica_election_results[0].partition_result[0].error_message == "Unknown election type 7"


def test_every_method_is_in_the_docs_table():
    """A kafka-python release that adds a method fails here until the method is called above and listed."""
    text = (Path(__file__).parents[2] / "docs" / "admin-clients.md").read_text()
    section = text.split("## kafka-python")[1].split("\n## ")[0]
    documented = {name for line in section.splitlines() if line.startswith("| `")
                  for name in line.split(" | ")[0].strip("| ").replace("`", "").split(", ")}
    public = {m for m in dir(KafkaAdminClient) if not m.startswith("_") and callable(getattr(KafkaAdminClient, m))}
    assert public == documented
    called = Path(__file__).read_text()
    assert [m for m in sorted(public) if f".{m}(" not in called] == []


# with ACLs that do not give the caller the cluster ------------------------------------------------------

@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    """A broker whose only ACL lets everyone describe topics: the cluster APIs are refused."""
    from compactlog.security.acls import AclBinding, AclStore, Operation, PatternType, Permission
    from compactlog.security.acls import ResourceType as Kind

    data = tmp_path_factory.mktemp("admin-guarded") / "data"
    data.mkdir()
    AclStore(data).add([AclBinding(Kind.TOPIC, "*", PatternType.LITERAL, "User:*", "*", Operation.DESCRIBE,
                                   Permission.ALLOW)])
    with wire.serving(data) as s:
        yield s


def test_the_cluster_apis_need_the_cluster(guarded):
    m = wire.module_of
    dirs = m("describe_log_dirs", 4, "request")
    assert raw(guarded, dirs.DescribeLogDirsRequest(topics=None)).error_code == 31
    move = m("alter_replica_log_dirs", 2, "request")
    here = str(Path(guarded.data_dir).resolve())
    moved = raw(guarded, move.AlterReplicaLogDirsRequest(dirs=(move.AlterReplicaLogDir(
        path=here, topics=(move.AlterReplicaLogDirTopic(name="t", partitions=(0,)),)),)))
    assert moved.results[0].partitions[0].error_code == 31
    elect = m("elect_leaders", 2, "request")
    assert raw(guarded, elect.ElectLeadersRequest(election_type=0, topic_partitions=None,
                                                  timeout=wire.ms(MS))).error_code == 31
    alter = m("alter_partition_reassignments", 0, "request")
    assert raw(guarded, alter.AlterPartitionReassignmentsRequest(timeout=wire.ms(MS), topics=())).error_code == 31
    listing = m("list_partition_reassignments", 0, "request")
    assert raw(guarded, listing.ListPartitionReassignmentsRequest(timeout=wire.ms(MS), topics=None)).error_code == 31
    quotas = m("describe_client_quotas", 1, "request")
    assert raw(guarded, quotas.DescribeClientQuotasRequest(components=(), strict=False)).error_code == 31
    cluster = m("describe_cluster", 1, "request")
    assert raw(guarded, cluster.DescribeClusterRequest(include_cluster_authorized_operations=True,
                                                       endpoint_type=1)).cluster_authorized_operations == 0


def test_describe_producers_needs_read_and_topics_are_described_with_the_callers_operations(guarded):
    producers = wire.module_of("describe_producers", 0, "request")
    answer = raw(guarded, producers.DescribeProducersRequest(topics=(producers.TopicRequest(name="t",
                                                                                          partition_indexes=(0,)),)))
    assert answer.topics[0].partitions[0].error_code == 29
    request = wire.module_of("describe_topic_partitions", 0, "request")
    listed = raw(guarded, request.DescribeTopicPartitionsRequest(topics=(request.TopicRequest(name="t"),),
                                                                 response_partition_limit=10))
    assert [(t.name, t.error_code, t.topic_authorized_operations) for t in listed.topics] == [("t", 3, 1 << 8)]


@pytest.mark.parametrize("protocol, principal, code", [
    ("PLAINTEXT", "User:ANONYMOUS", 64), ("SSL", "User:ANONYMOUS", 64), ("SSL", "User:CN=client", 61),
    ("SASL_PLAINTEXT", "User:alice", 61), ("SASL_SSL", "User:alice", 61)])
def test_delegation_tokens_answer_as_kafka_without_a_master_key(protocol, principal, code):
    """Kafka refuses token requests on connections that did not authenticate (64), and answers the others
    that tokens are disabled (61); in-process, one session per security protocol."""
    import asyncio

    from compactlog.server import delegation_tokens
    from compactlog.server.broker import Session
    from compactlog.server.protocol import Request
    from compactlog.server.security import SECURITY_PROTOCOL

    session = Session("127.0.0.1", 1, principal=principal, extra={SECURITY_PROTOCOL: protocol})
    expire = wire.module_of("expire_delegation_token", 2, "request")
    body = expire.ExpireDelegationTokenRequest(hmac=b"x", expiry_time_period=wire.ms(-1))
    answer = asyncio.run(delegation_tokens.expire_delegation_token(None, Request(40, 2, 1, None, body, 0), session))
    assert answer.error_code == code
    create = wire.module_of("create_delegation_token", 3, "request")
    renewer = create.CreatableRenewers(principal_type="Group", principal_name="g")
    body = create.CreateDelegationTokenRequest(owner_principal_type=None, owner_principal_name=None,
                                               max_lifetime=wire.ms(-1), renewers=(renewer,))
    answer = asyncio.run(delegation_tokens.create_delegation_token(None, Request(38, 3, 1, None, body, 0), session))
    assert answer.error_code == (67 if code == 61 else 64)  # INVALID_PRINCIPAL_TYPE once allowed
    assert (answer.principal_type, answer.principal_name) == tuple(principal.split(":", 1))
