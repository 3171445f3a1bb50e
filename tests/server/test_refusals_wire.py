"""What the broker answers to what it refuses, through real clients and raw requests on one server.

* Records: Produce names each refused record in ``record_errors`` (its index in the batch and why) and
  says in ``error_message`` what Kafka's broker says, so a client that reads them (kafka-python 3) tells
  the producer which record was at fault.
* Copies: an acks=all write to a topic whose ``min.insync.replicas`` is above 1 is refused with
  NOT_ENOUGH_REPLICAS and nothing is written (one node is one in-sync replica), as Kafka's leader refuses it.
* Long values: a 5,000-character name or value is repeated by its head and length in the error message.
* Partition counts: ``max.broker.partitions`` bounds CreateTopics and CreatePartitions (raw requests up to
  Kafka's int32, a real client within its own bound) and the console's forms, with Kafka's
  POLICY_VIOLATION, before any directory is made.
"""

from __future__ import annotations

import datetime
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from http.cookiejar import CookieJar

import pytest
import wire

import compactlog
from compactlog.records.batch import build_batch

T = 15  # seconds any one client call may take
LONG = "x" * 5000
KEYLESS = "Compacted topic cannot accept message without key in topic partition compacted-0"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    data = tmp_path_factory.mktemp("refused") / "data"
    with compactlog.open(data) as cl:
        cl.create_topic("compacted", 1, {"cleanup.policy": "compact"})
        cl.create_topic("recent", 1, {"message.timestamp.before.max.ms": "60000"})
        cl.create_topic("grow", 1)
        cl.create_topic("two-copies", 1, {"min.insync.replicas": "2"})
    with wire.serving(data, {"http.listeners": "http://127.0.0.1:0"}) as s:
        yield s


def partition_answer(server, topic: str, batch: bytes, version: int):
    with wire.RawClient.to(server) as c:
        return c.call(wire.produce(topic, 0, batch, version=version)).responses[0].partition_responses[0]


def test_keyless_records_on_a_compacted_topic_are_named_one_by_one(server):
    now = int(time.time() * 1000)
    batch = build_batch([b"k", None, b"k2", None, None, None], [b"v"] * 6, [now] * 6)
    part = partition_answer(server, "compacted", batch, 8)
    assert part.error_code == 87  # INVALID_RECORD
    assert [(e.batch_index, e.batch_index_error_message) for e in part.record_errors] == [
        (1, KEYLESS), (3, KEYLESS), (4, KEYLESS), (5, KEYLESS)]
    assert part.error_message == (
        "One or more records have been rejected due to 4 record errors in total, and only showing the first three "
        f"errors at most: [RecordError(batchIndex=1, message='{KEYLESS}'), RecordError(batchIndex=3, message="
        f"'{KEYLESS}'), RecordError(batchIndex=4, message='{KEYLESS}')]")
    assert part.log_start_offset == 0  # Kafka answers the log start with refused records
    assert part.base_offset == -1


def test_timestamps_out_of_the_window_are_named_one_by_one(server):
    now = int(time.time() * 1000)
    batch = build_batch([b"a", b"b", b"c"], [b"v"] * 3, [now, 1000, now])
    part = partition_answer(server, "recent", batch, 9)
    assert part.error_code == 32  # INVALID_TIMESTAMP
    assert part.error_message == "One or more records have been rejected due to invalid timestamp"
    [error] = part.record_errors
    assert error.batch_index == 1
    assert error.batch_index_error_message.startswith("Timestamp 1000 of message with offset 1 is out of range. "
                                                      "The timestamp should be within [")


def test_versions_before_8_answer_the_code_alone(server):
    part = partition_answer(server, "compacted", build_batch([None], [b"v"], [int(time.time() * 1000)]), 7)
    assert part.error_code == 87
    assert not hasattr(part, "record_errors") and not hasattr(part, "error_message")  # v8 added both


def test_kafka_python_tells_the_producer_which_record_was_keyless(server):
    kafka = pytest.importorskip("kafka")
    producer = kafka.KafkaProducer(bootstrap_servers=server.bootstrap, linger_ms=5000, retries=0)  # one batch: flush() sends it
    try:
        keyed = producer.send("compacted", key=b"k", value=b"v", partition=0)
        keyless = producer.send("compacted", value=b"no key", partition=0)
        producer.flush(T)
        with pytest.raises(kafka.errors.InvalidRecordError, match=KEYLESS):
            keyless.get(T)
        with pytest.raises(kafka.errors.KafkaError, match="part of a batch"):
            keyed.get(T)  # the keyed record was refused with its batch, and told why
    finally:
        producer.close(T)


