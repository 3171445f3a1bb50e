"""The data-path APIs at Kafka 3.7's versions, flexible ones included: Produce v10, Fetch v16 (topics by
id from v13), ListOffsets v8 (max timestamp, earliest local), Metadata v12 (topic ids, authorized
operations), OffsetForLeaderEpoch v4, InitProducerId v4; with the newest clients taking those paths.

Versions a client used are read from librdkafka's protocol debug log ("Sent FetchRequest (v16, ...").
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import logging
import re
import struct
import time
import uuid

import pytest
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from compactlog.server.fetch import encode_fetch_response
from compactlog.server.versions import SERVED

import wire

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicCollection, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, OffsetSpec  # noqa: E402

T = 30
KAFKA_37 = {0: 10, 1: 16, 2: 8, 3: 12, 22: 4, 23: 4}  # api key -> the max version Kafka 3.7 serves
ALL_TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))  # READ .. ALTER_CONFIGS
ALL_CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))
NOT_COMPUTED = -(2**31)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with wire.serving(tmp_path_factory.mktemp("versions") / "data") as s:
        yield s


class Sent(logging.Handler):
    """librdkafka's protocol debug lines: which request went out at which version."""

    def __init__(self) -> None:
        super().__init__()
        self.versions: dict[str, set[int]] = {}

    def emit(self, record: logging.LogRecord) -> None:
        m = re.search(r"Sent (\w+)Request \(v(\d+)", record.getMessage())
        if m:
            self.versions.setdefault(m.group(1), set()).add(int(m.group(2)))

    def logger(self) -> logging.Logger:
        log = logging.getLogger(f"librdkafka-{id(self)}")
        log.addHandler(self)
        log.setLevel(logging.DEBUG)
        log.propagate = False
        return log


def stored_id(server, topic: str) -> str:
    """The id Kafka's own file in the partition folder holds."""
    text = (server.data_dir / f"{topic}-0" / "partition.metadata").read_text()
    return re.search(r"topic_id:\s*(\S+)", text).group(1)


def wire_id(text: str) -> uuid.UUID:
    import base64

    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def produce(server, topic: str, values: list[bytes], timestamps: list[int] | None = None, sent: Sent | None = None,
            **conf) -> None:
    extra = {"debug": "protocol", "logger": sent.logger()} if sent else {}
    p = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 0, **extra, **conf})
    for i, v in enumerate(values):
        p.produce(topic, v, **({"timestamp": timestamps[i]} if timestamps else {}))
    assert p.flush(T) == 0


def test_api_versions_advertise_kafka_37s_data_path_versions(server):
    with wire.RawClient.to(server) as c:
        answer = c.call(wire.api_versions(3))
    ranges = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
    for key, top in KAFKA_37.items():
        assert ranges[key] == (SERVED[key].min_version, top), key


def test_librdkafka_produces_and_fetches_at_the_newest_versions_fetch_naming_topics_by_id(server):
    sent = Sent()
    produce(server, "modern", [f"v{i}".encode() for i in range(20)], sent=sent, **{"enable.idempotence": True})
    c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "modern-reader", "enable.auto.commit": False,
                  "debug": "protocol", "logger": sent.logger()})
    c.assign([TopicPartition("modern", 0, 0)])
    got = []
    deadline = time.monotonic() + T
    try:
        while len(got) < 20 and time.monotonic() < deadline:
            m = c.poll(1)
            if m is not None and not m.error():
                got.append((m.offset(), m.value()))
    finally:
        c.close()
    assert got == [(i, f"v{i}".encode()) for i in range(20)]
    assert max(sent.versions["Produce"]) == 10
    assert max(sent.versions["Fetch"]) == 16  # v13+: the topic is named by its id
    assert max(sent.versions["Metadata"]) == 12
    assert max(sent.versions["InitProducerId"]) == 4


