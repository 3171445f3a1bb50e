"""One CRC policy: every reader that hands records out verifies each batch (Kafka's consumer default,
``check.crcs=true``) and names where a corrupt one is; the opt-out returns the bytes as they are.
(The ``damaged`` fixture is in tests/conftest.py; the Spark source's case is in tests/spark.)"""

from __future__ import annotations

import subprocess
import sys

import pytest

import compactlog
from compactlog.consumer import SnapshotConsumer
from compactlog.errors import CorruptRecordError

WHERE = r"t-0: batch at offset 1 is corrupt .*\(t-0/00000000000000000000\.log position \d+\)"


def test_the_api_refuses_a_corrupt_batch_and_names_it(damaged):
    with compactlog.open(damaged) as cl:
        got = []
        with pytest.raises(CorruptRecordError, match=WHERE):
            for r in cl.consume("t", from_beginning=True):
                got.append(r.value)
        assert got == [b"value-0"]  # what came before the damage was served, nothing after it
        assert [r.value for r in cl.consume("t", partition=0, offset=2)] == [b"value-2"]


def test_check_crcs_false_returns_the_bytes_as_stored(damaged):
    with compactlog.open(damaged) as cl:
        assert [r.value for r in cl.consume("t", from_beginning=True, check_crcs=False)] == \
            [b"value-0", b"value-0", b"value-2"]


def test_the_compacted_view_is_checked_too(damaged):
    with compactlog.open(damaged) as cl:
        with pytest.raises(CorruptRecordError, match=WHERE):
            list(cl.consume("t", from_beginning=True, read_compacted=True))


def test_the_follower_raises_lasting_corruption_and_can_opt_out(damaged):
    consumer = SnapshotConsumer(damaged, "t", start="earliest")
    with pytest.raises(CorruptRecordError, match=WHERE):
        for _ in range(100):
            consumer.poll()
    relaxed = SnapshotConsumer(damaged, "t", start="earliest", check_crcs=False)
    assert [r.value for r in relaxed.poll()] == [b"value-0", b"value-0", b"value-2"]


def test_the_console_consumer_prints_an_error_not_the_corrupt_value(damaged):
    out = subprocess.run([sys.executable, "-m", "compactlog", "consume", "--data-dir", str(damaged), "--topic", "t",
                          "--from-beginning"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert out.stdout.splitlines() == ["value-0"]
    assert "Error: t-0: batch at offset 1 is corrupt" in out.stderr and "Traceback" not in out.stderr


def test_the_console_consumer_can_opt_out_as_kafkas_does(damaged):
    for follow in ([], ["--timeout-ms", "200"]):
        out = subprocess.run([sys.executable, "-m", "compactlog", "consume", "--data-dir", str(damaged), "--topic", "t",
                              "--from-beginning", "--consumer-property", "check.crcs=false", *follow],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.splitlines() == ["value-0", "value-0", "value-2"]
    bad = subprocess.run([sys.executable, "-m", "compactlog", "consume", "--data-dir", str(damaged), "--topic", "t",
                          "--consumer-property", "fetch.min.bytes=1"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "unknown consumer property fetch.min.bytes" in bad.stderr