def test_acks_all_is_refused_where_the_topic_asks_for_more_copies_than_one_node_holds(server):
    now = int(time.time() * 1000)
    with wire.RawClient.to(server) as c:
        refused = c.call(wire.produce("two-copies", 0, build_batch([b"k"], [b"v"], [now]), version=9, acks=-1))
        [part] = refused.responses[0].partition_responses
        assert part.error_code == 19  # NOT_ENOUGH_REPLICAS
        assert part.error_message == ("The size of the current ISR : 1 is insufficient to satisfy the min.isr requirement "
                                      "of 2 for partition two-copies-0, live replica(s) broker.id are : [1]")
        taken = c.call(wire.produce("two-copies", 0, build_batch([b"k"], [b"v1"], [now]), version=9, acks=1))
        [part] = taken.responses[0].partition_responses
        assert (part.error_code, part.base_offset) == (0, 0)  # the refused write left nothing behind


def test_kafka_python_producer_with_acks_all_is_told_not_enough_replicas(server):
    kafka = pytest.importorskip("kafka")
    producer = kafka.KafkaProducer(bootstrap_servers=server.bootstrap, acks="all", retries=0)
    try:
        with pytest.raises(kafka.errors.NotEnoughReplicasError):
            producer.send("two-copies", key=b"k", value=b"v", partition=0).get(T)
    finally:
        producer.close(T)


def admin_error(future):
    from confluent_kafka import KafkaException

    with pytest.raises(KafkaException) as info:
        future.result(T)
    return info.value.args[0]


@pytest.fixture(scope="module")
def admin(server):
    admin_module = pytest.importorskip("confluent_kafka.admin")
    return admin_module.AdminClient({"bootstrap.servers": server.bootstrap})


LONG_VALUE_CASES = {
    "config name": (lambda a, m: a.create_topics([m.NewTopic("u1", 1, 1, config={LONG: "1"})])["u1"],
                    40, "Unknown topic config name: xxx"),
    "config value": (lambda a, m: a.create_topics([m.NewTopic("u2", 1, 1, config={"segment.ms": "9" * 5000})])["u2"],
                     40, "for configuration segment.ms: Not a number of type LONG"),
    "compression": (lambda a, m: a.create_topics([m.NewTopic("u3", 1, 1, config={"compression.type": LONG})])["u3"],
                    40, "for configuration compression.type"),
    "topic name": (lambda a, m: a.create_topics([m.NewTopic(LONG, 1, 1)])[LONG], 17, "Topic name is illegal"),
    "missing topic": (lambda a, m: a.create_partitions([m.NewPartitions(LONG, 3)])[LONG], 3, "Topic 'xxx"),
    "missing topic's configs": (lambda a, m: a.describe_configs([r := m.ConfigResource(m.ResourceType.TOPIC, LONG)])[r],
                                3, "Topic 'xxx"),
}


@pytest.mark.parametrize("case", list(LONG_VALUE_CASES))
def test_a_long_value_is_shown_by_its_head_and_length_in_the_brokers_answer(admin, case):
    import confluent_kafka.admin as m

    call, code, words = LONG_VALUE_CASES[case]
    err = admin_error(call(admin, m))
    assert err.code() == code, err
    assert words in err.str() and "(5000 characters)" in err.str(), err.str()[:400]
    assert len(err.str()) < 300


@pytest.mark.parametrize("records", [None, b"not a batch"], ids=["no-batch", "bad-batch"])
def test_a_produce_to_a_long_topic_name_is_answered_briefly(server, records):
    part = partition_answer(server, LONG, records if records is not None else build_batch([b"k"], [b"v"], [0]), 9)
    assert part.error_code in (3, 87)  # UNKNOWN_TOPIC_OR_PARTITION, or INVALID_RECORD for the bytes
    assert "(5000 characters)" in part.error_message and len(part.error_message) < 300, part.error_message[:400]


# max.broker.partitions ---------------------------------------------------------------------------------

INT32_MAX = 2**31 - 1


def directories(server) -> list[str]:
    return sorted(p.name for p in server.data_dir.iterdir())


