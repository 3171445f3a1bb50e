"""A consume-transform-produce worker, run as its own process by test_txn_exactly_once.py (which SIGKILLs it).

    python eos_worker.py CLIENT BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID EVERY

CLIENT is confluent-kafka, kafka-python or aiokafka. The worker reads INPUT read_committed as GROUP (the
partitions assigned by hand, starting from the group's committed offsets, else the earliest), writes each
record to the same partition of OUTPUT with its value prefixed by ``out:``, and commits a transaction every
EVERY records holding those records and the consumed offsets (``send_offsets_to_transaction``); when the
input runs dry it commits what it has. It runs until killed.

It tells its parent where it is, one line at a time on stdout: ``ready {partition: committed offset}``
once its producer is initialized (the previous instance fenced, its open transaction aborted) and its
consumer assigned; ``delivered P O`` once the output record for input record O of partition P is
acknowledged by the broker (stored, in the open transaction: the worker waits for each, so that a kill
after it finds the transaction open with that record in the log); ``committing`` before sending the offsets
and ending a transaction; ``committed {partition: offset}`` after the commit returned.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys

PARTITIONS = (0, 1)
POLL_S = 0.3


def say(*words) -> None:
    sys.stdout.write(" ".join(str(w) for w in words) + "\n")
    sys.stdout.flush()


def delivered(partition: int, source_offset: int) -> None:
    say("delivered", partition, source_offset)


def positions_line(kind: str, positions: dict[int, int]) -> None:
    say(kind, json.dumps(positions, sort_keys=True))


def run_confluent(bootstrap: str, source: str, sink: str, group: str, tid: str, every: int) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5})
    producer.init_transactions(60)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    committed = consumer.committed([TopicPartition(source, p) for p in PARTITIONS], timeout=60)
    positions_line("ready", {tp.partition: max(tp.offset, 0) for tp in committed})
    consumer.assign([TopicPartition(source, p) for p in PARTITIONS])  # from the committed offsets
    metadata = consumer.consumer_group_metadata()
    producer.begin_transaction()
    pending: dict[int, int] = {}
    n = 0
    while True:
        msg = consumer.poll(POLL_S)
        if msg is not None:
            if msg.error():
                raise SystemExit(f"consumer error: {msg.error()}")
            producer.produce(sink, b"out:" + msg.value(), msg.key(), partition=msg.partition())
            if producer.flush(60):
                raise SystemExit("an output record was not delivered")
            delivered(msg.partition(), msg.offset())
            pending[msg.partition()] = msg.offset() + 1
            n += 1
        if pending and (n >= every or msg is None):
            say("committing")
            producer.send_offsets_to_transaction([TopicPartition(source, p, o) for p, o in pending.items()], metadata, 60)
            producer.commit_transaction(60)
            positions_line("committed", pending)
            producer.begin_transaction()
            pending, n = {}, 0


def run_kafka_python(bootstrap: str, source: str, sink: str, group: str, tid: str, every: int) -> None:
    import kafka
    from kafka.structs import OffsetAndMetadata

    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid, linger_ms=5)
    producer.init_transactions()
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, isolation_level="read_committed",
                                   enable_auto_commit=False, auto_offset_reset="earliest")
    tps = [kafka.TopicPartition(source, p) for p in PARTITIONS]
    positions_line("ready", {tp.partition: consumer.committed(tp) or 0 for tp in tps})
    consumer.assign(tps)
    producer.begin_transaction()
    pending: dict[int, int] = {}
    n = 0
    while True:
        got = consumer.poll(timeout_ms=int(POLL_S * 1000), max_records=every)
        for tp, records in got.items():
            for r in records:
                producer.send(sink, b"out:" + r.value, key=r.key, partition=tp.partition).get(timeout=60)
                delivered(tp.partition, r.offset)
                pending[tp.partition] = r.offset + 1
                n += 1
        if pending and (n >= every or not got):
            say("committing")
            producer.send_offsets_to_transaction(
                {kafka.TopicPartition(source, p): OffsetAndMetadata(o, "", -1) for p, o in pending.items()},
                consumer.group_metadata())
            producer.commit_transaction()
            positions_line("committed", pending)
            producer.begin_transaction()
            pending, n = {}, 0


async def run_aiokafka(bootstrap: str, source: str, sink: str, group: str, tid: str, every: int) -> None:
    import aiokafka

    producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid, linger_ms=5)
    await producer.start()  # InitProducerId: the previous instance fenced
    consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, isolation_level="read_committed",
                                         enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    tps = [aiokafka.TopicPartition(source, p) for p in PARTITIONS]
    positions_line("ready", {tp.partition: (await consumer.committed(tp)) or 0 for tp in tps})
    consumer.assign(tps)
    pending: dict[int, int] = {}
    while True:
        got = await consumer.getmany(timeout_ms=int(POLL_S * 1000), max_records=every)
        records = [(tp.partition, r) for tp, rs in got.items() for r in rs]
        if not records:
            continue
        async with producer.transaction():
            for partition, r in records:
                await producer.send_and_wait(sink, b"out:" + r.value, key=r.key, partition=partition)
                delivered(partition, r.offset)
                pending[partition] = r.offset + 1
            say("committing")
            await producer.send_offsets_to_transaction({aiokafka.TopicPartition(source, p): o
                                                        for p, o in pending.items()}, group)
        positions_line("committed", pending)
        pending = {}


def main(argv: list[str]) -> None:
    # the clients' warnings (and with EOS_WORKER_DEBUG set, everything) go to stderr: the test's worker log
    logging.basicConfig(level=logging.DEBUG if os.environ.get("EOS_WORKER_DEBUG") else logging.WARNING,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    client, bootstrap, source, sink, group, tid, every = argv
    args = (bootstrap, source, sink, group, tid, int(every))
    if client == "confluent-kafka":
        run_confluent(*args)
    elif client == "kafka-python":
        run_kafka_python(*args)
    elif client == "aiokafka":
        asyncio.run(run_aiokafka(*args))
    else:
        raise SystemExit(f"unknown client {client!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
