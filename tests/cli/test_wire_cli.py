"""The commands with --bootstrap-server against a real ``compactlog serve``: the same flags, the same
output as over a data directory, the broker's refusals as ``Error: ...`` with exit status 1, and
consumer-groups (list, describe with lag, reset, delete)."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path
from types import ModuleType

import pytest
from click.testing import CliRunner

pytest.importorskip("confluent_kafka")

from compactlog.cli import main  # noqa: E402

PRICES = "p3:10\np5:7\np3:11\np6:25\np6:12\np5:14\np5:17\n"
KEYED = ("--property", "parse.key=true", "--property", "key.separator=:")
SHOWN = ("--property", "print.key=true", "--property", "key.separator=:", "--property", "print.partition=true",
         "--property", "print.offset=true")


def _wire() -> ModuleType:
    """tests/server/wire.py, loaded by path (several test directories have a conftest, and only
    tests/server's own tests put that directory on the path)."""
    spec = importlib.util.spec_from_file_location("_wire_cli_wire", Path(__file__).parents[1] / "server" / "wire.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with _wire().serving(tmp_path_factory.mktemp("wire-cli") / "data") as s:
        yield s


@pytest.fixture
def run(broker, tmp_path):
    runner = CliRunner()

    def invoke(*args: str, input: str | None = None, code: int = 0):
        argv = [broker.bootstrap if a == "BROKER" else str(tmp_path / "data") if a == "DATA" else a for a in args]
        res = runner.invoke(main, argv, input=input)
        assert res.exit_code == code, (argv, res.output, res.exception)
        return res

    return invoke


def test_topics(run, broker):
    out = run("topics", "--bootstrap-server", "BROKER", "--create", "--topic", "t1", "--partitions", "2",
              "--config", "cleanup.policy=compact").stdout
    assert out == "Created topic t1.\n"
    res = run("topics", "--bootstrap-server", "BROKER", "--create", "--topic", "t1", code=1)
    assert res.output.strip().endswith("Error: Topic 't1' already exists.")
    run("topics", "--bootstrap-server", "BROKER", "--create", "--topic", "t1", "--if-not-exists")
    assert "t1" in run("topics", "--bootstrap-server", "BROKER", "--list").stdout.split()
    lines = run("topics", "--bootstrap-server", "BROKER", "--describe", "--topic", "t1").stdout.splitlines()
    stored = (broker.data_dir / "t1-0" / "partition.metadata").read_text().split("topic_id:")[1].strip()
    assert lines[0] == f"Topic: t1\tTopicId: {stored}\tPartitionCount: 2\tReplicationFactor: 1\tConfigs: cleanup.policy=compact"
    assert lines[1] == "\tTopic: t1\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1\tLogStartOffset: 0\tLogEndOffset: 0"
    run("topics", "--bootstrap-server", "BROKER", "--alter", "--topic", "t1", "--partitions", "3")
    assert "PartitionCount: 3" in run("topics", "--bootstrap-server", "BROKER", "--describe", "--topic", "t1").stdout
    res = run("topics", "--bootstrap-server", "BROKER", "--alter", "--topic", "t1", "--partitions", "2", code=1)
    assert "Error: Topic 't1' has 3 partitions; partitions can only be added" in res.output
    res = run("topics", "--bootstrap-server", "BROKER", "--create", "--topic", "t2", "--replication-factor", "3", code=1)
    assert "only 1 broker(s) are registered" in res.output
    res = run("topics", "--bootstrap-server", "BROKER", "--create", "--topic", "t2", "--config", "segment.bytes=1", code=1)
    assert "Error: Invalid value 1 for configuration segment.bytes: Value must be at least 14" in res.output
    assert run("topics", "--bootstrap-server", "BROKER", "--delete", "--topic", "t1").stdout == "Deleted topic t1.\n"
    res = run("topics", "--bootstrap-server", "BROKER", "--delete", "--topic", "t1", code=1)
    assert "Error:" in res.output and "t1" not in run("topics", "--bootstrap-server", "BROKER", "--list").stdout.split()


def test_configs_print_as_they_do_locally(run):
    for target in (("--bootstrap-server", "BROKER"), ("--data-dir", "DATA")):
        run("topics", *target, "--create", "--topic", "c1")
        out = run("configs", *target, "--entity-type", "topics", "--entity-name", "c1", "--alter",
                  "--add-config", "retention.ms=1000,cleanup.policy=compact").stdout
        assert out == "Completed updating config for topic c1.\n"
    shown = [run("configs", *target, "--entity-name", "c1", "--describe").stdout
             for target in (("--bootstrap-server", "BROKER"), ("--data-dir", "DATA"))]
    assert shown[0] == shown[1]
    assert "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000}" in shown[0]
    every = run("configs", "--bootstrap-server", "BROKER", "--entity-name", "c1", "--describe", "--all").stdout
    assert "  segment.bytes=1073741824 sensitive=false synonyms={DEFAULT_CONFIG:segment.bytes=1073741824}" in every
    run("configs", "--bootstrap-server", "BROKER", "--entity-name", "c1", "--alter", "--delete-config", "retention.ms")
    res = run("configs", "--bootstrap-server", "BROKER", "--entity-name", "c1", "--alter", "--delete-config",
              "retention.ms", code=1)
    assert "Error: Invalid config(s): retention.ms" in res.output
    res = run("configs", "--bootstrap-server", "BROKER", "--entity-name", "c1", "--alter", "--add-config",
              "retention.ms=soon", code=1)
    assert "Error: Invalid value soon for configuration retention.ms: Not a number of type LONG" in res.output
    res = run("configs", "--bootstrap-server", "BROKER", "--entity-name", "nope", "--describe", code=1)
    assert "Error:" in res.output


def test_produce_and_consume_match_the_local_commands(run):
    outputs = []
    for target in (("--bootstrap-server", "BROKER"), ("--data-dir", "DATA")):
        run("topics", *target, "--create", "--topic", "prices", "--partitions", "3")
        run("produce", *target, "--topic", "prices", *KEYED, "--compression-codec", "zstd", input=PRICES)
        outputs.append(run("consume", *target, "--topic", "prices", "--from-beginning", *SHOWN).stdout)
    # murmur2 partitions, offsets and formatting alike; the wire interleaves partitions as fetches answer
    assert sorted(outputs[0].splitlines()) == sorted(outputs[1].splitlines())
    assert sorted(line.split(":", 4)[4] for line in outputs[0].splitlines()) == sorted(PRICES.split())
    _, partition, _, offset, _ = outputs[0].splitlines()[0].split(":", 4)
    out = run("consume", "--bootstrap-server", "BROKER", "--topic", "prices", "--partition", partition, "--offset", offset,
              "--max-messages", "1", *SHOWN).stdout
    assert out.splitlines() == [outputs[0].splitlines()[0]]
    res = run("consume", "--bootstrap-server", "BROKER", "--topic", "prices", "--partition", "0", "--offset", "99", code=1)
    assert "Error: offset 99 is out of range for prices-0" in res.output
    res = run("consume", "--bootstrap-server", "BROKER", "--topic", "nope", code=1)
    assert "Error: Topic 'nope' does not exist." in res.output
    # --timeout-ms follows the topic: nothing new arrives, so it ends after the wait
    began = time.monotonic()
    assert run("consume", "--bootstrap-server", "BROKER", "--topic", "prices", "--timeout-ms", "300").stdout == ""
    assert time.monotonic() - began < 10


def test_one_target_exactly(run, tmp_path):
    (tmp_path / "data").mkdir()
    for args in ((), ("--data-dir", "DATA", "--bootstrap-server", "BROKER")):
        res = run("topics", *args, "--list", code=2)
        assert "exactly one of --data-dir" in res.output
    res = run("consume", "--data-dir", "DATA", "--topic", "t", "--group", "g", code=2)
    assert "--group needs --bootstrap-server" in res.output
    res = run("topics", "--bootstrap-server", "localhost", "--list", code=2)
    assert "expected HOST:PORT" in res.output


def test_an_unreachable_broker_is_an_error(run, monkeypatch):
    from compactlog.cli import wire

    monkeypatch.setattr(wire, "CONNECT_TIMEOUT_S", 1.0)
    res = run("topics", "--bootstrap-server", "127.0.0.1:1", "--list", code=1)
    assert "Error: no broker answered at 127.0.0.1:1" in res.output


def _offsets(text: str) -> dict[tuple[str, str], tuple[str, ...]]:
    """consumer-groups' table by (topic, partition), header checked."""
    lines = [line.split() for line in text.splitlines() if line.strip()]
    head = next(i for i, cols in enumerate(lines) if cols[0] == "GROUP")
    return {(cols[1], cols[2]): tuple(cols[3:]) for cols in lines[head + 1:]}


def test_consumer_groups(run, broker):
    run("topics", "--bootstrap-server", "BROKER", "--create", "--topic", "orders", "--partitions", "2")
    run("produce", "--bootstrap-server", "BROKER", "--topic", "orders", *KEYED, input=PRICES)
    first = run("consume", "--bootstrap-server", "BROKER", "--topic", "orders", "--group", "cache", "--from-beginning",
                "--property", "print.key=true", "--property", "key.separator=:").stdout
    assert sorted(first.split()) == sorted(PRICES.split())
    assert "cache" in run("consumer-groups", "--bootstrap-server", "BROKER", "--list").stdout.split()
    described = run("consumer-groups", "--bootstrap-server", "BROKER", "--describe", "--group", "cache")
    assert described.stderr == "Consumer group 'cache' has no active members.\n"  # the table alone on stdout
    table = _offsets(described.stdout)
    assert sum(int(cols[0]) for cols in table.values()) == 7  # committed = log end: everything read, lag 0
    assert all(cols[0] == cols[1] and cols[2] == "0" for cols in table.values())

    dry = run("consumer-groups", "--bootstrap-server", "BROKER", "--reset-offsets", "--group", "cache", "--topic", "orders",
              "--to-earliest")
    assert set(_offsets(dry.stdout).values()) == {("0",)}
    assert _offsets(run("consumer-groups", "--bootstrap-server", "BROKER", "--describe", "--group", "cache").stdout) == table
    run("consumer-groups", "--bootstrap-server", "BROKER", "--reset-offsets", "--group", "cache", "--topic", "orders",
        "--to-datetime", "2000-01-01T00:00:00.000", "--execute")
    again = run("consume", "--bootstrap-server", "BROKER", "--topic", "orders", "--group", "cache").stdout
    assert sorted(again.split()) == sorted(v.split(":")[1] for v in PRICES.split())  # read again from the start
    latest = run("consumer-groups", "--bootstrap-server", "BROKER", "--reset-offsets", "--group", "cache",
                 "--topic", "orders:0", "--to-offset", "1000", "--execute").stdout
    assert list(_offsets(latest)) == [("orders", "0")]  # kept within the partition: its log end offset
    assert _offsets(latest)[("orders", "0")] == (table[("orders", "0")][1],)

    res = run("consumer-groups", "--bootstrap-server", "BROKER", "--describe", "--group", "nobody", code=1)
    assert "Error: Consumer group 'nobody' does not exist." in res.output
    res = run("consumer-groups", "--bootstrap-server", "BROKER", "--delete", "--group", "nobody", code=1)
    assert res.stderr == "Error: Consumer group 'nobody' does not exist.\n"  # as --describe names it
    out = run("consumer-groups", "--bootstrap-server", "BROKER", "--delete", "--group", "cache").stdout
    assert out == "Deletion of requested consumer groups ('cache') was successful.\n"
    assert "cache" not in run("consumer-groups", "--bootstrap-server", "BROKER", "--list").stdout.split()


def test_reset_to_a_datetime_without_a_zone_is_utc_wherever_the_command_runs(run, broker, monkeypatch):
    """Records an hour apart from 2026-01-01T00:00Z; the command runs in UTC-05:00. A zoneless date-time
    is UTC, as Kafka's tool reads it (once it was local time here, five records later); a zone given is kept."""
    from confluent_kafka import Producer

    new_year, hour = 1_767_225_600_000, 3_600_000
    run("topics", "--bootstrap-server", "BROKER", "--create", "--topic", "hourly")
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(8):
        p.produce("hourly", key=b"k", value=str(i).encode(), timestamp=new_year + i * hour)
    assert p.flush(30) == 0
    monkeypatch.setenv("TZ", "EST+05")
    time.tzset()
    try:
        def reset_to(when: str) -> str:
            out = run("consumer-groups", "--bootstrap-server", "BROKER", "--reset-offsets", "--group", "zoned",
                      "--topic", "hourly", "--to-datetime", when).stdout
            return _offsets(out)[("hourly", "0")][0]

        assert reset_to("2026-01-01T02:00:00.000") == "2"
        assert reset_to("2026-01-01T02:00:00.000Z") == "2"
        assert reset_to("2026-01-01T02:00:00.000+01:00") == "1"
        assert reset_to("2026-01-01T01:30:00.000") == "2"  # the first record at or after it
        assert reset_to("2026-01-02T00:00:00.000") == "8"  # none that recent: the log end
        res = run("consumer-groups", "--bootstrap-server", "BROKER", "--reset-offsets", "--group", "zoned",
                  "--topic", "hourly", "--to-datetime", "2026-01-01", code=2)
        assert "is not a date and time like 2026-01-01T00:00:00.000" in res.output
    finally:
        monkeypatch.undo()
        time.tzset()


def test_an_active_group_is_described_with_its_member_and_not_reset(run, broker):
    from confluent_kafka import Consumer

    run("topics", "--bootstrap-server", "BROKER", "--create", "--topic", "live")
    member = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "busy", "client.id": "cache-loader",
                       "auto.offset.reset": "earliest"})
    assigned = []
    member.subscribe(["live"], on_assign=lambda c, tps: assigned.extend(tps))
    try:
        deadline = time.monotonic() + 20
        while not assigned and time.monotonic() < deadline:
            member.poll(0.1)
        assert assigned, "the consumer never got its partition"
        out = run("consumer-groups", "--bootstrap-server", "BROKER", "--describe", "--group", "busy").stdout
        row = _offsets(out)[("live", "0")]
        assert row[0] == "-" and row[2] == "-"  # nothing committed yet: no current offset, no lag
        assert row[-1] == "cache-loader" and row[-3].startswith("cache-loader-")
        res = run("consumer-groups", "--bootstrap-server", "BROKER", "--reset-offsets", "--group", "busy",
                  "--topic", "live", "--to-latest", "--execute", code=1)
        assert res.stderr == ("Error: Assignments can only be reset if the group 'busy' is inactive, but the current "
                              "state is Stable.\n")
        members = run("consumer-groups", "--bootstrap-server", "BROKER", "--describe", "--group", "busy", "--members",
                      "--verbose").stdout.splitlines()
        assert members[0].split() == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
        assert members[1].split()[0] == "busy" and members[1].split()[3:] == ["cache-loader", "1", "live(0)"]
        state = run("consumer-groups", "--bootstrap-server", "BROKER", "--describe", "--group", "busy",
                    "--state").stdout.splitlines()
        assert [c.strip() for c in state[0].split("  ") if c.strip()] == [
            "GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
        assert state[1].split()[0] == "busy" and state[1].split()[-2:] == ["Stable", "1"]
        assert f"{broker.bootstrap}  (" in state[1]
        res = run("consumer-groups", "--bootstrap-server", "BROKER", "--delete", "--group", "busy", code=1)
        assert res.stderr == "Error: Consumer group 'busy' is not empty.\n"  # not librdkafka's 'Broker: ...'
        res = run("consumer-groups", "--bootstrap-server", "BROKER", "--delete-offsets", "--group", "busy",
                  "--topic", "live", code=1)  # refused per partition: not 'Request succeed', as Kafka's tool
        assert "Request succeed" not in res.output and res.stderr.startswith("Error: some partitions were refused")
        assert res.stdout.splitlines()[1].split()[:3] == ["live", "0", "Error:"]
    finally:
        member.close()


def test_user_errors_over_the_wire_are_one_line(run):
    """kafka-topics' and the console producer's refusals, not tracebacks (librdkafka raises its own
    exceptions for a negative partition count and an oversized record)."""
    res = run("topics", "--bootstrap-server", "BROKER", "--create", "--topic", "neg", "--partitions", "-3", code=1)
    assert res.stderr == "Error: The partitions must be greater than 0\n"
    for action in (["--delete"], ["--describe"], ["--alter", "--partitions", "3"]):
        res = run("topics", "--bootstrap-server", "BROKER", *action, "--topic", "nope", code=1)
        assert res.stderr == "Error: Topic 'nope' does not exist as expected\n", action
    res = run("topics", "--bootstrap-server", "BROKER", "--create", "--topic", "huge", "--partitions", "2147483647", code=1)
    assert res.stderr.startswith("Error: Invalid NewTopic(huge): num_partitions out of expected range 1..100000")
    run("topics", "--bootstrap-server", "BROKER", "--create", "--topic", "both", "--config", "cleanup.policy=compact,delete")
    res = run("topics", "--bootstrap-server", "BROKER", "--alter", "--topic", "both", "--partitions", "2147483647", code=1)
    assert res.stderr.startswith("Error: Invalid NewPartitions(both): new_total_cnt out of expected range 1..100000")
    assert "Configs: cleanup.policy=compact,delete" in run("topics", "--bootstrap-server", "BROKER", "--describe",
                                                           "--topic", "both").stdout
    res = run("produce", "--bootstrap-server", "BROKER", "--topic", "both", input="x" * (2 << 20) + "\n", code=1)
    assert res.stderr.startswith("Error: RecordTooLargeException: The message is 2097") and res.stderr.count("\n") == 1
    assert "bytes when serialized which is larger than 1048576" in res.stderr
    run("topics", "--bootstrap-server", "BROKER", "--create", "--topic", "small", "--config", "max.message.bytes=1000")
    res = run("produce", "--bootstrap-server", "BROKER", "--topic", "small", input="z" * 5000 + "\n", code=1)
    assert res.stderr == ("Error: RecordTooLargeException: The request included a message larger than the max message "
                          "size the server will accept (small-0 takes batches of at most 1000 bytes: "
                          "max.message.bytes).\n")
    res = run("produce", "--bootstrap-server", "BROKER", "--topic", "both", input="keyless\n", code=1)
    assert res.stderr == "Error: Compacted topic cannot accept message without key in topic partition both-0.\n"
    res = run("produce", "--bootstrap-server", "BROKER", "--topic", "a/b", input="v\n", code=1)
    assert res.stderr == ("Error: Topic name \"a/b\" is illegal, it contains a character other than ASCII "
                          "alphanumerics, '.', '_' and '-'\n")  # the rule broken, not librdkafka's 'Invalid topic'
    run("consume", "--bootstrap-server", "BROKER", "--topic", "both", "--group", "makes-offsets", "--max-messages", "0")
    res = run("produce", "--bootstrap-server", "BROKER", "--topic", "__consumer_offsets", input="v\n", code=1)
    assert res.stderr == "Error: Cannot append to internal topic __consumer_offsets\n"


def test_consumer_groups_reset_scenarios_export_and_from_file(run, tmp_path):
    run("topics", "--bootstrap-server", "BROKER", "--create", "--topic", "shift", "--partitions", "2")
    run("produce", "--bootstrap-server", "BROKER", "--topic", "shift", *KEYED, input=PRICES)
    for group in ("s1", "s2"):
        run("consume", "--bootstrap-server", "BROKER", "--topic", "shift", "--group", group, "--from-beginning")
    ends = {k: int(v[0]) for k, v in _offsets(run("consumer-groups", "--bootstrap-server", "BROKER", "--describe",
                                                  "--group", "s1").stdout).items()}
    reset = ("consumer-groups", "--bootstrap-server", "BROKER", "--reset-offsets")
    shifted = _offsets(run(*reset, "--group", "s1", "--all-topics", "--shift-by", "-2").stdout)
    assert shifted == {k: (str(max(0, e - 2)),) for k, e in ends.items()}
    assert _offsets(run(*reset, "--group", "s1", "--topic", "shift", "--shift-by", "99").stdout) == \
        {k: (str(e),) for k, e in ends.items()}  # kept within the log
    assert _offsets(run(*reset, "--group", "s1", "--topic", "shift", "--to-current").stdout) == \
        {k: (str(e),) for k, e in ends.items()}
    assert set(_offsets(run(*reset, "--group", "s1", "--topic", "shift", "--by-duration", "P1D").stdout).values()) == \
        {("0",)}  # every record is younger than a day
    ahead = _offsets(run(*reset, "--group", "s1", "--topic", "shift", "--by-duration", "-PT9223372036854775807S").stdout)
    assert ahead == {k: (str(e),) for k, e in ends.items()}  # no record is from the future: the log end
    exported = run(*reset, "--group", "s1", "--topic", "shift:0", "--to-offset", "1", "--export")
    assert exported.stdout == "shift,0,1\n" and "dry run" in exported.stderr  # the default, said
    assert run(*reset, "--group", "s1", "--topic", "shift:0", "--to-offset", "1", "--dry-run").stderr == ""
    exported = exported.stdout
    both = run(*reset, "--group", "s1", "--group", "s2", "--all-topics", "--to-earliest", "--export").stdout
    assert both.splitlines() == ["s1,shift,0,0", "s1,shift,1,0", "s2,shift,0,0", "s2,shift,1,0"]
    plan = tmp_path / "plan.csv"
    plan.write_text(exported)
    run(*reset, "--group", "s1", "--from-file", str(plan), "--execute")
    assert _offsets(run("consumer-groups", "--bootstrap-server", "BROKER", "--describe", "--group", "s1").stdout)[
        ("shift", "0")][0] == "1"
    plan.write_text("shift,0,x\n")
    res = run(*reset, "--group", "s1", "--from-file", str(plan), code=2)
    assert f"Error: Invalid value for '--from-file': {plan} line 1: 'x' is not a valid integer." in res.stderr

    run("consumer-groups", "--bootstrap-server", "BROKER", "--delete-offsets", "--group", "s2", "--topic", "shift:1")
    left = _offsets(run("consumer-groups", "--bootstrap-server", "BROKER", "--describe", "--group", "s2").stdout)
    assert list(left) == [("shift", "0")]
    listed = run("consumer-groups", "--bootstrap-server", "BROKER", "--list", "--state", "Empty").stdout.splitlines()
    assert listed[0].split() == ["GROUP", "STATE"] and {"s1 Empty", "s2 Empty"} <= {" ".join(r.split()) for r in listed}
    everything = run("consumer-groups", "--bootstrap-server", "BROKER", "--describe", "--all-groups",
                     "--timeout", "5000").stdout
    assert {"s1", "s2"} <= {line.split()[0] for line in everything.splitlines()[1:]}
    out = run("consumer-groups", "--bootstrap-server", "BROKER", "--delete", "--group", "s1", "--group", "s2").stdout
    assert out == "Deletion of requested consumer groups ('s1, s2') was successful.\n"


@pytest.mark.parametrize("args, message", [
    (["--describe"], "Option --describe takes one of these options: --group, --all-groups"),
    (["--describe", "--group", "g", "--all-groups"], "--group and --all-groups cannot be given together"),
    (["--describe", "--group", "g", "--members", "--state"], "takes at most one of these options"),
    (["--describe", "--group", "g", "--state", "stable"], "Option --describe does not take a value for --state"),
    (["--delete", "--group", "g", "--topic", "t"], "does not support topic-specific offset deletion"),
    (["--delete-offsets", "--group", "g"], "Option --delete-offsets takes the following options"),
    (["--reset-offsets", "--group", "g", "--to-earliest"], "One of the reset scopes should be defined"),
    (["--reset-offsets", "--group", "g", "--topic", "t", "--to-earliest", "--dry-run", "--execute"],
     "only accepts one of --execute and --dry-run"),
    (["--reset-offsets", "--group", "g", "--topic", "t", "--by-duration", "PT"], "is not a duration like PnDTnHnMnS"),
    (["--reset-offsets", "--group", "g", "--topic", "t:x", "--to-earliest"], "'t:x': 'x' is not a valid integer."),
    (["--list", "--state", "sleepy"], "Invalid state list 'sleepy'. Valid states are: PreparingRebalance"),
    (["--list", "--members"], "--members only goes with --describe"),
])
def test_consumer_groups_flag_rules(run, args, message):
    res = run("consumer-groups", "--bootstrap-server", "BROKER", *args, code=2)
    assert message in res.stderr and "Traceback" not in res.output


def test_a_replication_factor_above_one_is_refused_in_kafkas_words(run, broker):
    """The command's own check and the broker's CreateTopics answer say what Kafka's controller says."""
    from confluent_kafka.admin import AdminClient, NewTopic

    words = ("Unable to replicate the partition 3 time(s): The target replication factor of 3 cannot be reached "
             "because only 1 broker(s) are registered.")
    res = run("topics", "--bootstrap-server", "BROKER", "--create", "--topic", "rf3", "--replication-factor", "3", code=1)
    assert res.stderr == f"Error: {words}\n"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # kept: its futures die with it
    with pytest.raises(Exception) as refused:
        admin.create_topics([NewTopic("rf3", 1, 3)])["rf3"].result(30)
    assert refused.value.args[0].str() == words
