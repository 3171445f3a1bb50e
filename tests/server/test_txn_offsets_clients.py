"""Offsets in transactions with real clients against a real ``compactlog serve``: each client's
``send_offsets_to_transaction`` (confluent-kafka and kafka-python send TxnOffsetCommit v3 with the
consumer's group metadata, aiokafka v0 with the group id alone), the offsets invisible until the
commit and gone at an abort, consumers asking for stable offsets (librdkafka and kafka-python do with
``isolation.level=read_committed``) held back while they are pending, KIP-447's fencing of a producer
with a stale generation, and a restart (SIGKILL) replaying pending, committed and aborted offsets.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from child_lines import ChildLines
from wire import RawClient, module_of, serving

OVERRIDES = {"listeners": "PLAINTEXT://127.0.0.1:0", "group.initial.rebalance.delay.ms": "0",
             "offsets.topic.num.partitions": "3", "transaction.state.log.num.partitions": "3"}
TIMEOUT = 30.0
COORDINATOR_LOAD_IN_PROGRESS, UNSTABLE_OFFSET_COMMIT = 14, 88


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with serving(tmp_path_factory.mktemp("txn-offsets") / "data", OVERRIDES) as s:
        admin = AdminClient({"bootstrap.servers": s.bootstrap})
        for f in admin.create_topics([NewTopic("in", 2), NewTopic("out", 1)]).values():
            f.result(TIMEOUT)
        yield s


def stored(server, group: str, partition: int = 0, require_stable: bool = False, topic: str = "in") -> tuple[int, int]:
    """(committed offset, error) of ``topic``-``partition`` by OffsetFetch v7, with or without require_stable."""
    req = module_of("offset_fetch", 7, "request")
    body = req.OffsetFetchRequest(group_id=group, require_stable=require_stable, topics=(
        req.OffsetFetchRequestTopic(name=topic, partition_indexes=(partition,)),))
    deadline = time.monotonic() + TIMEOUT
    with RawClient.to(server) as c:
        while (answer := c.call(body)).error_code == COORDINATOR_LOAD_IN_PROGRESS:  # just restarted
            assert time.monotonic() < deadline, "__consumer_offsets was not loaded in time"
            time.sleep(0.05)
    assert answer.error_code == 0, answer
    p = answer.topics[0].partitions[0]
    return p.committed_offset, p.error_code


def settled(server, group: str, partition: int = 0, topic: str = "in") -> int:
    """The committed offset once no transaction's offset of the partition is pending: EndTxn may answer
    before its markers are written (Kafka's answers once its PrepareCommit is), so a client asking for
    stable offsets right after a commit can be told to retry."""
    deadline = time.monotonic() + TIMEOUT
    while (found := stored(server, group, partition, True, topic))[1] == UNSTABLE_OFFSET_COMMIT:
        assert time.monotonic() < deadline, f"an offset of {group} stayed pending"
        time.sleep(0.05)
    assert found[1] == 0, found
    return found[0]


def transactional(server, tid: str) -> Producer:
    p = Producer({"bootstrap.servers": server.bootstrap, "transactional.id": tid})
    p.init_transactions(TIMEOUT)
    p.begin_transaction()
    p.produce("out", b"x")
    return p


def metadata_of(server, group: str):
    """A group's metadata as a producer outside the group sends it (generation -1, no member)."""
    c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": group})
    try:
        return c.consumer_group_metadata()
    finally:
        c.close()


def committed_by_librdkafka(server, group: str, isolation: str, timeout: float = 5.0) -> int:
    c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": group, "isolation.level": isolation})
    try:
        return c.committed([TopicPartition("in", 0)], timeout=timeout)[0].offset
    finally:
        c.close()


def test_confluent_offsets_appear_at_the_commit_and_never_after_an_abort(server):
    p = transactional(server, "tx-confluent")
    p.send_offsets_to_transaction([TopicPartition("in", 0, 5)], metadata_of(server, "cg"), TIMEOUT)
    # pending: invisible, and unstable for a client that asks for stable offsets
    assert stored(server, "cg") == (-1, 0)
    assert stored(server, "cg", require_stable=True) == (-1, 88)
    assert committed_by_librdkafka(server, "cg", "read_uncommitted") == -1001  # librdkafka's "no offset"
    start = time.monotonic()
    with pytest.raises(KafkaException) as raised:  # read_committed asks for stable offsets and keeps retrying
        committed_by_librdkafka(server, "cg", "read_committed", timeout=1.5)
    assert raised.value.args[0].name() == "_TIMED_OUT" and time.monotonic() - start >= 1.4
    p.commit_transaction(TIMEOUT)
    assert settled(server, "cg") == 5
    assert committed_by_librdkafka(server, "cg", "read_committed") == 5

    p.begin_transaction()
    p.produce("out", b"y")
    p.send_offsets_to_transaction([TopicPartition("in", 0, 9)], metadata_of(server, "cg"), TIMEOUT)
    assert stored(server, "cg", require_stable=True) == (-1, 88)
    p.abort_transaction(TIMEOUT)
    assert settled(server, "cg") == 5


def test_kafka_python_and_aiokafka_send_offsets_to_transaction(server):
    import aiokafka
    import kafka
    from kafka.errors import KafkaTimeoutError
    from kafka.structs import OffsetAndMetadata

    p = kafka.KafkaProducer(bootstrap_servers=server.bootstrap, transactional_id="tx-kafka-python")
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send("out", b"x")
        p.send_offsets_to_transaction({kafka.TopicPartition("in", 0): OffsetAndMetadata(7, "", -1)}, "kp")
        stable = kafka.KafkaConsumer(bootstrap_servers=server.bootstrap, group_id="kp", isolation_level="read_committed")
        loose = kafka.KafkaConsumer(bootstrap_servers=server.bootstrap, group_id="kp")
        try:
            with pytest.raises(KafkaTimeoutError):  # UNSTABLE_OFFSET_COMMIT is retriable: it retries until then
                stable.committed(kafka.TopicPartition("in", 0), timeout_ms=1500)
            assert loose.committed(kafka.TopicPartition("in", 0)) is None
            p.commit_transaction()
            assert stable.committed(kafka.TopicPartition("in", 0), timeout_ms=10_000) == 7
        finally:
            stable.close()
            loose.close()
    finally:
        p.close()

    async def aio() -> None:  # TxnOffsetCommit v0: the group id alone
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=server.bootstrap, transactional_id="tx-aiokafka")
        await producer.start()
        try:
            async with producer.transaction():
                await producer.send("out", b"y")
                await producer.send_offsets_to_transaction({aiokafka.TopicPartition("in", 1): 9}, "ai")
                assert stored(server, "ai", 1, require_stable=True) == (-1, 88)
            with pytest.raises(RuntimeError):
                async with producer.transaction():
                    await producer.send_offsets_to_transaction({aiokafka.TopicPartition("in", 1): 11}, "ai")
                    raise RuntimeError("abort it")
        finally:
            await producer.stop()
    asyncio.run(asyncio.wait_for(aio(), TIMEOUT))
    assert settled(server, "ai", 1) == 9


