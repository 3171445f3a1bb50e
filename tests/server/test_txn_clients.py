"""The exactly-once client matrix against one real ``compactlog serve``: the transactional producers of
confluent-kafka (librdkafka), kafka-python, aiokafka and kafkajs write into one topic, their transactions
open at the same time and ended by commit or abort in turn, and the read_committed consumer of every one
of those clients reads the topic back: each committed record once, in its partition's order, and no
record of an aborted transaction. A read_uncommitted consumer sees the aborted records too (they are in
the log, so the consumers above had something to leave out).

Fencing of a zombie by a newer instance of its transactional id, and a transaction left open past its
timeout aborted by the coordinator, for kafka-python, aiokafka and kafkajs, each meeting its own fenced
error (librdkafka's are in test_transactions_clients.py).

Record values name their producer, transaction and fate (``<client>-t<n>-commit-<i>``); a plain
(non-transactional) ``end`` record in each partition, written last, tells a reader it has read it all.
"""

from __future__ import annotations

import asyncio
import time

import pytest

import wire
from compactlog import reading

confluent_kafka = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")
aiokafka = pytest.importorskip("aiokafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

OVERRIDES = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
             "transaction.state.log.num.partitions": "3", "offsets.topic.num.partitions": "3"}
TOPIC = "matrix"
FENCE_TOPICS = ("fence-kp", "fence-aio", "fence-js", "timeout-kp", "timeout-aio", "timeout-js")
T = 30.0
END = "end"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with wire.serving(tmp_path_factory.mktemp("txn-matrix") / "data", OVERRIDES) as s:
        admin = AdminClient({"bootstrap.servers": s.bootstrap})
        for f in admin.create_topics([NewTopic(name, 2, 1) for name in (TOPIC, *FENCE_TOPICS)]).values():
            f.result(T)
        yield s


def value(client: str, txn: int, fate: str, i: int) -> str:
    return f"{client}-t{txn}-{fate}-{i}"


def write_ends(server, topic: str) -> None:
    """The plain ``end`` record in each partition, after everything else."""
    p = Producer({"bootstrap.servers": server.bootstrap})
    for partition in (0, 1):
        p.produce(topic, END.encode(), b"end", partition=partition)
    assert p.flush(T) == 0


def write_matrix(server) -> None:
    """Three Python clients' transactions open at once, interleaved in both partitions, then ended in turn;
    a second transaction of each with the other fate; then kafkajs commits, aborts and commits."""
    ck = Producer({"bootstrap.servers": server.bootstrap, "transactional.id": "m-confluent", "linger.ms": 0})
    kp = kafka.KafkaProducer(bootstrap_servers=server.bootstrap, transactional_id="m-kafka-python", linger_ms=0)

    def ck_send(txn: int, fate: str, n: int) -> None:
        for i in range(n):
            ck.produce(TOPIC, value("ck", txn, fate, i).encode(), b"ck%d" % i, partition=i % 2)
        assert ck.flush(T) == 0

    def kp_send(txn: int, fate: str, n: int) -> None:
        for i in range(n):
            kp.send(TOPIC, value("kp", txn, fate, i).encode(), key=b"kp%d" % i, partition=i % 2)
        kp.flush(T)

    async def main() -> None:
        aio = aiokafka.AIOKafkaProducer(bootstrap_servers=server.bootstrap, transactional_id="m-aiokafka")
        await aio.start()

        async def aio_send(txn: int, fate: str, n: int) -> None:
            for i in range(n):
                await aio.send_and_wait(TOPIC, value("aio", txn, fate, i).encode(), key=b"aio%d" % i, partition=i % 2)

        try:
            ck.init_transactions(T)
            kp.init_transactions()
            # first transactions: all three open at once, their batches interleaved in both partitions
            ck.begin_transaction()
            kp.begin_transaction()
            await aio.begin_transaction()
            ck_send(1, "commit", 3)
            kp_send(1, "abort", 3)
            await aio_send(1, "commit", 2)
            ck_send(1, "commit", 2)  # the same values again: a second batch of the same transaction
            kp_send(1, "abort", 2)
            kp.abort_transaction()  # an abort in the middle of two open transactions
            await aio_send(1, "commit", 1)
            ck.commit_transaction(T)
            await aio.commit_transaction()
            # second transactions, the other fate
            ck.begin_transaction()
            kp.begin_transaction()
            await aio.begin_transaction()
            kp_send(2, "commit", 4)
            ck_send(2, "abort", 4)
            await aio_send(2, "abort", 3)
            ck.abort_transaction(T)
            kp.commit_transaction()
            await aio.abort_transaction()
        finally:
            await aio.stop()

    try:
        asyncio.run(asyncio.wait_for(main(), 2 * T))
    finally:
        kp.close()
    from kafkajs_support import run_node

    run_node("""
        const kafka = new kafkajs.Kafka({ brokers: [ARGS.bootstrap], logLevel: kafkajs.logLevel.NOTHING });
        const producer = kafka.producer({ transactionalId: 'm-kafkajs', idempotent: true, maxInFlightRequests: 1 });
        await producer.connect();
        for (const [txn, fate] of [[1, 'commit'], [2, 'abort'], [3, 'commit']]) {
          const t = await producer.transaction();
          for (let i = 0; i < 3; i++) {
            await t.send({ topic: ARGS.topic, messages: [{ key: 'js' + i, value: `js-t${txn}-${fate}-${i}`, partition: i % 2 }] });
          }
          await (fate === 'commit' ? t.commit() : t.abort());
        }
        await producer.disconnect();
    """, {"bootstrap": server.bootstrap, "topic": TOPIC})
    write_ends(server, TOPIC)


