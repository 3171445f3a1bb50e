"""Shared pieces of the consumer group tests with real clients: topics, data, waiting with deadlines, and
a group member in another process that a test can kill."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

SESSION_MS = 6000  # Kafka's group.min.session.timeout.ms: the shortest session a member may have
MEMBER_SCRIPT = Path(__file__).with_name("group_member.py")


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    """Keyed records spread over every partition, acknowledged before returning."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
    for v in values:
        p.produce(topic, key=v, value=v)
    assert p.flush(30) == 0


def values(prefix: str, n: int) -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(n)]


def partitions(c) -> list[int]:
    """The partition numbers assigned to a consumer of any of the three client libraries."""
    return sorted(p.partition for p in c.assignment())


def read_through_restarts(server, read_all_and_commit: Callable[[str, str, str, list[bytes]], None]) -> None:
    """Group ``shop`` reads and commits 60 records of ``prices`` (3 partitions), then 30 new ones after a
    SIGTERM restart and 30 after a SIGKILL restart: committed offsets are in __consumer_offsets either way,
    so each read after a restart starts where the last commit left off (120 committed in all)."""
    create_topic(server.bootstrap, "prices", 3)
    first = values("a", 60)
    produce(server.bootstrap, "prices", first)
    read_all_and_commit(server.bootstrap, "shop", "prices", first)
    for kill in (False, True):
        server.restart(kill=kill)
        more = values(f"after-restart-{kill}", 30)
        produce(server.bootstrap, "prices", more)
        read_all_and_commit(server.bootstrap, "shop", "prices", more)


def wait_until(check: Callable[[], bool], timeout: float, step: Callable[[], None] = lambda: time.sleep(0.05),
               what: str = "condition") -> None:
    """Call ``step`` until ``check()`` holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout} s")
        step()


class MemberProcess:
    """``group_member.py`` running one client library; ``assignment`` is the last one it printed."""

    def __init__(self, client: str, bootstrap: str, group: str, topic: str, session_ms: int = SESSION_MS) -> None:
        self.proc = subprocess.Popen([sys.executable, str(MEMBER_SCRIPT), client, bootstrap, group, topic,
                                      str(session_ms)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.assignment: list[int] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.assignment = json.loads(line)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


def read(c, n: int, timeout: float = 30) -> list:
    """``n`` messages from a confluent-kafka consumer, failing on an error or after ``timeout`` seconds."""
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < n:
        assert time.monotonic() < deadline, f"read {len(out)} of {n} records"
        m = c.poll(0.2)
        if m is not None:
            assert m.error() is None, m.error()
            out.append(m)
    return out
