"""``transactions`` (kafka-transactions.sh) against a real ``compactlog serve``.

The served data directory is prepared through the embedded API before the server starts: topic
``hung`` holds, in each partition, a transaction opened an hour ago by a producer id the transaction
coordinator never handed out (so no coordinator will ever end it: a hanging transaction), between plain
records. Once the server runs, librdkafka's transactional producer commits one transaction (``done``)
and leaves another open with a long timeout (``live``, on ``live-0``): open, but not hanging, since its
coordinator holds that partition in the transaction.

Kafka's tables and column headers are checked, then ``find-hanging`` finds exactly the hanging ones,
``abort`` ends them (by first offset, and by producer id and epochs), after which a read_committed
consumer reads past where it stopped before. Bad flag combinations are refused in Kafka's words."""

from __future__ import annotations

import importlib.util
import time
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("confluent_kafka")

import compactlog  # noqa: E402
from compactlog.cli import main  # noqa: E402
from compactlog.records.batch import BatchInfo, build_batch  # noqa: E402

HUNG_PID = {0: 7001, 1: 7002}  # far above the ids the broker hands out
HOUR_AGO = int(time.time() * 1000) - 3_600_000
DEADLINE_S = 20.0


def _wire():
    spec = importlib.util.spec_from_file_location("_txn_cli_wire", Path(__file__).parents[1] / "server" / "wire.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _prepare(data_dir: Path) -> None:
    """hung-N: plain-before (offset 0), the hanging transaction's batch (offset 1), plain-after (2, 3)."""
    with compactlog.open(data_dir) as cl:
        cl.create_topic("hung", partitions=2)
        for p, pid in HUNG_PID.items():
            part = cl.partition("hung", p)
            part.append(build_batch([b"k"], [b"plain-before"], [HOUR_AGO]))
            info = BatchInfo(producer_id=pid, producer_epoch=3, base_sequence=0, is_transactional=True)
            part.append(build_batch([b"k"], [b"hanging"], [HOUR_AGO], info=info))
            part.append(build_batch([b"k", b"k"], [b"plain-after-0", b"plain-after-1"], [HOUR_AGO] * 2))
            assert part.last_stable_offset == 1


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    data = tmp_path_factory.mktemp("txn-cli") / "data"
    _prepare(data)
    wire = _wire()
    with wire.serving(data, {"transaction.state.log.num.partitions": "2", "offsets.topic.num.partitions": "2"}) as s:
        live = wire.committed_and_open_transaction(s.bootstrap)
        s.live_producer = live  # kept open (and referenced) for the module
        yield s


def txn(broker, *args: str, code: int = 0) -> str:
    res = CliRunner().invoke(main, ["transactions", "--bootstrap-server", broker.bootstrap, *args])
    assert res.exit_code == code, (args, res.output, res.exception)
    return res.output


def table(out: str) -> list[list[str]]:
    """Kafka's prettyPrintTable: each cell padded to its column's width, then a tab."""
    lines = out.splitlines()
    assert lines and all(line.endswith("\t") for line in lines), out
    return [[cell.strip() for cell in line.split("\t")[:-1]] for line in lines]


def error_line(res_output: str) -> str:
    (line,) = [line for line in res_output.splitlines() if line.startswith("Error:")]
    return line


def test_list_shows_every_transactional_id_with_its_state(broker):
    out = txn(broker, "list")
    rows = table(out)
    assert rows[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    states = {r[0]: r[3] for r in rows[1:]}
    assert states == {"done": "CompleteCommit", "live": "Ongoing"}
    assert {r[1] for r in rows[1:]} == {"1"} or len({r[1] for r in rows[1:]}) == 1
    header_width = len(out.splitlines()[0].split("\t")[0])
    assert header_width == max(len("TransactionalId"), *(len(r[0]) for r in rows[1:]))


def test_list_duration_filter_needs_list_transactions_v1(broker):
    res = CliRunner().invoke(main, ["transactions", "--bootstrap-server", broker.bootstrap, "list",
                                    "--duration-filter", "0"])
    if res.exit_code == 0:  # a broker answering v1: only transactions open longer than 0 ms
        assert [r[0] for r in table(res.output)[1:]] == ["live"]
    else:
        assert res.exit_code == 1
        assert error_line(res.output) == (
            "Error: Failed to list transactions: Duration filter can be set only when using API version 1 or higher. "
            "If client is connected to an older broker, do not specify duration filter or set duration filter to -1.. "
            "Enable debug logging for additional detail.")
    assert [r[0] for r in table(txn(broker, "list", "--duration-filter", "-1"))[1:]] == ["done", "live"]


def test_describe_an_ongoing_transaction(broker):
    rows = table(txn(broker, "describe", "--transactional-id", "live"))
    assert rows[0] == ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                       "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                       "TopicPartitions"]
    (row,) = rows[1:]
    assert row[1] == "live" and row[4] == "Ongoing" and row[5] == "600000" and row[8] == "live-0"
    assert abs(int(row[6]) - time.time() * 1000) < 120_000 and int(row[7]) >= 0
    (done,) = table(txn(broker, "describe", "--transactional-id", "done"))[1:]
    assert done[4] == "CompleteCommit" and done[8] == ""  # (its last transaction's start kept, as Kafka keeps it)


def test_describe_an_id_with_no_transaction_yet(broker):
    """After InitProducerId only: Empty, and the broker answers -1 for the start, which Kafka's tool
    prints as None (kio's reader refuses a negative time: the command reads it as a number)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "idle"})
    p.init_transactions(DEADLINE_S)
    (row,) = table(txn(broker, "describe", "--transactional-id", "idle"))[1:]
    assert row[1:] == ["idle", row[2], "0", "Empty", "60000", "None", "None", ""] and int(row[2]) >= 0


def test_describe_an_unknown_id_is_kafkas_error(broker):
    res = CliRunner().invoke(main, ["transactions", "--bootstrap-server", broker.bootstrap, "describe",
                                    "--transactional-id", "nobody"])
    assert res.exit_code == 1
    assert error_line(res.output) == (
        "Error: Failed to describe transaction state of transactional-id `nobody`: DescribeTransactions request "
        "for transactionalId `nobody` failed because the ID could not be found. Enable debug logging for "
        "additional detail.")


def test_describe_producers_shows_the_open_transaction(broker):
    rows = table(txn(broker, "describe-producers", "--topic", "hung", "--partition", "0"))
    assert rows[0] == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                       "CurrentTransactionStartOffset"]
    assert rows[1:] == [["7001", "3", "-1", "0", str(HOUR_AGO), "1"]]
    live = table(txn(broker, "describe-producers", "--topic", "live", "--partition", "0", "--broker-id", "1"))[1:]
    # done's data at 0, its COMMIT at 1: ended; live's open transaction from 2
    assert sorted(r[5] for r in live) == ["2", "None"]
    assert {r[2] for r in live} <= {"-1", "0"}


def test_describe_producers_of_a_missing_partition(broker):
    res = CliRunner().invoke(main, ["transactions", "--bootstrap-server", broker.bootstrap, "describe-producers",
                                    "--topic", "hung", "--partition", "9"])
    assert res.exit_code == 1
    assert error_line(res.output).startswith("Error: Failed to describe producers for partition hung-9 on leader: ")


def test_find_hanging_finds_only_the_hanging(broker):
    rows = table(txn(broker, "find-hanging", "--topic", "hung"))
    assert rows[0] == ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                       "LastTimestamp", "Duration(min)"]
    assert [r[:7] for r in rows[1:]] == [["hung", "0", "7001", "3", "-1", "1", str(HOUR_AGO)],
                                         ["hung", "1", "7002", "3", "-1", "1", str(HOUR_AGO)]]
    assert all(59 <= int(r[7]) <= 62 for r in rows[1:])
    # every partition of broker 1, any age: live's transaction is open too, but its coordinator holds live-0
    rows = table(txn(broker, "find-hanging", "--broker-id", "1", "--max-transaction-timeout", "0"))
    assert sorted((r[0], r[1], r[2]) for r in rows[1:]) == [("hung", "0", "7001"), ("hung", "1", "7002")]
    assert table(txn(broker, "find-hanging", "--topic", "live", "--max-transaction-timeout", "0"))[1:] == []
    # within the timeout: not a candidate
    assert table(txn(broker, "find-hanging", "--topic", "hung", "--partition", "0",
                     "--max-transaction-timeout", "120"))[1:] == []


@pytest.mark.parametrize("args, message", [
    (["find-hanging"], "The `find-hanging` command requires either --topic or --broker-id to limit the scope of "
                       "the search"),
    (["find-hanging", "--broker-id", "1", "--partition", "0"], "The --partition argument requires --topic to be "
                                                              "provided"),
    (["abort", "--topic", "hung", "--partition", "0"], "The transaction to abort must be identified either with "
     "--start-offset (for brokers on 3.0 or above) or with --producer-id, --producer-epoch, and "
     "--coordinator-epoch (for older brokers)"),
    (["abort", "--topic", "hung", "--partition", "0", "--producer-id", "7001"],
     "Missing required argument --producer-epoch"),
    (["abort", "--topic", "hung", "--partition", "0", "--producer-id", "7001", "--producer-epoch", "3"],
     "Missing required argument --coordinator-epoch"),
    (["abort", "--topic", "hung", "--partition", "0", "--start-offset", "2"],
     "Could not find any open transactions starting at offset 2 on partition hung-0"),
])
def test_refusals_in_kafkas_words(broker, args, message):
    res = CliRunner().invoke(main, ["transactions", "--bootstrap-server", broker.bootstrap, *args])
    assert res.exit_code == 1, res.output
    assert error_line(res.output) == f"Error: {message}"


def committed_values(broker, topic: str, partition: int) -> list[bytes]:
    """What a read_committed consumer reads of the partition, up to where it stops."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                  "isolation.level": "read_committed", "enable.partition.eof": True, "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        out, deadline = [], time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error() is not None:
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                return out
            out.append(m.value())
        raise AssertionError(f"no end of {topic}-{partition} within {DEADLINE_S} s: {out}")
    finally:
        c.close()


def test_abort_by_start_offset_lets_read_committed_past(broker):
    assert committed_values(broker, "hung", 0) == [b"plain-before"]
    assert txn(broker, "abort", "--topic", "hung", "--partition", "0", "--start-offset", "1") == ""
    assert committed_values(broker, "hung", 0) == [b"plain-before", b"plain-after-0", b"plain-after-1"]
    (row,) = table(txn(broker, "describe-producers", "--topic", "hung", "--partition", "0"))[1:]
    assert row[0] == "7001" and row[2] == "0" and row[5] == "None"
    assert [r[1] for r in table(txn(broker, "find-hanging", "--topic", "hung"))[1:]] == ["1"]


def test_abort_by_producer_and_epochs(broker):
    res = CliRunner().invoke(main, ["transactions", "--bootstrap-server", broker.bootstrap, "abort", "--topic", "hung",
                                    "--partition", "1", "--producer-id", "7002", "--producer-epoch", "2",
                                    "--coordinator-epoch", "-1"])
    assert res.exit_code == 1  # an epoch older than the producer's is fenced, as Kafka's partition fences it
    assert error_line(res.output).startswith(
        "Error: Failed to abort transaction AbortTransactionSpec(topicPartition=hung-1, producerId=7002, "
        "producerEpoch=2, coordinatorEpoch=0): WriteTxnMarkers request with AbortTransactionSpec(")
    assert txn(broker, "abort", "--topic", "hung", "--partition", "1", "--producer-id", "7002", "--producer-epoch",
               "3", "--coordinator-epoch", "-1") == ""
    assert committed_values(broker, "hung", 1) == [b"plain-before", b"plain-after-0", b"plain-after-1"]
    assert table(txn(broker, "find-hanging", "--topic", "hung", "--max-transaction-timeout", "0"))[1:] == []


def test_command_config_is_read(broker, tmp_path):
    conf = tmp_path / "client.properties"
    conf.write_text("security.protocol=PLAINTEXT\n")
    res = CliRunner().invoke(main, ["transactions", "--bootstrap-server", broker.bootstrap, "--command-config",
                                    str(conf), "list"])
    assert res.exit_code == 0 and res.output.startswith("TransactionalId"), res.output
    conf.write_text("security.protocol=CARRIER_PIGEON\n")
    res = CliRunner().invoke(main, ["transactions", "--bootstrap-server", broker.bootstrap, "--command-config",
                                    str(conf), "list"])
    assert res.exit_code == 2 and "security.protocol" in res.output


@pytest.mark.parametrize("args", [
    ["abort", "--topic", "t", "--partition", "\u0663", "--start-offset", "1"],
    ["abort", "--topic", "t", "--partition", "0", "--producer-id", "1", "--producer-epoch", "9" * 5000],
    ["find-hanging", "--topic", "t", "--max-transaction-timeout", "-3"],
    ["list", "--duration-filter", "soon"],
    ["describe"],
], ids=["arabic-digit", "5000-digits", "negative-timeout", "word", "missing-id"])
def test_a_bad_flag_is_one_line_from_a_real_process(args):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "compactlog", "transactions", "--bootstrap-server", "127.0.0.1:9",
                           *args], capture_output=True, timeout=60)
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert "Traceback" not in err and "int_max_str_digits" not in err
    errors = [line for line in err.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and len(errors[0]) < 400, err
    assert "--" in errors[0], err  # names the flag


def test_the_bootstrap_server_is_required_but_help_is_not():
    res = CliRunner().invoke(main, ["transactions", "list"])
    assert res.exit_code == 2 and error_line(res.output) == "Error: Missing option '--bootstrap-server'."
    res = CliRunner().invoke(main, ["transactions", "abort", "--help"])
    assert res.exit_code == 0 and "--start-offset" in res.output