def create_topics(name: str, count: int, validate_only: bool = False):
    mod = wire.module_of("create_topics", 7, "request")
    return mod.CreateTopicsRequest(topics=(mod.CreatableTopic(name=name, num_partitions=count, replication_factor=-1,
                                                              assignments=(), configs=()),),
                                   timeout=datetime.timedelta(seconds=T), validate_only=validate_only)


def create_partitions(name: str, count: int, validate_only: bool = False):
    mod = wire.module_of("create_partitions", 3, "request")
    return mod.CreatePartitionsRequest(topics=(mod.CreatePartitionsTopic(name=name, count=count, assignments=None),),
                                       timeout=datetime.timedelta(seconds=T), validate_only=validate_only)


@pytest.mark.parametrize("count", [10_001, INT32_MAX])
@pytest.mark.parametrize("validate_only", [False, True])
def test_raw_requests_for_too_many_partitions_are_refused_at_once(server, count, validate_only):
    before = directories(server)
    started = time.monotonic()
    with wire.RawClient.to(server) as c:
        [made] = c.call(create_topics("huge", count, validate_only)).topics
        [grown] = c.call(create_partitions("grow", count, validate_only)).results
    assert time.monotonic() - started < 2
    assert (made.error_code, grown.error_code) == (44, 44)  # POLICY_VIOLATION
    assert made.error_message.startswith(f"Cannot create topic 'huge' with {count} partitions: ")
    assert grown.error_message.startswith(f"Cannot grow topic 'grow' to {count} partitions: ")
    assert "max.broker.partitions is 10000" in made.error_message
    assert directories(server) == before


def test_a_real_client_gets_the_same_refusal(admin):
    import confluent_kafka.admin as m
    from confluent_kafka import KafkaError

    for future in (admin.create_topics([m.NewTopic("huge", 100_000, 1)])["huge"],
                   admin.create_partitions([m.NewPartitions("grow", 100_000)])["grow"]):
        err = admin_error(future)
        assert err.code() == KafkaError.POLICY_VIOLATION and "max.broker.partitions" in err.str()


class ConsoleClient:
    """The console as a browser speaks to it: a cookie jar, the CSRF token, redirects not followed."""

    class _NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    def __init__(self, base: str) -> None:
        self.base = base
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()), self._NoRedirect)
        self.csrf = re.search(r'"X-CSRF-Token": "([^"]+)"', self.post("/", None)[1]).group(1)

    def post(self, path: str, fields: dict[str, str] | None) -> tuple[int, str]:
        """POST ``fields`` with the CSRF token (a GET when ``fields`` is None); (status, page)."""
        data = None if fields is None else urllib.parse.urlencode({**fields, "csrf": self.csrf}).encode()
        try:
            with self.opener.open(urllib.request.Request(self.base + path, data=data), timeout=T) as r:
                return r.status, r.read().decode(errors="replace")
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(errors="replace")


@pytest.mark.parametrize("path, fields, says", [
    ("/topics", {"name": "huge", "partitions": str(INT32_MAX)}, f"Cannot create topic &#39;huge&#39; with {INT32_MAX}"),
    ("/topics/grow/partitions", {"count": str(INT32_MAX)}, f"Cannot grow topic &#39;grow&#39; to {INT32_MAX}"),
])
def test_the_consoles_forms_get_the_same_refusal(server, path, fields, says):
    before = directories(server)
    status, text = ConsoleClient(server.console_url).post(path, fields)
    assert status == 400, re.sub(r"\s+", " ", text)[-400:]
    assert says in text and "max.broker.partitions is 10000" in text
    assert directories(server) == before


@pytest.mark.parametrize("path, fields, says", [
    ("/topics", {"name": LONG}, "Topic name is illegal"),
    ("/topics", {"name": "u", "configs": f"{LONG}=1"}, "Unknown topic config name: xxx"),
    ("/topics", {"name": "u", "configs": "retention.ms=" + "9" * 5000}, "for configuration retention.ms"),
    ("/topics/grow/config", {"name": LONG, "value": "1", "action": "set"}, "Unknown topic config name: xxx"),
])
def test_the_consoles_forms_show_a_long_value_briefly(server, path, fields, says):
    status, text = ConsoleClient(server.console_url).post(path, fields)
    assert status == 400, re.sub(r"\s+", " ", text)[-400:]
    message = re.search(r'class="error"[^>]*>(.*?)</', text, re.S)
    assert message, re.sub(r"\s+", " ", text)[-400:]
    assert says in message.group(1) and "(5000 characters)" in message.group(1), message.group(1)[:400]
    assert len(message.group(1)) < 300
