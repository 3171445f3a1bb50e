"""Transactional producers against a real ``compactlog serve``: librdkafka (confluent-kafka) commits and
aborts, a zombie fenced by a newer instance of its transactional id, a transaction left open past its
timeout aborted by the coordinator, aiokafka's and kafkajs's transactional producers (kafka-python's is
in test_admin_kafka_python_all.py), and a SIGKILL of the server between a transaction's Prepare and its
Complete, finished by the restarted coordinator.

What is stored is read from the server's data directory through the embedded API's snapshot of another
process's partition: data batches of the transaction, then its COMMIT or ABORT marker, and what a
read_committed reader is handed (``reading.read_records``)."""

from __future__ import annotations

import asyncio
import time
from typing import NamedTuple

import pytest

import wire
from compactlog import reading
from compactlog.api import CompactLog
from compactlog.records.control import COMMIT, read_control_record
from compactlog.transactions.coordinator import TRANSACTION_STATE_TOPIC
from compactlog.transactions.load import load_partition
from compactlog.transactions.metadata import log_record
from compactlog.transactions.state import PREPARE_COMMIT

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaException, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

OVERRIDES = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
             "transaction.state.log.num.partitions": "3", "offsets.topic.num.partitions": "3"}
DEADLINE_S = 20.0


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with wire.serving(tmp_path_factory.mktemp("txn-clients") / "data", OVERRIDES) as s:
        admin = AdminClient({"bootstrap.servers": s.bootstrap})
        futures = admin.create_topics([NewTopic(name, 2, 1) for name in ("commits", "aborts", "zombies", "timeouts",
                                                                         "aio", "crash")])
        for f in futures.values():
            f.result(30)
        yield s


def producer(server, tid: str, **conf) -> Producer:
    return Producer({"bootstrap.servers": server.bootstrap, "transactional.id": tid, **conf})


def stored(server, topic: str, partition: int = 0) -> list[tuple]:
    """The batches of one partition as kept on disk: ("data", producer id, record count, transactional) or
    ("COMMIT"/"ABORT", producer id)."""
    out = []
    with reading.open_snapshot(server.data_dir, topic, partition) as snap:
        for batch in snap.batches(0):
            if batch.is_control:
                marker = read_control_record(batch)
                out.append(("COMMIT" if marker.type_id == COMMIT else "ABORT", batch.producer_id))
            else:
                out.append(("data", batch.producer_id, batch.record_count, batch.is_transactional))
    return out


def read_committed(server, topic: str, partition: int = 0) -> list[bytes]:
    """The values a read_committed consumer is handed, through the one read path (``reading``)."""
    with reading.open_snapshot(server.data_dir, topic, partition) as snap:
        return [r.value for r in reading.read_records(snap, topic, partition, 0, isolation="read_committed")]


class Described(NamedTuple):
    state: str
    producer_id: int
    producer_epoch: int
    partitions: list[tuple[str, int]]