def test_kafka_python_fetches_at_the_flexible_v12(server, caplog):
    """kafka-python 3.0 takes Fetch up to v12 (names, not ids): the flexible layout with topic names."""
    kafka = pytest.importorskip("kafka")
    caplog.set_level(logging.DEBUG, logger="kafka")
    produce(server, "kp-flexible", [b"a", b"b", b"c"])
    consumer = kafka.KafkaConsumer(bootstrap_servers=server.bootstrap, auto_offset_reset="earliest",
                                   enable_auto_commit=False)
    got: list = []
    deadline = time.monotonic() + T
    try:
        consumer.assign([kafka.TopicPartition("kp-flexible", 0)])
        while len(got) < 3 and time.monotonic() < deadline:
            got += [m.value for batch in consumer.poll(500).values() for m in batch]
        assert got == [b"a", b"b", b"c"]
    finally:
        consumer.close()
    assert max(int(v) for v in re.findall(r"FetchRequest.{0,40}?version=(\d+)", caplog.text)) == 12


def test_fetch_by_topic_id_returns_the_topics_records(server):
    produce(server, "by-id", [b"x", b"y"])
    tid = wire_id(stored_id(server, "by-id"))
    with wire.RawClient.to(server) as c:
        for version in (13, 16):
            answer = c.call(wire.fetch(tid, 0, 0, version=version))
            (topic,) = answer.responses
            assert topic.topic_id == tid
            (part,) = topic.partitions
            assert part.error_code == ErrorCode.none and part.high_watermark == 2
            assert b"x" in part.records and b"y" in part.records


def test_fetch_of_an_unknown_topic_id_is_unknown_topic_id(server):
    produce(server, "known", [b"x"])
    stranger = uuid.uuid4()
    with wire.RawClient.to(server) as c:
        for version in (13, 16):
            body = wire.fetch(stranger, 0, 0, version=version, max_wait=5000)
            t0 = time.monotonic()
            (topic,) = c.call(body).responses
            assert time.monotonic() - t0 < 4  # an error answers at once, not after max_wait
            assert topic.topic_id == stranger
            (part,) = topic.partitions
            assert part.error_code == ErrorCode.unknown_topic_id
            assert (part.high_watermark, part.log_start_offset, part.records) == (-1, -1, b"")
        # beside a known topic, the known one is still read
        mod = wire.module_of("fetch", 16, "request")
        known = wire.fetch(wire_id(stored_id(server, "known")), 0, 0, version=16)
        both = dataclasses.replace(known, topics=known.topics + (
            mod.FetchTopic(topic_id=stranger, partitions=known.topics[0].partitions),))
        got = {t.topic_id: t.partitions[0].error_code for t in c.call(both).responses}
        assert got == {wire_id(stored_id(server, "known")): ErrorCode.none, stranger: ErrorCode.unknown_topic_id}


def _kio_fetch_bytes(version: int, correlation: int, topics: list, leader: tuple | None = None) -> bytes:
    """kio's bytes for a Fetch response (header v1 then the body) with these (key, rows) and no records;
    from v16 with ``leader`` (id, host, port) named where a partition's error says the leader moved."""
    mod = wire.module_of("fetch", version, "response")
    key = "topic_id" if version >= 13 else "topic"
    moved = version >= 16 and leader is not None and any(r[1] in (6, 74) for _, rows in topics for r in rows)

    def partition(i, err, hw, lso, start, aborted):
        extra = {"current_leader": mod.LeaderIdAndEpoch(leader_id=leader[0], leader_epoch=0)} if (
            moved and err in (6, 74)) else {}
        txns = None if aborted is None else tuple(mod.AbortedTransaction(producer_id=pid, first_offset=first)
                                                   for pid, first in aborted)
        return mod.PartitionData(partition_index=i, error_code=ErrorCode(err), high_watermark=hw, last_stable_offset=lso,
                                 log_start_offset=start, aborted_transactions=txns,
                                 preferred_read_replica=-1,
                                 records=b"", **extra)

    endpoints = {"node_endpoints": (mod.NodeEndpoint(node_id=leader[0], host=leader[1], port=leader[2]),)} if moved else {}
    body = mod.FetchResponse(
        throttle_time=datetime.timedelta(0), error_code=ErrorCode.none, session_id=0, **endpoints,
        responses=tuple(mod.FetchableTopicResponse(**{key: name}, partitions=tuple(
            partition(*row[:-1]) for row in rows)) for name, rows in topics))
    out = io.BytesIO()
    entity_writer(mod.FetchResponse)(out, body)
    return struct.pack(">i", correlation) + b"\0" + out.getvalue()