def test_kafkajs_send_offsets(server):
    """kafkajs's ``sendOffsets``: its admin client (OffsetFetch without require_stable) sees nothing while
    the transaction is open, the offset once it commits, and the committed one after an abort."""
    from kafkajs_support import run_node

    seen = run_node("""
        const kafka = new kafkajs.Kafka({ brokers: [ARGS.bootstrap], logLevel: kafkajs.logLevel.NOTHING });
        const admin = kafka.admin();
        await admin.connect();
        const fetched = async () => (await admin.fetchOffsets({ groupId: 'js', topics: ['in'] }))[0]
          .partitions.find((p) => p.partition === 0).offset;
        const producer = kafka.producer({ transactionalId: 'tx-kafkajs', idempotent: true, maxInFlightRequests: 1 });
        await producer.connect();
        const seen = [];
        for (const [offset, end] of [['12', 'commit'], ['15', 'abort']]) {
          const t = await producer.transaction();
          await t.send({ topic: 'out', messages: [{ value: end }] });
          await t.sendOffsets({ consumerGroupId: 'js', topics: [{ topic: 'in', partitions: [{ partition: 0, offset }] }] });
          const before = await fetched();
          seen.push(before);
          await (end === 'commit' ? t.commit() : t.abort());
          // EndTxn may answer before its markers are written: a commit shows once they are
          for (let i = 0; end === 'commit' && i < 100 && (await fetched()) === before; i++) {
            await new Promise((r) => setTimeout(r, 50));
          }
          seen.push(await fetched());
        }
        await producer.disconnect();
        await admin.disconnect();
        return seen;
    """, {"bootstrap": server.bootstrap})
    assert seen == ["-1", "12", "12", "12"]
    assert settled(server, "js") == 12