def describe(server, tid: str) -> Described:
    """DescribeTransactions through kafka-python's admin client (another client than the producer's)."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=15_000)
    try:
        (d,) = admin.describe_transactions([tid]).values()
    finally:
        admin.close()
    return Described(str(d.state.value if hasattr(d.state, "value") else d.state), d.producer_id, d.producer_epoch,
                     sorted((tp.topic, tp.partition) for tp in d.topic_partitions))


def wait_until(check, what: str, timeout: float = DEADLINE_S):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what} did not happen in {timeout} s"
        time.sleep(0.05)


def test_librdkafka_commits_a_transaction(server):
    p = producer(server, "ck-commit")
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(3):
        p.produce("commits", key=b"k%d" % i, value=b"v", partition=0)
    p.commit_transaction(30)
    state = describe(server, "ck-commit")
    assert (state.state, state.partitions) == ("CompleteCommit", [])
    pid = state.producer_id
    batches = stored(server, "commits")
    assert batches[-1] == ("COMMIT", pid)
    assert sum(b[2] for b in batches if b[0] == "data" and b[1] == pid and b[3]) == 3
    assert read_committed(server, "commits") == [b"v"] * 3
    # the next transaction of the same producer goes on from CompleteCommit
    p.begin_transaction()
    p.produce("commits", key=b"again", value=b"v", partition=0)
    p.commit_transaction(30)
    assert stored(server, "commits")[-1] == ("COMMIT", pid)
    assert [b[0] for b in stored(server, "commits")].count("COMMIT") == 2


def test_librdkafka_aborts_a_transaction(server):
    p = producer(server, "ck-abort")
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("aborts", key=b"gone", value=b"v", partition=1)
    p.flush(30)
    assert read_committed(server, "aborts", 1) == []  # held back by the open transaction (the LSO)
    assert describe(server, "ck-abort")[::3] == ("Ongoing", [("aborts", 1)])
    p.abort_transaction(30)
    state = describe(server, "ck-abort")
    assert state.state == "CompleteAbort"
    assert stored(server, "aborts", 1) == [("data", state.producer_id, 1, True), ("ABORT", state.producer_id)]
    assert read_committed(server, "aborts", 1) == []  # aborted: never handed out


def test_a_zombie_is_fenced_by_a_newer_instance(server):
    zombie = producer(server, "ck-zombie")
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce("zombies", key=b"z", value=b"old", partition=0)
    zombie.flush(30)
    old = describe(server, "ck-zombie")
    newer = producer(server, "ck-zombie")
    newer.init_transactions(30)  # aborts the zombie's transaction (retrying through CONCURRENT_TRANSACTIONS)
    state = describe(server, "ck-zombie")
    assert (state.producer_id, state.producer_epoch) == (old.producer_id, old.producer_epoch + 2)
    assert stored(server, "zombies") == [("data", old.producer_id, 1, True), ("ABORT", old.producer_id)]
    with pytest.raises(KafkaException) as fenced:
        zombie.produce("zombies", key=b"z", value=b"again", partition=0)
        zombie.commit_transaction(30)
    assert fenced.value.args[0].fatal(), fenced.value  # PRODUCER_FENCED is fatal to the old instance
    newer.begin_transaction()
    newer.produce("zombies", key=b"n", value=b"new", partition=0)
    newer.commit_transaction(30)
    assert stored(server, "zombies")[-1] == ("COMMIT", old.producer_id)
    assert read_committed(server, "zombies") == [b"new"]


def test_a_transaction_open_past_its_timeout_is_aborted_by_the_coordinator(server):
    p = producer(server, "ck-timeout", **{"transaction.timeout.ms": 1500, "message.timeout.ms": 1500})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("timeouts", key=b"late", value=b"v", partition=0)
    p.flush(30)
    before = describe(server, "ck-timeout")
    assert before.state == "Ongoing"
    after = wait_until(lambda: (s := describe(server, "ck-timeout")).state == "CompleteAbort" and s,
                       "the coordinator's abort")
    assert after.producer_epoch == before.producer_epoch + 1  # bumped: the producer that left it is fenced
    assert stored(server, "timeouts") == [("data", before.producer_id, 1, True), ("ABORT", before.producer_id)]
    assert read_committed(server, "timeouts") == []
    with pytest.raises(KafkaException):
        p.commit_transaction(30)


def test_aiokafka_commits_a_transaction(server):
    aiokafka = pytest.importorskip("aiokafka")

    async def main() -> None:
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=server.bootstrap, transactional_id="aio-txn")
        await p.start()
        try:
            async with p.transaction():
                await p.send_and_wait("aio", b"v", key=b"k", partition=0)
        finally:
            await p.stop()
    asyncio.run(asyncio.wait_for(main(), 60))
    state = describe(server, "aio-txn")
    assert state.state == "CompleteCommit"
    assert stored(server, "aio") == [("data", state.producer_id, 1, True), ("COMMIT", state.producer_id)]


def test_a_sigkill_between_prepare_and_complete_is_completed_at_restart(server):
    """The server dies after storing PrepareCommit and before any marker: the restarted coordinator
    reads the Prepare from ``__transaction_state``, writes the markers and stores CompleteCommit."""
    p = producer(server, "ck-crash")
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("crash", key=b"k", value=b"v", partition=0)
    p.produce("crash", key=b"k", value=b"v", partition=1)
    p.flush(30)
    assert describe(server, "ck-crash").state == "Ongoing"
    server.kill()
    assert read_committed(server, "crash", 0) == []  # the open transaction holds the LSO, on disk too
    # What the coordinator writes first when EndTxn(commit) comes: PrepareCommit (the crash falls after it)
    cl = CompactLog(server.data_dir, background=False)
    try:
        for partition in range(cl.partitions_for(TRANSACTION_STATE_TOPIC)):
            meta = load_partition(cl, partition, 0).transactions.get("ck-crash")
            if meta is not None:
                key, value = log_record(meta.moved(PREPARE_COMMIT, last_update_timestamp=int(time.time() * 1000)))
                cl.produce(TRANSACTION_STATE_TOPIC, value, key, partition=partition)
                break
        else:
            raise AssertionError("ck-crash is not in __transaction_state")
    finally:
        cl.close()
    server.restart()
    state = wait_until(lambda: (s := describe(server, "ck-crash")).state == "CompleteCommit" and s,
                       "the completion at load")
    for partition in (0, 1):
        assert stored(server, "crash", partition) == [("data", state.producer_id, 1, True),
                                                      ("COMMIT", state.producer_id)]
        assert read_committed(server, "crash", partition) == [b"v"]
    # the producer's EndTxn after the restart meets its transaction already committed: Kafka answers it
    # as a retry (NONE), and the producer goes on with a new transaction on the restarted server
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce("crash", key=b"k2", value=b"v", partition=0)
    p.commit_transaction(30)
    assert stored(server, "crash")[-1] == ("COMMIT", state.producer_id)


def test_kafkajs_commits_and_aborts(server):
    from kafkajs_support import run_node

    run_node("""
        const kafka = new kafkajs.Kafka({ brokers: [ARGS.bootstrap], logLevel: kafkajs.logLevel.NOTHING });
        const producer = kafka.producer({ transactionalId: 'js-txn', idempotent: true, maxInFlightRequests: 1 });
        await producer.connect();
        const commit = await producer.transaction();
        await commit.send({ topic: 'aio', messages: [{ key: 'js', value: 'kept', partition: 1 }] });
        await commit.commit();
        const abort = await producer.transaction();
        await abort.send({ topic: 'aio', messages: [{ key: 'js', value: 'gone', partition: 1 }] });
        await abort.abort();
        await producer.disconnect();
    """, {"bootstrap": server.bootstrap})
    state = describe(server, "js-txn")
    assert state.state == "CompleteAbort"
    pid = state.producer_id
    assert stored(server, "aio", 1) == [("data", pid, 1, True), ("COMMIT", pid), ("data", pid, 1, True),
                                        ("ABORT", pid)]
    assert read_committed(server, "aio", 1) == [b"kept"]


def test_an_open_transaction_goes_on_across_a_clean_restart(server):
    """The Ongoing state (its partitions, its start) is in ``__transaction_state``: after a SIGTERM and a
    restart the producer adds to the same transaction and commits it."""
    p = producer(server, "ck-restart")
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("crash", key=b"before", value=b"before", partition=1)
    p.flush(30)
    server.restart()
    assert describe(server, "ck-restart")[::3] == ("Ongoing", [("crash", 1)])
    p.produce("crash", key=b"after", value=b"after", partition=1)
    p.commit_transaction(30)
    assert describe(server, "ck-restart").state == "CompleteCommit"
    assert read_committed(server, "crash", 1)[-2:] == [b"before", b"after"]