@pytest.mark.parametrize("read_committed", [False, True])
@pytest.mark.parametrize("version", [12, 13, 15, 16])
def test_the_hand_written_flexible_fetch_response_is_byte_for_byte_kios(version, read_committed):
    """Aborted transactions are null for read_uncommitted (not looked for) and a list for read_committed,
    empty or not, as Kafka answers; the last stable offset is its own field, below the high watermark."""
    name = (lambda n: uuid.uuid5(uuid.NAMESPACE_DNS, n)) if version >= 13 else str
    aborted = [(4001, 5), (2**40, 9)] if read_committed else None
    topics = [(name("prices"), [(0, 0, 12, 7, 3, aborted, b""), (1, 3, -1, -1, -1, [], b""),
                                (2, 0, 4, 4, 0, [] if read_committed else None, b"")]),
              (name("empty"), []),
              (name("ü" * 200), [(7, 100, -1, -1, -1, [], b"")])]  # a name whose compact length takes two bytes
    frame = b"".join(encode_fetch_response(99, version, topics, (1, "broker.example", 9092)).parts)
    assert frame[4:] == _kio_fetch_bytes(version, 99, topics)
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4


@pytest.mark.parametrize("version", [15, 16])
def test_a_leader_moved_error_names_the_leader_from_fetch_v16(version):
    """KIP-951: FENCED_LEADER_EPOCH and NOT_LEADER_OR_FOLLOWER carry the current leader and its endpoint
    in tagged fields (from v16; before, nothing). One node never answers them today; the layout is ready."""
    leader = (3, "broker.example", 9093)
    topics = [(uuid.uuid4(), [(0, 74, -1, -1, -1, None, b""), (1, 0, 5, 5, 0, None, b""), (2, 6, -1, -1, -1, None, b"")])]
    frame = b"".join(encode_fetch_response(7, version, topics, leader).parts)
    assert frame[4:] == _kio_fetch_bytes(version, 7, topics, leader)
    assert (b"broker.example" in frame) == (version >= 16)


def test_a_flexible_fetch_response_with_records_reads_back_with_kio(server):
    produce(server, "readback", [b"r" * 300] * 3)
    with wire.RawClient.to(server) as c:
        a = c.call(wire.fetch("readback", 0, 0, version=12))  # wire's reader checks every byte is used
        b = c.call(wire.fetch(wire_id(stored_id(server, "readback")), 0, 0, version=16))
    assert a.responses[0].partitions[0].records == b.responses[0].partitions[0].records
    assert len(a.responses[0].partitions[0].records) > 900


def test_metadata_carries_the_stored_topic_id_as_confluent_describe_topics_shows_it(server):
    produce(server, "ided", [b"x"])
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    d = admin.describe_topics(TopicCollection(["ided"]))["ided"].result(T)
    # librdkafka prints ids in standard base64 and Kafka in the URL-safe alphabet: compare the 128 bits
    mask = 2**64 - 1  # the halves come as Java's signed longs
    bits = (d.topic_id.get_most_significant_bits() & mask) << 64 | d.topic_id.get_least_significant_bits() & mask
    assert bits != 0
    assert bits == wire_id(stored_id(server, "ided")).int
    with wire.RawClient.to(server) as c:
        for version in (10, 12):
            (topic,) = c.call(wire.metadata(["ided"], version)).topics
            assert topic.topic_id == wire_id(stored_id(server, "ided"))
        (missing,) = c.call(wire.metadata(["nope"], 12)).topics
        assert missing.error_code == ErrorCode.unknown_topic_or_partition and missing.topic_id is None