def stored_values(server, topic: str, isolation: str) -> dict[int, list[str]]:
    """What the embedded API reads of each partition from the server's data directory, ``end`` left out."""
    out = {}
    for partition in (0, 1):
        with reading.open_snapshot(server.data_dir, topic, partition) as snap:
            out[partition] = [r.value.decode() for r in reading.read_records(snap, topic, partition, 0,
                                                                                isolation=isolation)
                              if r.value.decode() != END]
    return out


@pytest.fixture(scope="module")
def expected(server) -> dict[int, list[str]]:
    """Per partition, the committed values in log order (from what is stored, read_uncommitted)."""
    write_matrix(server)
    everything = stored_values(server, TOPIC, "read_uncommitted")
    committed = {p: [v for v in values if "-commit-" in v] for p, values in everything.items()}
    # the matrix is what it claims: every producer's committed and aborted records are in the log
    for client in ("ck", "kp", "aio", "js"):
        for fate in ("commit", "abort"):
            assert any(v.startswith(client) and f"-{fate}-" in v for vs in everything.values() for v in vs), (client, fate)
    assert committed[0] and committed[1]
    return committed


def until_ends(batches, deadline_what: str) -> dict[int, list[str]]:
    """Collect (partition, value) pairs from ``batches`` (an iterator of lists) until ``end`` is seen in both
    partitions, within ``T`` seconds."""
    got: dict[int, list[str]] = {0: [], 1: []}
    ended: set[int] = set()
    deadline = time.monotonic() + T
    for batch in batches:
        for partition, v in batch:
            if v == END:
                ended.add(partition)
            elif partition not in ended:
                got[partition].append(v)
        if ended == {0, 1}:
            return got
        assert time.monotonic() < deadline, f"{deadline_what}: no end record in {sorted({0, 1} - ended)} within {T} s"
    raise AssertionError("unreachable")


def read_confluent(server, topic: str, isolation: str) -> dict[int, list[str]]:
    c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": f"r-ck-{isolation}", "isolation.level": isolation,
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in (0, 1)])

        def polls():
            while True:
                msgs = c.consume(100, 0.2)
                for m in msgs:
                    assert m.error() is None, m.error()
                yield [(m.partition(), m.value().decode()) for m in msgs]
        return until_ends(polls(), f"confluent-kafka {isolation}")
    finally:
        c.close()


def read_kafka_python(server, topic: str, isolation: str) -> dict[int, list[str]]:
    c = kafka.KafkaConsumer(bootstrap_servers=server.bootstrap, isolation_level=isolation, enable_auto_commit=False)
    try:
        c.assign([kafka.TopicPartition(topic, p) for p in (0, 1)])
        c.seek_to_beginning()

        def polls():
            while True:
                got = c.poll(timeout_ms=200)
                yield [(tp.partition, r.value.decode()) for tp, records in got.items() for r in records]
        return until_ends(polls(), f"kafka-python {isolation}")
    finally:
        c.close()


def read_aiokafka(server, topic: str, isolation: str) -> dict[int, list[str]]:
    async def main():
        c = aiokafka.AIOKafkaConsumer(bootstrap_servers=server.bootstrap, isolation_level=isolation,
                                      enable_auto_commit=False)
        await c.start()
        try:
            c.assign([aiokafka.TopicPartition(topic, p) for p in (0, 1)])
            await c.seek_to_beginning()
            got: dict[int, list[str]] = {0: [], 1: []}
            ended: set[int] = set()
            deadline = time.monotonic() + T
            while ended != {0, 1}:
                assert time.monotonic() < deadline, f"aiokafka {isolation}: no end record in {sorted({0, 1} - ended)}"
                for tp, records in (await c.getmany(timeout_ms=200)).items():
                    for r in records:
                        v = r.value.decode()
                        if v == END:
                            ended.add(tp.partition)
                        elif tp.partition not in ended:
                            got[tp.partition].append(v)
            return got
        finally:
            await c.stop()
    return asyncio.run(asyncio.wait_for(main(), 2 * T))


