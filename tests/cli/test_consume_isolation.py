"""consume --isolation-level on a data directory: the embedded consumer, and the follower (--timeout-ms)
that reads another process's directory and must move on when a transaction commits there."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest
import txn_support as tx
from click.testing import CliRunner

import compactlog
from compactlog.cli import main
from compactlog.consumer import SnapshotConsumer
from compactlog.errors import InvalidRequestError


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    d = tmp_path_factory.mktemp("iso") / "data"
    return d, tx.build(d)


@pytest.mark.parametrize("isolation, want", [(None, tx.ALL), ("read_uncommitted", tx.ALL),
                                             ("read_committed", tx.COMMITTED_BEFORE)])
def test_consume_a_data_directory_by_isolation_level(built, isolation, want):
    d, _ = built
    flag = [] if isolation is None else ["--isolation-level", isolation]
    res = CliRunner().invoke(main, ["consume", "--data-dir", str(d), "--topic", tx.TOPIC, "--from-beginning", *flag])
    assert res.exit_code == 0, res.output
    assert res.stdout.encode().split() == want
    assert f"Processed a total of {len(want)} messages" in res.stderr


def test_an_unknown_isolation_level_is_a_usage_error_naming_the_flag(built):
    d, _ = built
    res = CliRunner().invoke(main, ["consume", "--data-dir", str(d), "--topic", tx.TOPIC, "--isolation-level", "dirty"])
    assert res.exit_code == 2
    assert "Invalid value for '--isolation-level': 'dirty' is not one of 'read_committed', 'read_uncommitted'" \
        in res.output


def test_the_embedded_api_reads_by_isolation_level(built):
    d, b = built
    with compactlog.open(d) as cl:
        assert [r.value for r in cl.consume(tx.TOPIC, from_beginning=True)] == tx.ALL
        assert [r.value for r in cl.consume(tx.TOPIC, from_beginning=True, isolation_level="read_committed")] \
            == tx.COMMITTED_BEFORE
        assert cl.end_offsets(tx.TOPIC) == {0: b.end}
        assert cl.end_offsets(tx.TOPIC, isolation_level="read_committed") == {0: b.lso}
        with pytest.raises(InvalidRequestError, match="isolation level must be one of"):
            cl.end_offsets(tx.TOPIC, isolation_level="committed")


def test_a_snapshot_consumer_stops_at_the_lso_and_reads_on_after_the_commit(tmp_path):
    d = tmp_path / "data"
    b = tx.build(d)
    with compactlog.open(d) as cl:  # another process's view: this one owns the directory
        follower = SnapshotConsumer(d, tx.TOPIC, 0, start="earliest", isolation_level="read_committed")
        latest = SnapshotConsumer(d, tx.TOPIC, 0, start="latest", isolation_level="read_committed")
        try:
            got = [r.value for r in follower.poll()]
            assert got == tx.COMMITTED_BEFORE
            assert follower.poll() == []
            assert latest.positions[0] == b.lso  # "latest" for read_committed: ListOffsets' LSO
            tx.commit_open(cl.partition(tx.TOPIC, 0))
            got += [r.value for r in follower.poll()]
            assert got == tx.COMMITTED_AFTER
            assert [r.value for r in latest.poll()] == tx.COMMITTED_AFTER[len(tx.COMMITTED_BEFORE):]
        finally:
            follower.close()
            latest.close()


def test_the_console_consumer_follows_a_commit_in_the_owning_process(tmp_path):
    d = tmp_path / "data"
    tx.build(d)
    with compactlog.open(d) as cl:
        proc = subprocess.Popen(
            [sys.executable, "-m", "compactlog", "consume", "--data-dir", str(d), "--topic", tx.TOPIC,
             "--from-beginning", "--timeout-ms", "3000", "--isolation-level", "read_committed"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        watchdog = threading.Timer(120, proc.kill)  # a hung consumer fails the test instead of hanging it
        watchdog.start()
        try:
            lines = [proc.stdout.readline().strip() for _ in tx.COMMITTED_BEFORE]
            assert lines == tx.COMMITTED_BEFORE
            tx.commit_open(cl.partition(tx.TOPIC, 0))
            lines += [proc.stdout.readline().strip() for _ in tx.COMMITTED_AFTER[len(tx.COMMITTED_BEFORE):]]
            rc = proc.wait(timeout=60)
        finally:
            watchdog.cancel()
    assert rc == 0, proc.stderr.read()
    assert lines == tx.COMMITTED_AFTER
    assert proc.stdout.read() == b""