def _metadata_by_id(ids: list[uuid.UUID], version: int = 12):
    mod = wire.module_of("metadata", version, "request")
    return mod.MetadataRequest(topics=tuple(mod.MetadataRequestTopic(topic_id=i, name=None) for i in ids),
                               allow_auto_topic_creation=False, include_topic_authorized_operations=False)


def test_metadata_v12_by_topic_id(server):
    produce(server, "found-by-id", [b"x"])
    tid, stranger = wire_id(stored_id(server, "found-by-id")), uuid.uuid4()
    with wire.RawClient.to(server) as c:
        topics = {t.topic_id: t for t in c.call(_metadata_by_id([tid, stranger])).topics}
    assert topics[tid].name == "found-by-id" and topics[tid].error_code == ErrorCode.none
    assert len(topics[tid].partitions) == 1
    assert topics[stranger].error_code == ErrorCode.unknown_topic_id and topics[stranger].name is None


def test_metadata_before_v12_refuses_topic_ids_as_kafka_does(server):
    mod = wire.module_of("metadata", 10, "request")
    body = mod.MetadataRequest(topics=(mod.MetadataRequestTopic(topic_id=uuid.uuid4(), name="some"),),
                               allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                               include_topic_authorized_operations=False)
    with wire.RawClient.to(server) as c:
        answer = c.call(body)
    assert answer.brokers == () and answer.controller_id == -1
    assert [(t.name, t.error_code) for t in answer.topics] == [("some", ErrorCode.invalid_request)]
    nameless = dataclasses.replace(body, topics=(mod.MetadataRequestTopic(topic_id=None, name=None),))
    with wire.RawClient.to(server) as c:
        answer = c.call(nameless)
    assert [(t.name, t.error_code) for t in answer.topics] == [("", ErrorCode.invalid_request)]