def read_kafkajs(server, topic: str, isolation: str) -> dict[int, list[str]]:
    from kafkajs_support import run_node

    got = run_node("""
        const kafka = new kafkajs.Kafka({ brokers: [ARGS.bootstrap], logLevel: kafkajs.logLevel.NOTHING });
        const consumer = kafka.consumer({ groupId: ARGS.group, readUncommitted: ARGS.uncommitted });
        await consumer.connect();
        await consumer.subscribe({ topic: ARGS.topic, fromBeginning: true });
        const got = { 0: [], 1: [] };
        const ended = new Set();
        await new Promise((resolve, reject) => {
          const timer = setTimeout(() => reject(new Error('no end record in ' + JSON.stringify([...ended]))), 30000);
          consumer.run({ eachMessage: async ({ partition, message }) => {
            const v = message.value.toString();
            if (v === 'end') ended.add(partition); else if (!ended.has(partition)) got[partition].push(v);
            if (ended.size === 2) { clearTimeout(timer); resolve(); }
          } }).catch(reject);
        });
        await consumer.disconnect();
        return got;
    """, {"bootstrap": server.bootstrap, "topic": topic, "group": f"r-js-{topic}-{isolation}",
          "uncommitted": isolation == "read_uncommitted"}, timeout=2 * T)
    return {int(p): values for p, values in got.items()}


READERS = {"confluent-kafka": read_confluent, "kafka-python": read_kafka_python, "aiokafka": read_aiokafka,
           "kafkajs": read_kafkajs}


def test_the_embedded_api_reads_the_matrix_committed(server, expected):
    assert stored_values(server, TOPIC, "read_committed") == expected


@pytest.mark.parametrize("reader", READERS)
def test_read_committed_consumers_see_each_commit_once_and_no_abort(server, expected, reader):
    assert READERS[reader](server, TOPIC, "read_committed") == expected


@pytest.mark.parametrize("reader", ["confluent-kafka", "kafkajs"])
def test_read_uncommitted_consumers_see_the_aborted_records_too(server, expected, reader):
    assert READERS[reader](server, TOPIC, "read_uncommitted") == stored_values(server, TOPIC, "read_uncommitted")


# --- fencing and timeouts: kafka-python, aiokafka, kafkajs ---------------------------------------------------


def committed_values(server, topic: str) -> list[str]:
    """What a read_committed reader gets of ``topic`` (read from the data directory: the matrix above is what
    checks the consumers)."""
    return sorted(v for vs in stored_values(server, topic, "read_committed").values() for v in vs)


def test_kafka_python_zombie_is_fenced(server):
    from kafka.errors import InvalidProducerEpochError, ProducerFencedError

    zombie = kafka.KafkaProducer(bootstrap_servers=server.bootstrap, transactional_id="kp-zombie")
    newer = kafka.KafkaProducer(bootstrap_servers=server.bootstrap, transactional_id="kp-zombie")
    try:
        zombie.init_transactions()
        zombie.begin_transaction()
        zombie.send("fence-kp", b"zombie-open", partition=0)
        zombie.flush(T)
        newer.init_transactions()  # aborts the zombie's open transaction and bumps the epoch
        with pytest.raises((ProducerFencedError, InvalidProducerEpochError)):
            zombie.send("fence-kp", b"zombie-late", partition=1)
            zombie.commit_transaction()
        newer.begin_transaction()
        newer.send("fence-kp", b"newer", partition=1)
        newer.commit_transaction()
    finally:
        zombie.close(timeout=1)
        newer.close()
    assert committed_values(server, "fence-kp") == ["newer"]


def test_aiokafka_zombie_is_fenced(server):
    from aiokafka.errors import InvalidProducerEpoch, ProducerFenced

    async def main() -> None:
        zombie = aiokafka.AIOKafkaProducer(bootstrap_servers=server.bootstrap, transactional_id="aio-zombie")
        newer = aiokafka.AIOKafkaProducer(bootstrap_servers=server.bootstrap, transactional_id="aio-zombie")
        await zombie.start()
        try:
            await zombie.begin_transaction()
            await zombie.send_and_wait("fence-aio", b"zombie-open", partition=0)
            await newer.start()  # its InitProducerId aborts the zombie's transaction
            with pytest.raises((ProducerFenced, InvalidProducerEpoch)):
                await zombie.send_and_wait("fence-aio", b"zombie-late", partition=1)
                await zombie.commit_transaction()
            async with newer.transaction():
                await newer.send_and_wait("fence-aio", b"newer", partition=1)
        finally:
            await newer.stop()
            await zombie.stop()
    asyncio.run(asyncio.wait_for(main(), 2 * T))
    assert committed_values(server, "fence-aio") == ["newer"]