def test_a_producer_with_a_stale_generation_is_fenced(server):
    """KIP-447: the offsets of a consumer that has since lost a rebalance are refused (ILLEGAL_GENERATION),
    and the transaction must be aborted."""
    first = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "fg", "enable.auto.commit": False})
    second = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "fg", "enable.auto.commit": False})
    try:
        first.subscribe(["in"])
        deadline = time.monotonic() + TIMEOUT
        while len(first.assignment()) != 2:
            assert time.monotonic() < deadline, "the first consumer got no assignment"
            first.poll(0.1)
        stale = first.consumer_group_metadata()
        second.subscribe(["in"])
        while not (len(first.assignment()) == len(second.assignment()) == 1):
            assert time.monotonic() < deadline, "the group did not rebalance"
            first.poll(0.1)
            second.poll(0.1)
        p = transactional(server, "tx-fenced")
        with pytest.raises(KafkaException) as raised:
            p.send_offsets_to_transaction([TopicPartition("in", 0, 3)], stale, TIMEOUT)
        error = raised.value.args[0]
        assert (error.name(), error.txn_requires_abort()) == ("ILLEGAL_GENERATION", True)
        p.abort_transaction(TIMEOUT)
        # the current generation's metadata is accepted
        p.begin_transaction()
        p.send_offsets_to_transaction([TopicPartition("in", 0, 3)], first.consumer_group_metadata(), TIMEOUT)
        p.commit_transaction(TIMEOUT)
        assert settled(server, "fg") == 3
    finally:
        first.close()
        second.close()


WORKER = """
import sys, time
from confluent_kafka import Consumer, Producer, TopicPartition

bootstrap, total, pause_at, pause_where = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "eos-worker", "linger.ms": 5})
producer.init_transactions(30)  # fences the killed instance and aborts what it left open
consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos", "group.instance.id": "eos-1",
                     "isolation.level": "read_committed", "enable.auto.commit": False,
                     "auto.offset.reset": "earliest"})
consumer.subscribe(["eos-in"])
transactions = 0


def pause(where):
    if pause_where == where and transactions == pause_at:
        print("paused", flush=True)
        time.sleep(120)


while True:
    records = [m for m in consumer.consume(10, 0.5) if not m.error()]
    assignment = consumer.assignment()
    if not records:
        # position() is unset until a record is consumed: an instance started after an earlier one
        # committed the last input has only the group's committed offset to go by
        if assignment and max(consumer.position(assignment)[0].offset,
                              consumer.committed(assignment, 30)[0].offset) >= total:
            break
        continue
    producer.begin_transaction()
    for m in records:
        producer.produce("eos-out", key=m.key(), value=m.value() + b"!")
    transactions += 1
    pause("produced")
    producer.send_offsets_to_transaction(consumer.position(assignment), consumer.consumer_group_metadata(), 30)
    pause("offsets")
    producer.commit_transaction(30)
    print("committed", consumer.position(assignment)[0].offset, flush=True)
consumer.close()
print("done", flush=True)
"""