def test_authorized_operations_only_when_asked(server):
    produce(server, "ops", [b"x"])
    with wire.RawClient.to(server) as c:
        for version in (8, 10, 12):
            (t,) = c.call(wire.metadata(["ops"], version)).topics
            assert t.topic_authorized_operations == NOT_COMPUTED
            mod = wire.module_of("metadata", version, "request")
            extra = {"include_cluster_authorized_operations": True} if version <= 10 else {}
            topic = mod.MetadataRequestTopic(name="ops", **({"topic_id": None} if version >= 10 else {}))
            asked = mod.MetadataRequest(topics=(topic,), allow_auto_topic_creation=False,
                                        include_topic_authorized_operations=True, **extra)
            answer = c.call(asked)
            assert answer.topics[0].topic_authorized_operations == ALL_TOPIC_OPERATIONS  # no ACLs: everything
            if version <= 10:
                assert answer.cluster_authorized_operations == ALL_CLUSTER_OPERATIONS
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    d = admin.describe_topics(TopicCollection(["ops"]), include_authorized_operations=True)["ops"].result(T)
    assert {op.name for op in d.authorized_operations} == {"READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE",
                                                          "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}


def test_list_offsets_max_timestamp_with_confluent_and_kafka_python(server):
    # timestamps out of order: the largest (5000) is at offset 2, and offset 4 has it too (the first counts)
    produce(server, "maxts", [b"a", b"b", b"c", b"d", b"e"], timestamps=[1000, 3000, 5000, 2000, 5000])
    sent = Sent()
    admin = AdminClient({"bootstrap.servers": server.bootstrap, "debug": "protocol", "logger": sent.logger()})
    tp = TopicPartition("maxts", 0)
    got = admin.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(T)
    assert (got.offset, got.timestamp) == (2, 5000)
    admin.poll(0)  # hands the debug lines to the logger
    assert max(sent.versions["ListOffsets"]) >= 7
    kafka = pytest.importorskip("kafka")
    from kafka.admin import KafkaAdminClient, OffsetSpec as KafkaOffsetSpec

    kp = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    try:
        (answer,) = kp.list_partition_offsets({kafka.TopicPartition("maxts", 0): KafkaOffsetSpec.MAX_TIMESTAMP}).values()
        assert (answer.offset, answer.timestamp) == (2, 5000)
    finally:
        kp.close()


def test_list_offsets_max_timestamp_skips_records_below_the_log_start_and_empty_logs(server):
    produce(server, "maxts-deleted", [b"a", b"b", b"c"], timestamps=[9000, 1000, 2000])
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    tp = TopicPartition("maxts-deleted", 0)
    admin.delete_records([TopicPartition("maxts-deleted", 0, 1)])[tp].result(T)
    with wire.RawClient.to(server) as c:
        (part,) = c.call(wire.list_offsets("maxts-deleted", 0, -3, version=7)).topics[0].partitions
        assert (part.offset, part.timestamp) == (2, 2000)
        (made,) = c.call(wire.metadata(["maxts-empty"], 12, auto_create=True)).topics
        assert made.error_code == ErrorCode.none
        (part,) = c.call(wire.list_offsets("maxts-empty", 0, -3, version=8)).topics[0].partitions
        assert (part.error_code, part.offset, part.timestamp, part.leader_epoch) == (ErrorCode.none, -1, -1, -1)


def test_list_offsets_earliest_local_is_the_log_start(server):
    produce(server, "local", [b"a", b"b", b"c", b"d"])
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    tp = TopicPartition("local", 0)
    admin.delete_records([TopicPartition("local", 0, 3)])[tp].result(T)
    with wire.RawClient.to(server) as c:
        (part,) = c.call(wire.list_offsets("local", 0, -4, version=8)).topics[0].partitions
    assert (part.error_code, part.offset, part.timestamp) == (ErrorCode.none, 3, -1)


def test_offset_for_leader_epoch_v4(server):
    produce(server, "epochs", [b"a", b"b"])
    mod = wire.module_of("offset_for_leader_epoch", 4, "request")
    body = mod.OffsetForLeaderEpochRequest(replica_id=-1, topics=(mod.OffsetForLeaderTopic(topic="epochs", partitions=(
        mod.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1, leader_epoch=0),)),))
    with wire.RawClient.to(server) as c:
        (p,) = c.call(body).topics[0].partitions
    assert (p.error_code, p.leader_epoch, p.end_offset) == (ErrorCode.none, 0, 2)


def test_init_producer_id_v4_with_an_id_and_no_epoch_is_an_invalid_request(server):
    mod = wire.module_of("init_producer_id", 4, "request")
    with wire.RawClient.to(server) as c:
        half = c.call(mod.InitProducerIdRequest(transactional_id=None, transaction_timeout=wire.ms(60_000),
                                                producer_id=5, producer_epoch=-1))
        bump = c.call(mod.InitProducerIdRequest(transactional_id=None, transaction_timeout=wire.ms(60_000),
                                                producer_id=5, producer_epoch=3))
    assert half.error_code == ErrorCode.invalid_request
    assert bump.error_code == ErrorCode.none and bump.producer_epoch == 0 and bump.producer_id >= 0


def test_list_offsets_asking_for_a_partition_twice_is_an_invalid_request(server):
    produce(server, "twice", [b"a"])
    body = wire.list_offsets("twice", 0, -1, version=8)
    topic = body.topics[0]
    twice = dataclasses.replace(body, topics=(dataclasses.replace(topic, partitions=topic.partitions * 2),))
    with wire.RawClient.to(server) as c:
        parts = c.call(twice).topics[0].partitions
    assert [p.error_code for p in parts] == [ErrorCode.invalid_request] * 2