def test_kafkajs_zombie_is_fenced(server):
    from kafkajs_support import run_node

    error = run_node("""
        const kafka = new kafkajs.Kafka({ brokers: [ARGS.bootstrap], logLevel: kafkajs.logLevel.NOTHING,
                                          retry: { retries: 2 } });
        const options = { transactionalId: 'js-zombie', idempotent: true, maxInFlightRequests: 1 };
        const zombie = kafka.producer(options);
        await zombie.connect();
        const open = await zombie.transaction();
        await open.send({ topic: 'fence-js', messages: [{ value: 'zombie-open', partition: 0 }] });
        const newer = kafka.producer(options);
        await newer.connect();
        // kafkajs asks for the transactional id's producer id at its first transaction: the zombie's
        // transaction aborted, the epoch bumped
        const t = await newer.transaction();
        let error = 'no error';
        try {
          await open.send({ topic: 'fence-js', messages: [{ value: 'zombie-late', partition: 1 }] });
          await open.commit();
        } catch (e) { error = e.type || e.name; }
        await t.send({ topic: 'fence-js', messages: [{ value: 'newer', partition: 1 }] });
        await t.commit();
        await newer.disconnect();
        await zombie.disconnect();
        return error;
    """, {"bootstrap": server.bootstrap})
    # kafkajs speaks AddPartitionsToTxn v1, to which Kafka answers a fenced epoch with INVALID_PRODUCER_EPOCH
    assert error == "INVALID_PRODUCER_EPOCH", error
    assert committed_values(server, "fence-js") == ["newer"]


def transaction_state(server, tid: str) -> str:
    """The transaction's state by DescribeTransactions (raw, v0)."""
    req = wire.module_of("describe_transactions", 0, "request")
    with wire.RawClient.to(server, timeout=T) as c:
        answer = c.call(req.DescribeTransactionsRequest(transactional_ids=(tid,)))
    (state,) = answer.transaction_states
    assert state.error_code == 0, state
    return state.transaction_state


def wait_for_state(server, tid: str, wanted: str) -> None:
    deadline = time.monotonic() + T
    while (state := transaction_state(server, tid)) != wanted:
        assert time.monotonic() < deadline, f"{tid} still {state} after {T} s, not {wanted}"
        time.sleep(0.05)


def test_kafka_python_transaction_past_its_timeout_is_aborted(server):
    from kafka.errors import InvalidProducerEpochError, ProducerFencedError

    p = kafka.KafkaProducer(bootstrap_servers=server.bootstrap, transactional_id="kp-timeout",
                            transaction_timeout_ms=1500)
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send("timeout-kp", b"late", partition=0)
        p.flush(T)
        assert transaction_state(server, "kp-timeout") == "Ongoing"
        wait_for_state(server, "kp-timeout", "CompleteAbort")
        with pytest.raises((ProducerFencedError, InvalidProducerEpochError)):
            p.commit_transaction()
    finally:
        p.close(timeout=1)
    assert committed_values(server, "timeout-kp") == []


def test_aiokafka_transaction_past_its_timeout_is_aborted(server):
    from aiokafka.errors import InvalidProducerEpoch, ProducerFenced

    async def main() -> None:
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=server.bootstrap, transactional_id="aio-timeout",
                                      transaction_timeout_ms=1500)
        await p.start()
        try:
            await p.begin_transaction()
            await p.send_and_wait("timeout-aio", b"late", partition=0)
            assert transaction_state(server, "aio-timeout") == "Ongoing"
            deadline = time.monotonic() + T
            while transaction_state(server, "aio-timeout") != "CompleteAbort":
                assert time.monotonic() < deadline, "the coordinator did not abort aio-timeout"
                await asyncio.sleep(0.05)
            with pytest.raises((ProducerFenced, InvalidProducerEpoch)):
                await p.commit_transaction()
        finally:
            await p.stop()
    asyncio.run(asyncio.wait_for(main(), 2 * T))
    assert committed_values(server, "timeout-aio") == []


def test_kafkajs_transaction_past_its_timeout_is_aborted(server):
    from kafkajs_support import run_node

    run_node("""
        const kafka = new kafkajs.Kafka({ brokers: [ARGS.bootstrap], logLevel: kafkajs.logLevel.NOTHING });
        const producer = kafka.producer({ transactionalId: 'js-timeout', idempotent: true, maxInFlightRequests: 1,
                                          transactionTimeout: 1500 });
        await producer.connect();
        const t = await producer.transaction();
        await t.send({ topic: 'timeout-js', messages: [{ value: 'late', partition: 0 }] });
        return null;  // exits with the transaction open
    """, {"bootstrap": server.bootstrap})
    wait_for_state(server, "js-timeout", "CompleteAbort")
    assert committed_values(server, "timeout-js") == []
