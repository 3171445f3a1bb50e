"""A consumer group member in a process of its own, for tests that kill a client outright.

    python group_member.py CLIENT BOOTSTRAP GROUP TOPIC SESSION_MS

CLIENT is confluent, kafka-python or aiokafka. It subscribes, polls, and prints its assigned partitions
as a JSON list each time they change, until it is killed (SIGKILL: no LeaveGroup, no more heartbeats).
"""

from __future__ import annotations

import json
import sys


def report(parts, last):
    parts = sorted(parts)
    if parts != last:
        print(json.dumps(parts), flush=True)
    return parts


def confluent(bootstrap: str, group: str, topic: str, session_ms: int) -> None:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "session.timeout.ms": session_ms,
                  "heartbeat.interval.ms": 300, "max.poll.interval.ms": session_ms, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    last = None
    while True:
        c.poll(0.1)
        last = report([p.partition for p in c.assignment()], last)


def kafka_python(bootstrap: str, group: str, topic: str, session_ms: int) -> None:
    from kafka import KafkaConsumer

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, session_timeout_ms=session_ms,
                      heartbeat_interval_ms=300, max_poll_interval_ms=session_ms, auto_offset_reset="earliest")
    c.partitions_for_topic(topic)  # see test_groups_kafka_python.py: metadata first, long polls
    c.subscribe([topic])
    last = None
    while True:
        c.poll(1000)
        last = report([p.partition for p in c.assignment()], last)


def aiokafka(bootstrap: str, group: str, topic: str, session_ms: int) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer

    async def main() -> None:
        c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, session_timeout_ms=session_ms,
                             heartbeat_interval_ms=300, max_poll_interval_ms=session_ms,
                             rebalance_timeout_ms=session_ms, auto_offset_reset="earliest")
        await c.start()
        last = None
        while True:
            await c.getmany(timeout_ms=100)
            last = report([p.partition for p in c.assignment()], last)

    asyncio.run(main())


if __name__ == "__main__":
    client, bootstrap, group, topic, session = sys.argv[1:6]
    {"confluent": confluent, "kafka-python": kafka_python, "aiokafka": aiokafka}[client](
        bootstrap, group, topic, int(session))
