"""A real ``compactlog serve`` killed with SIGKILL in the middle of a transaction, with real faults.

- Between the commit's Prepare and its markers: the server's file size limit (RLIMIT_FSIZE, set on the
  running process) is lowered to the data segment's size, so the Prepare record (a small file) is stored
  and the COMMIT marker (one more byte in the full file) cannot be; the server is then SIGKILLed. After a
  restart without the limit, the coordinator reads the Prepare back and completes the commit.
- Between AddPartitions and EndTxn: the producer process and the server are both SIGKILLed with the
  transaction open; after the restart the coordinator aborts it once its timeout has passed.

Either way a read_committed reader never sees half a transaction: nothing while it is open or
preparing, everything once committed, nothing once aborted.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import textwrap
import time

import pytest

import wire
from compactlog import reading
from compactlog.api import CompactLog
from compactlog.records.control import COMMIT, read_control_record
from compactlog.transactions.coordinator import TRANSACTION_STATE_TOPIC
from compactlog.transactions.load import load_partition
from compactlog.transactions.state import PREPARE_COMMIT

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaException, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

OVERRIDES = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
             "transaction.state.log.num.partitions": "2", "offsets.topic.num.partitions": "2"}
DEADLINE_S = 30.0
VALUES = [bytes([i]) * 10_000 for i in range(100)]  # a data segment of about 1 MB: far above every other file


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with wire.serving(tmp_path_factory.mktemp("txn-crash") / "data", OVERRIDES) as s:
        admin = AdminClient({"bootstrap.servers": s.bootstrap})
        for f in admin.create_topics([NewTopic("prepared", 1, 1), NewTopic("abandoned", 1, 1)]).values():
            f.result(30)
        yield s


def stored(server, topic: str) -> list[str]:
    """The batches of partition 0 as kept on disk: "data" or the marker's type."""
    out = []
    with reading.open_snapshot(server.data_dir, topic, 0) as snap:
        for batch in snap.batches(0):
            if batch.is_control:
                out.append("COMMIT" if read_control_record(batch).type_id == COMMIT else "ABORT")
            else:
                out.append("data")
    return out


def read_committed(server, topic: str) -> list[bytes]:
    with reading.open_snapshot(server.data_dir, topic, 0) as snap:
        return [r.value for r in reading.read_records(snap, topic, 0, 0, isolation="read_committed")]


def stored_state(server, transactional_id: str):
    """The transactional id's metadata as ``__transaction_state`` holds it (the server must be down)."""
    cl = CompactLog(server.data_dir, background=False)
    try:
        for partition in range(cl.partitions_for(TRANSACTION_STATE_TOPIC)):
            meta = load_partition(cl, partition, 0).transactions.get(transactional_id)
            if meta is not None:
                return meta
    finally:
        cl.close()
    raise AssertionError(f"{transactional_id} is not in {TRANSACTION_STATE_TOPIC}")


def state_of(server, transactional_id: str) -> str:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=15_000)
    try:
        (d,) = admin.describe_transactions([transactional_id]).values()
    finally:
        admin.close()
    return str(getattr(d.state, "value", d.state))


def wait_for_state(server, transactional_id: str, wanted: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while (state := state_of(server, transactional_id)) != wanted:
        assert time.monotonic() < deadline, f"{transactional_id} is {state}, not {wanted}, after {DEADLINE_S} s"
        time.sleep(0.1)


def segment_file(server, topic: str):
    (path,) = (server.data_dir / f"{topic}-0").glob("*.log")
    return path


def test_a_commit_whose_markers_cannot_be_written_completes_after_a_sigkill_and_restart(server):
    p = Producer({"bootstrap.servers": server.bootstrap, "transactional.id": "prepared-1",
                  "transaction.timeout.ms": 60_000})
    p.init_transactions(30)
    p.begin_transaction()
    for v in VALUES:
        p.produce("prepared", key=b"k", value=v, partition=0)
    p.flush(30)
    full = segment_file(server, "prepared").stat().st_size
    assert full > 900_000
    resource.prlimit(server.proc.pid, resource.RLIMIT_FSIZE, (full, full))  # not one byte more in any file
    try:
        p.commit_transaction(10)  # answered after the Prepare whether or not the markers follow, as in Kafka
    except KafkaException:
        pass
    server.kill()
    assert segment_file(server, "prepared").stat().st_size == full  # no marker, not even a torn one
    assert stored_state(server, "prepared-1").state is PREPARE_COMMIT
    assert stored(server, "prepared") == ["data"] * len(stored(server, "prepared"))
    assert read_committed(server, "prepared") == []  # the open transaction holds the LSO
    server.restart()
    wait_for_state(server, "prepared-1", "CompleteCommit")
    assert stored(server, "prepared")[-1] == "COMMIT"
    assert read_committed(server, "prepared") == VALUES


PRODUCER = textwrap.dedent("""
    import sys
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": "abandoned-1",
                  "transaction.timeout.ms": 3000})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(10):
        p.produce("abandoned", key=b"k", value=b"v%d" % i, partition=0)
    p.flush(30)
    print("produced", flush=True)
    sys.stdin.read()  # until killed
""")


def test_a_transaction_open_when_producer_and_server_die_is_aborted_at_its_timeout_after_restart(server):
    proc = subprocess.Popen([sys.executable, "-c", PRODUCER, server.bootstrap], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stdout.readline() == b"produced\n"
        assert state_of(server, "abandoned-1") == "Ongoing"
        server.kill()
    finally:
        proc.kill()
        proc.wait()
    assert set(stored(server, "abandoned")) == {"data"}
    assert read_committed(server, "abandoned") == []
    server.restart()
    wait_for_state(server, "abandoned-1", "CompleteAbort")
    assert stored(server, "abandoned")[-1] == "ABORT"
    assert read_committed(server, "abandoned") == []
    with reading.open_snapshot(server.data_dir, "abandoned", 0) as snap:  # and the LSO is free again
        assert snap.last_stable_offset == snap.log_end_offset
