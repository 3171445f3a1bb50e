"""Following a topic that another process owns and appends to: the console consumer's --timeout-ms and
the snapshot consumer under it."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

import compactlog
from compactlog.consumer import TORN_TAIL_POLLS, SnapshotConsumer
from compactlog.errors import CorruptRecordError, KafkaStorageError, UnknownTopicOrPartitionError


def test_the_console_consumer_follows_appends_of_the_owning_process_and_stops_when_idle(tmp_path):
    with compactlog.open(tmp_path) as cl:  # this process holds the data directory's lock throughout
        cl.create_topic("t", 2)
        cl.produce_batch("t", [(b"k%d" % i, b"first-%d" % i) for i in range(10)])
        proc = subprocess.Popen(
            [sys.executable, "-m", "compactlog", "consume", "--data-dir", str(tmp_path), "--topic", "t",
             "--from-beginning", "--timeout-ms", "2000", "--property", "print.partition=true",
             "--property", "print.offset=true"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        watchdog = threading.Timer(120, proc.kill)  # a hung consumer fails the test instead of hanging it
        watchdog.start()
        try:
            lines = [proc.stdout.readline() for _ in range(10)]
            cl.produce_batch("t", [(b"k%d" % i, b"second-%d" % i) for i in range(10)])
            lines += [proc.stdout.readline() for _ in range(10)]
            rc = proc.wait(timeout=60)
        finally:
            watchdog.cancel()
    assert rc == 0, proc.stderr.read()
    assert proc.stdout.read() == "", "nothing after the 20 records"
    rows = [line.rstrip("\n").split("\t") for line in lines]
    assert sorted(r[2] for r in rows) == sorted([f"first-{i}" for i in range(10)] + [f"second-{i}" for i in range(10)])
    for p in ("Partition:0", "Partition:1"):
        offsets = [int(r[1].removeprefix("Offset:")) for r in rows if r[0] == p]
        assert offsets == list(range(len(offsets))), "each partition in offset order, nothing twice"


def test_max_messages_ends_a_follow_and_latest_starts_at_the_end(tmp_path):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1)
        cl.produce_batch("t", [(None, b"v%d" % i) for i in range(5)])
    out = subprocess.run([sys.executable, "-m", "compactlog", "consume", "--data-dir", str(tmp_path), "--topic", "t",
                          "--from-beginning", "--timeout-ms", "-1", "--max-messages", "3"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.split() == ["v0", "v1", "v2"]
    assert SnapshotConsumer(tmp_path, "t").poll() == []


def test_polls_resume_where_they_stopped_and_cross_cleaning_gaps(tmp_path):
    cfg = {"cleanup.policy": "compact", "segment.bytes": "600", "min.cleanable.dirty.ratio": "0.01"}
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1, cfg)
        cl.produce_batch("t", [(b"k%d" % (i % 5), b"v%d" % i) for i in range(200)], batch_bytes=150)
        assert cl.clean("t").compactions
        expected = [(r.offset, r.value) for r in cl.consume("t", from_beginning=True)]
    assert len(expected) < 200
    consumer = SnapshotConsumer(tmp_path, "t", start="earliest", max_poll_records=7)
    got = []
    while batch := consumer.poll():
        assert len(batch) <= 7
        got += [(r.offset, r.value) for r in batch]
    assert got == expected
    assert consumer.positions == {0: 200}, "the position passes the removed offsets to the log end"


def test_the_compacted_view_is_followed_past_its_horizon(tmp_path):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1)
        cl.produce_batch("t", [(b"k%d" % (i % 3), b"old-%d" % i) for i in range(30)])
        cl.compact_topic("t")
        consumer = SnapshotConsumer(tmp_path, "t", start="earliest", read_compacted=True)
        assert [r.value for r in consumer.poll()] == [b"old-27", b"old-28", b"old-29"]
        cl.produce("t", b"new", key=b"k0")
        assert [(r.offset, r.value) for r in consumer.poll()] == [(30, b"new")]


def test_retention_moves_a_passed_position_to_the_log_start(tmp_path):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1, {"segment.bytes": "500", "retention.bytes": "600", "file.delete.delay.ms": "0"})
        cl.produce_batch("t", [(None, b"x" * 40) for _ in range(10)], batch_bytes=100)
        consumer = SnapshotConsumer(tmp_path, "t", start="earliest")
        cl.produce_batch("t", [(None, b"y" * 40) for _ in range(40)], batch_bytes=100)
        cl.clean("t")
        start = cl.beginning_offsets("t")[0]
        assert start > 0
    got = [r.offset for r in consumer.poll()]
    assert got == list(range(start, 50))


def test_a_batch_being_written_is_read_later_and_lasting_corruption_is_raised(tmp_path):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1)
        cl.produce_batch("t", [(None, b"v%d" % i) for i in range(3)], batch_bytes=1)
        log_file = cl.log("t").active_segment.log_path
    whole = log_file.read_bytes()
    # The last page not written yet: the value "v2" and the header count read as zeros, which still
    # decode as a record; only the CRC tells.
    torn = whole[:-3] + b"\0" * 3
    log_file.write_bytes(torn)
    consumer = SnapshotConsumer(tmp_path, "t", start="earliest")
    assert [r.value for r in consumer.poll()] == [b"v0", b"v1"]
    for _ in range(TORN_TAIL_POLLS - 2):
        assert consumer.poll() == []
    log_file.write_bytes(whole)  # the owner finished writing it
    assert [r.value for r in consumer.poll()] == [b"v2"]
    log_file.write_bytes(torn)
    consumer = SnapshotConsumer(tmp_path, "t", start=2, partition=0)
    with pytest.raises(CorruptRecordError):
        for _ in range(TORN_TAIL_POLLS):
            consumer.poll()


def test_unknown_topic_partition_and_data_directory(tmp_path):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1)
    with pytest.raises(UnknownTopicOrPartitionError, match="Topic 'nope'"):
        SnapshotConsumer(tmp_path, "nope")
    with pytest.raises(UnknownTopicOrPartitionError, match="Partition 3"):
        SnapshotConsumer(tmp_path, "t", 3)
    with pytest.raises(KafkaStorageError, match="data directory .*missing does not exist"):
        SnapshotConsumer(tmp_path / "missing", "t")


def test_a_partition_that_fills_every_poll_does_not_starve_the_others(tmp_path):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 2)
        cl.produce_batch("t", [(None, b"busy") for _ in range(100)], partition=0)
        cl.produce_batch("t", [(None, b"quiet")], partition=1)
    consumer = SnapshotConsumer(tmp_path, "t", start="earliest", max_poll_records=10)
    first_two = consumer.poll() + consumer.poll()
    assert b"quiet" in [r.value for r in first_two]


def test_following_from_an_offset_beyond_the_end_is_an_error_as_without_following(tmp_path):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1)
        cl.produce("t", b"v")
    for follow in ([], ["--timeout-ms", "100"]):
        out = subprocess.run([sys.executable, "-m", "compactlog", "consume", "--data-dir", str(tmp_path), "--topic", "t",
                              "--partition", "0", "--offset", "99", *follow], capture_output=True, text=True, timeout=60)
        assert out.returncode == 1, (follow, out.stderr)
        assert "offset 99 is out of range for t-0 (0..1)" in out.stderr