def test_a_null_array_where_the_schema_allows_none_closes_the_connection(server):
    """Kafka's parser refuses a non-nullable array sent as null (length -1); kio reads it as None."""
    body = wire.list_offsets("anything", 0, -1, version=1)
    head = wire.header_bytes(body, 5, "compactlog-tests")
    with wire.RawClient.to(server) as c:
        c.sock.sendall(wire.frame(head + struct.pack(">ii", -1, -1)))  # replica id, then topics: null
        assert c.closed_by_peer()
    with wire.RawClient.to(server) as c:  # the broker goes on serving
        assert c.call(wire.api_versions(3)).error_code == ErrorCode.none


def test_metadata_ids_are_describe_topic_partitions_ids(server):
    produce(server, "same-id", [b"x"])
    mod = wire.module_of("describe_topic_partitions", 0, "request")
    with wire.RawClient.to(server) as c:
        (described,) = c.call(mod.DescribeTopicPartitionsRequest(
            topics=(mod.TopicRequest(name="same-id"),), response_partition_limit=10, cursor=None)).topics
        (listed,) = c.call(wire.metadata(["same-id"], 12)).topics
    assert described.topic_id == listed.topic_id == wire_id(stored_id(server, "same-id"))


def test_authorized_operations_follow_the_acls(server):
    """With ACLs letting the anonymous user READ one topic and ALTER the cluster (so that it may remove
    them afterwards), that topic's operations are READ and DESCRIBE (which READ implies), another
    topic is refused without any, and the cluster's are ALTER and DESCRIBE: Metadata computes them from the ACLs."""
    from confluent_kafka.admin import AclBinding, AclBindingFilter, AclOperation, AclPermissionType, \
        ResourcePatternType, ResourceType

    produce(server, "guarded", [b"x"])
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    binding = AclBinding(ResourceType.TOPIC, "guarded", ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    cluster = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                         AclOperation.ALTER, AclPermissionType.ALLOW)
    for b, f in admin.create_acls([cluster, binding]).items():
        f.result(T)
    try:
        mod = wire.module_of("metadata", 10, "request")
        asked = mod.MetadataRequest(topics=(mod.MetadataRequestTopic(name="guarded", topic_id=None),
                                            mod.MetadataRequestTopic(name="unguarded", topic_id=None)),
                                    allow_auto_topic_creation=False, include_cluster_authorized_operations=True,
                                    include_topic_authorized_operations=True)
        with wire.RawClient.to(server) as c:
            answer = c.call(asked)
        topics = {t.name: t for t in answer.topics}
        assert topics["guarded"].topic_authorized_operations == (1 << 3) | (1 << 8)
        assert topics["unguarded"].error_code == ErrorCode.topic_authorization_failed
        assert topics["unguarded"].topic_authorized_operations == NOT_COMPUTED
        assert answer.cluster_authorized_operations == (1 << 7) | (1 << 8)
    finally:
        everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                      AclPermissionType.ANY)
        admin.delete_acls([everything])[everything].result(T)


def test_a_new_cluster_id_is_a_kafka_uuid(tmp_path):
    """Kafka's cluster id is a random (version 4) Uuid written as 22 characters of URL-safe base64, as
    kafka-storage random-uuid prints one; it was 22 hex digits of one, which decode to other bytes."""
    import base64

    data = tmp_path / "data"
    with wire.serving(data) as server, wire.RawClient.to(server) as c:
        answered = c.call(wire.module_of("metadata", 12, "request").MetadataRequest(
            topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False)).cluster_id
    stored = compactlog_properties(data / "meta.properties")["cluster.id"]
    assert answered == stored and len(stored) == 22
    raw = base64.urlsafe_b64decode(stored + "==")
    assert len(raw) == 16 and uuid.UUID(bytes=raw).version == 4  # Java's UUID.randomUUID, as Kafka's Uuid


def compactlog_properties(path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line and not line.startswith("#"))
