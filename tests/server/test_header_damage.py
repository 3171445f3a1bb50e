"""A flipped byte in a batch header field the CRC does not cover, through the broker and the CLI.

The log is written by the broker (librdkafka producing through ``compactlog serve``), a byte of one
batch's base offset, batch length, leader epoch or magic is flipped in a closed segment or in the active
one, and the broker restarts (cleanly, or after losing its clean-shutdown marker). Then a librdkafka
consumer reading through the broker and ``compactlog consume`` on the directory either fail naming the
damage or deliver every intact record at its own offset: never success with a record missing, shifted or
duplicated, never a client left waiting.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from compactlog.records.batch import iter_batches

T = "flips"
N = 2000
CORRUPT_MESSAGE = 2  # Kafka's error code, which confluent_kafka has no name for
WAIT_S = 30.0  # a consumer that neither finishes nor reports an error by then is stalled: a failure

# (field, byte within the 61-byte header, xor mask)
FLIPS = [
    ("base offset, high byte", 0, 0x01),
    ("base offset, byte 6", 6, 0x10),
    ("base offset, low byte up", 7, 0x01),
    ("base offset, low byte down", 7, 0x02),
    ("batch length, byte 8", 8, 0x01),
    ("batch length, low byte", 11, 0x01),
    ("leader epoch", 12, 0x40),
    ("magic", 16, 0x03),
]


@pytest.fixture(scope="module")
def written(tmp_path_factory, serve_module) -> Path:
    """A data directory whose topic the broker wrote: records v0..v1999, ten to a batch, in a few segments."""
    d = tmp_path_factory.mktemp("flips") / "data"
    subprocess.run([sys.executable, "-m", "compactlog", "topics", "--data-dir", str(d), "--create", "--topic", T,
                    "--config", "segment.bytes=20000"], check=True, capture_output=True)
    serve = serve_module(d)
    p = Producer({"bootstrap.servers": serve.bootstrap, "linger.ms": 1000, "batch.num.messages": 10,
                  "enable.idempotence": True, "compression.type": "none"})
    for i in range(N):
        p.produce(T, key=b"k%d" % i, value=b"v%d" % i, partition=0)
        if i % 10 == 9:
            p.flush(10)
    assert p.flush(10) == 0
    assert serve.stop() == 0
    return d


@pytest.fixture(scope="module")
def serve_module(tmp_path_factory):
    from wire import serve_process_class

    started = []

    def factory(d: Path):
        s = serve_process_class()(d)
        started.append(s)
        return s.start()

    yield factory
    for s in started:
        s.kill()


def _flip(src: Path, dst: Path, which: str, byte: int, mask: int) -> tuple[int, int]:
    """Copy ``src`` to ``dst`` and flip ``byte`` of the 6th batch of a closed segment (``which`` =
    "closed") or of the active one ("active"), or of the log's last batch ("last", the one the newest
    producer snapshot follows); returns (the batch's first offset, its records)."""
    shutil.copytree(src, dst)
    logs = sorted((dst / f"{T}-0").glob("*.log"))
    assert len(logs) >= 3
    seg = logs[1] if which == "closed" else logs[-1]
    data = bytearray(seg.read_bytes())
    batches = list(iter_batches(bytes(data)))
    pos, batch = batches[-1] if which == "last" else batches[5]
    data[pos + byte] ^= mask
    seg.write_bytes(bytes(data))
    return batch.base_offset, batch.record_count


def _check(got: list[tuple[int, bytes]], complete: bool, damage_seen: bool) -> None:
    offsets = [o for o, _ in got]
    assert len(set(offsets)) == len(offsets), "an offset was delivered twice"
    assert offsets == sorted(offsets), "records out of order"
    for o, v in got:
        assert v == b"v%d" % o, f"offset {o} delivered the value {v!r}: a shifted record"
    assert complete or damage_seen, f"{len(got)} of {N} records delivered and no error"


def _read_through_broker(bootstrap: str) -> tuple[list[tuple[int, bytes]], bool]:
    """(offset, value) of every record a librdkafka consumer reads from offset 0, and whether it reported
    corruption; reads past a reported error the way an application would (seek to the next offset)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "flips", "enable.auto.commit": False,
                  "fetch.error.backoff.ms": 10, "check.crcs": True})
    c.assign([TopicPartition(T, 0, 0)])
    got: list[tuple[int, bytes]] = []
    damage = False
    deadline = time.monotonic() + WAIT_S
    try:
        while time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() in (KafkaError._PARTITION_EOF,):
                    break
                assert msg.error().code() in (CORRUPT_MESSAGE, KafkaError._BAD_MSG), msg.error()
                damage = True
                break
            got.append((msg.offset(), msg.value()))
            if msg.offset() == N - 1:
                break
        else:
            pytest.fail(f"the consumer stalled: {len(got)} records and no error in {WAIT_S} s")
    finally:
        c.close()
    return got, damage


def _read_with_cli(d: Path) -> tuple[list[tuple[int, bytes]], bool]:
    r = subprocess.run([sys.executable, "-m", "compactlog", "consume", "--data-dir", str(d), "--topic", T,
                        "--from-beginning", "--property", "print.offset=true"], capture_output=True, text=True,
                       timeout=120)
    got = []
    for line in r.stdout.splitlines():
        off, value = line.split("\t", 1)
        got.append((int(off.removeprefix("Offset:")), value.encode()))
    assert r.returncode in (0, 1), r.stderr
    if r.returncode == 1:
        assert "Traceback" not in r.stderr
        assert f"{T}-0" in r.stderr and "position" in r.stderr, r.stderr  # names the partition and the place
    return got, r.returncode == 1


@pytest.mark.parametrize("which", ["closed", "active", "last"])
@pytest.mark.parametrize("field,byte,mask", FLIPS, ids=[f[0] for f in FLIPS])
@pytest.mark.parametrize("shutdown", ["clean", "unclean"])
def test_a_flipped_header_byte_is_reported_never_served_wrong(written, tmp_path, serve_module, which, field, byte,
                                                              mask, shutdown):
    d = tmp_path / "data"
    first, count = _flip(written, d, which, byte, mask)
    if shutdown == "unclean":
        (d / ".kafka_cleanshutdown").unlink()
    serve = serve_module(d)
    got, damage = _read_through_broker(serve.bootstrap)
    # A record produced now gets an offset no record held before.
    p = Producer({"bootstrap.servers": serve.bootstrap})
    acked = []
    p.produce(T, value=b"after", partition=0, on_delivery=lambda err, msg: acked.append((err, msg.offset())))
    assert p.flush(10) == 0 and acked[0][0] is None
    assert acked[0][1] >= N, f"offset {acked[0][1]} handed out again"
    assert serve.stop() == 0
    _check(got, len(got) == N, damage)
    if not damage:
        assert [o for o, _ in got] == list(range(N))
    got, damage = _read_with_cli(d)
    got = [(o, v) for o, v in got if o < N]
    _check(got, len(got) >= N, damage)
    # The records after the damaged batch stay readable by offset.
    after = first + count
    readable = [(after + 20, f"v{after + 20}")] if after + 20 < N else []
    for offset, value in readable + [(acked[0][1], "after")]:  # and what was acknowledged
        r = subprocess.run([sys.executable, "-m", "compactlog", "consume", "--data-dir", str(d), "--topic", T,
                            "--partition", "0", "--offset", str(offset), "--max-messages", "1",
                            "--property", "print.offset=true"], capture_output=True, text=True, timeout=60)
        assert r.stdout.strip() == f"Offset:{offset}\t{value}", r.stderr
