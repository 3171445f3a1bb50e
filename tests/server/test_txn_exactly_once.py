"""Exactly-once through crashes: a consume-transform-produce worker (eos_worker.py, a real client in its own
process) reads an input topic read_committed, writes each record transformed to an output topic and sends
the consumed offsets in the same transaction, every few records. It is SIGKILLed at seeded random points
— after a random number of its output records are acknowledged (stored in its open transaction), or just
as it starts a commit (the offsets sent, EndTxn on its way, the markers being written) — and restarted, several times, until the input is
consumed. Each restart's InitProducerId fences the dead instance and aborts whatever it left open.

Then the output, read read_committed (by a librdkafka consumer over the wire and by the embedded API from
the data directory), holds each input record exactly once, in input order per partition; read
read_uncommitted it may hold more (the aborted attempts), which is the point.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

import wire
from child_lines import ChildLines
from compactlog import reading

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

OVERRIDES = {"transaction.state.log.num.partitions": "3", "offsets.topic.num.partitions": "3"}
WORKER = Path(__file__).with_name("eos_worker.py")
PARTITIONS = (0, 1)
RECORDS = 300  # per partition
EVERY = 20  # records per transaction
KILLS = 5
T = 30.0
CLIENTS = ("confluent-kafka", "kafka-python", "aiokafka")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with wire.serving(tmp_path_factory.mktemp("eos") / "data", OVERRIDES) as s:
        admin = AdminClient({"bootstrap.servers": s.bootstrap})
        topics = [NewTopic(f"{kind}-{client}", 2, 1) for client in CLIENTS for kind in ("in", "out")]
        for f in admin.create_topics(topics).values():
            f.result(T)
        yield s


def write_input(server, topic: str) -> dict[int, list[bytes]]:
    """RECORDS keyed records in each partition (plain, idempotent); their values per partition."""
    p = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 5})
    values = {partition: [b"in-%d-%04d" % (partition, i) for i in range(RECORDS)] for partition in PARTITIONS}
    for i in range(RECORDS):
        for partition in PARTITIONS:
            p.produce(topic, values[partition][i], b"key-%d" % (i % 37), partition=partition)
    assert p.flush(T) == 0
    return values


class Worker:
    """One worker process and the lines it prints (``ChildLines``)."""

    def __init__(self, client: str, server, source: str, sink: str, log: Path) -> None:
        self.log = log
        with open(log, "ab") as err:
            self.proc = subprocess.Popen([sys.executable, str(WORKER), client, server.bootstrap, source, sink,
                                          f"group-{client}", f"tid-{client}", str(EVERY)],
                                         stdout=subprocess.PIPE, stderr=err)
        self.lines = ChildLines(self.proc, lambda: f"; its log: {self.log.read_text()[-3000:]}")

    def next_line(self, deadline: float) -> str:
        """The worker's next line; fails when it exits or says nothing before ``deadline``."""
        return self.lines.next_line(deadline)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.lines.close(T)


def run_until_consumed(client: str, server, source: str, sink: str, log: Path, seed: str) -> list[str]:
    """Start, kill and restart the worker until the group's committed offsets reach the input's end;
    the kill points, for the failure message."""
    rng = random.Random(seed)
    committed = {p: 0 for p in PARTITIONS}
    done = {p: RECORDS for p in PARTITIONS}
    kills: list[str] = []
    deadline = time.monotonic() + 3 * T
    while True:
        started = time.monotonic()
        worker = Worker(client, server, source, sink, log)
        try:
            line = worker.next_line(deadline)
            assert line.startswith("ready "), line
            kills.append(f"ready in {time.monotonic() - started:.1f} s")
            committed = {int(p): o for p, o in json.loads(line.split(" ", 1)[1]).items()}
            if committed == done:
                return kills
            # where to kill this instance: after the n-th output record acknowledged, or as the m-th commit
            # begins; the last instance runs to the end
            if sum(k.startswith("killed") for k in kills) < KILLS:
                point = rng.choice([("delivered", rng.randint(1, 3 * EVERY)), ("committing", rng.randint(1, 3))])
            else:
                point = ("never", 0)
            seen = {"delivered": 0, "committing": 0}
            while True:
                line = worker.next_line(deadline)
                kind = line.split(" ", 1)[0]
                if kind in seen:
                    seen[kind] += 1
                    if (kind, seen[kind]) == point:
                        worker.kill()
                        kills.append(f"killed at {kind} #{seen[kind]} after {time.monotonic() - started:.1f} s")
                        break
                elif kind == "committed":
                    committed.update({int(p): o for p, o in json.loads(line.split(" ", 1)[1]).items()})
                    if committed == done:
                        return kills
        finally:
            worker.kill()


def read_committed_output(server, topic: str) -> dict[int, list[bytes]]:
    """The output topic as a librdkafka read_committed consumer reads it, up to its end offsets."""
    c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "eos-check", "isolation.level": "read_committed",
                  "enable.auto.commit": False})
    try:
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=T)[1] for p in PARTITIONS}
        c.assign([TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in PARTITIONS])
        got: dict[int, list[bytes]] = {p: [] for p in PARTITIONS}
        deadline = time.monotonic() + T
        while True:
            positions = {tp.partition: tp.offset for tp in c.position([TopicPartition(topic, p) for p in PARTITIONS])}
            if all(positions[p] >= ends[p] for p in PARTITIONS):
                return got
            assert time.monotonic() < deadline, f"read_committed consumer at {positions}, the end is {ends}"
            for m in c.consume(500, 0.2):
                assert m.error() is None, m.error()
                got[m.partition()].append(m.value())
    finally:
        c.close()


def stored_output(server, topic: str, isolation: str) -> dict[int, list[bytes]]:
    out = {}
    for p in PARTITIONS:
        with reading.open_snapshot(server.data_dir, topic, p) as snap:
            out[p] = [r.value for r in reading.read_records(snap, topic, p, 0, isolation=isolation)]
    return out


@pytest.mark.parametrize("client", CLIENTS)
def test_consume_transform_produce_killed_at_random_points_is_exactly_once(server, client, tmp_path):
    pytest.importorskip({"confluent-kafka": "confluent_kafka", "kafka-python": "kafka"}.get(client, client))
    source, sink = f"in-{client}", f"out-{client}"
    inputs = write_input(server, source)
    kills = run_until_consumed(client, server, source, sink, tmp_path / "worker.log", seed=f"eos-{client}")
    assert sum(k.startswith("killed") for k in kills) == KILLS, kills
    expected = {p: [b"out:" + v for v in values] for p, values in inputs.items()}
    assert stored_output(server, sink, "read_committed") == expected, kills
    assert read_committed_output(server, sink) == expected, kills
    # read_uncommitted: the same records, and more of them, the attempts the kills left open and the next
    # instance's fence aborted
    everything = stored_output(server, sink, "read_uncommitted")
    assert all(set(everything[p]) == set(expected[p]) for p in PARTITIONS)
    assert sum(len(everything[p]) - len(expected[p]) for p in PARTITIONS) > 0, kills