def test_a_consume_transform_produce_loop_killed_at_any_point_outputs_each_input_once(server, tmp_path):
    """The loop reads ``eos-in`` and writes ``eos-out`` in transactions that carry its consumed offsets.
    It is SIGKILLed after writing a transaction's records, after its TxnOffsetCommit (before EndTxn), and
    at a random moment, and started again each time (the same transactional id fences the killed one,
    its static group membership takes the old place at once); a read_committed reader of ``eos-out``
    then finds every input exactly once."""
    import random
    import subprocess
    import sys

    total = 300
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    for f in admin.create_topics([NewTopic("eos-in", 1), NewTopic("eos-out", 1)]).values():
        f.result(TIMEOUT)
    feed = Producer({"bootstrap.servers": server.bootstrap})
    for i in range(total):
        feed.produce("eos-in", key=str(i).encode(), value=str(i).encode())
    feed.flush(TIMEOUT)
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    rng = random.Random(447)

    def worker(pause_at: int = 0, where: str = "-") -> tuple[subprocess.Popen, ChildLines]:
        proc = subprocess.Popen([sys.executable, str(script), server.bootstrap, str(total), str(pause_at), where],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        return proc, ChildLines(proc)

    for pause_at, where in ((3, "produced"), (2, "offsets"), (0, "-")):
        proc, lines = worker(pause_at, where)
        try:
            if where == "-":
                lines.wait_for("committed", TIMEOUT)
                time.sleep(rng.uniform(0, 0.2))  # anywhere in the loop: the outcome may not depend on it
            else:
                lines.wait_for("paused", TIMEOUT)
        finally:
            proc.kill()
            proc.wait()
            lines.close(TIMEOUT)
    proc, lines = worker()
    try:
        lines.wait_for("done", TIMEOUT)
        assert proc.wait(TIMEOUT) == 0
    finally:
        proc.kill()
        proc.wait()
        lines.close(TIMEOUT)
    assert settled(server, "eos", topic="eos-in") == total

    reader = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "eos-reader",
                       "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                       "enable.auto.commit": False})
    try:
        out = TopicPartition("eos-out", 0)
        end = reader.get_watermark_offsets(out, timeout=TIMEOUT, cached=False)[1]
        reader.assign([out])
        seen: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT
        while reader.position([out])[0].offset < end:
            assert time.monotonic() < deadline, "eos-out was not read to its end in time"
            seen += [m.value() for m in reader.consume(100, 0.5) if not m.error()]
    finally:
        reader.close()
    assert sorted(seen, key=lambda v: int(v[:-1])) == [f"{i}!".encode() for i in range(total)]

def test_a_killed_server_replays_pending_committed_and_aborted_offsets(server):
    """Last in the module: it restarts the server. An open transaction's offsets stay pending across the
    restart and its producer commits them afterwards."""
    plain = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "r-aborted"})
    plain.commit(offsets=[TopicPartition("in", 0, 2)], asynchronous=False)
    plain.close()
    committed = transactional(server, "tx-r-committed")
    committed.send_offsets_to_transaction([TopicPartition("in", 0, 4)], metadata_of(server, "r-committed"), TIMEOUT)
    committed.commit_transaction(TIMEOUT)
    aborted = transactional(server, "tx-r-aborted")
    aborted.send_offsets_to_transaction([TopicPartition("in", 0, 6)], metadata_of(server, "r-aborted"), TIMEOUT)
    aborted.abort_transaction(TIMEOUT)
    pending = transactional(server, "tx-r-pending")
    pending.send_offsets_to_transaction([TopicPartition("in", 0, 3)], metadata_of(server, "r-pending"), TIMEOUT)

    server.restart(kill=True)
    assert stored(server, "r-pending") == (-1, 0)
    assert stored(server, "r-pending", require_stable=True) == (-1, 88)
    assert settled(server, "r-committed") == 4
    assert settled(server, "r-aborted") == 2
    pending.commit_transaction(TIMEOUT)  # the producer reconnects to the restarted server
    assert settled(server, "r-pending") == 3
