"""The command line's error surface: what a user can get wrong is an ``Error: ...`` naming it (exit 1, or 2
for usage), never a traceback; a refused command leaves the data directory as it was; a bug says so
(exit 3); Ctrl-C exits 130 and a closed pipe 141, quietly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

import compactlog
from compactlog.cli import main
from compactlog.cli.common import CompactLogGroup
from compactlog.errors import InvalidRecordError

SEGMENT = "0" * 20


@pytest.fixture
def data(tmp_path) -> Path:
    """A data directory with topic ``t`` (1 partition, 3 records) and compacted topic ``c``."""
    d = tmp_path / "data"
    with compactlog.open(d) as cl:
        cl.create_topic("t", 1)
        cl.create_topic("c", 1, {"cleanup.policy": "compact"})
        cl.produce_batch("t", [(b"k%d" % i, b"v%d" % i) for i in range(3)])
    return d


def snapshot(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()} if d.exists() else {}


def cli(*args: str, input: str | bytes | None = None):
    return CliRunner().invoke(main, list(args), input=input)


def refused(data: Path, *args: str, code: int, message: str, input: str | bytes | None = None):
    """Run a command that must fail with ``message`` and leave ``data`` byte for byte as it was."""
    before = snapshot(data)
    res = cli(*[a.replace("DATA", str(data)) for a in args], input=input)
    assert res.exit_code == code, res.output
    assert message.replace("DATA", str(data)) in res.output
    assert "Traceback" not in res.output
    assert snapshot(data) == before, "a refused command changed the data directory"
    return res


# --- consume ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("args, code, message", [
    (["--partition", "0", "--offset", "abc"], 2,
     "Error: Invalid value for '--offset': 'abc' is not an offset: give a number (0 or more), earliest or latest"),
    (["--partition", "0", "--offset", "-5"], 2,
     "Error: Invalid value for '--offset': '-5' is not an offset: give a number (0 or more), earliest or latest"),
    (["--offset", "1"], 2, "Error: --offset needs --partition"),
    (["--partition", "0", "--offset", "1", "--from-beginning"], 2, "Error: --from-beginning and --offset cannot be given together"),
    (["--partition", "0", "--offset", "99"], 1, "Error: offset 99 is out of range for t-0 (0..3)"),
    (["--max-messages", "-1"], 2, "Error: Invalid value for '--max-messages': -1 is not in the range x>=0."),
    (["--partition", "-1"], 2, "Error: Invalid value for '--partition': -1 is not in the range x>=0."),
    (["--partition", "7"], 1, "Error: Partition 7 of topic 't' does not exist (the topic has 1)."),
    (["--timeout-ms", "-5"], 2, "Error: Invalid value for '--timeout-ms': -5 is not in the range x>=-1."),
    (["--timeout-ms", "soon"], 2, "Error: Invalid value for '--timeout-ms': 'soon' is not a valid integer."),
    (["--property", "print.key=yes"], 2, "Error: Invalid value for '--property': print.key must be true or false, got 'yes'"),
    (["--property", "print.keys=true"], 2, "Error: Invalid value for '--property': unknown consumer property print.keys (known: "),
    (["--property", "print.key"], 2, "Error: Invalid value for '--property': expected key=value, got 'print.key'"),
    (["--property", "key.separator=\\"], 2, "Error: Invalid value for '--property': key.separator=\\: bad escape"),
])
def test_consume_refuses(data, args, code, message):
    refused(data, "consume", "--data-dir", "DATA", "--topic", "t", *args, code=code, message=message)


def test_consume_names_an_unknown_topic_whether_it_follows_or_not(data):
    refused(data, "consume", "--data-dir", "DATA", "--topic", "nope", code=1, message="Error: Topic 'nope' does not exist.")
    refused(data, "consume", "--data-dir", "DATA", "--topic", "nope", "--timeout-ms", "100", code=1,
            message="Error: Topic 'nope' does not exist in DATA.")


def test_consume_offset_takes_its_three_forms(data):
    base = ["consume", "--data-dir", str(data), "--topic", "t", "--partition", "0"]
    assert cli(*base, "--offset", "2").stdout == "v2\n"
    assert cli(*base, "--offset", "earliest").stdout == "v0\nv1\nv2\n"
    assert cli(*base, "--offset", "latest").stdout == ""


# --- produce ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("args, stdin, code, message", [
    (["--compression-codec", "gzip", "--compression-level", "99"], "a\n", 1,
     "Error: Invalid value 99 for configuration compression.gzip.level: Value must be between 1 and 9 or equal to -1"),
    (["--compression-codec", "lz4", "--compression-level", "0"], "a\n", 1,
     "Error: Invalid value 0 for configuration compression.lz4.level: Value must be at least 1"),
    (["--compression-codec", "zstd", "--compression-level", "23"], "a\n", 1,
     "Error: Invalid value 23 for configuration compression.zstd.level: Value must be no more than 22"),
    (["--compression-level", "3"], "a\n", 2,
     "Error: Invalid value for '--compression-level': the none codec has no levels (gzip, lz4 and zstd have)"),
    (["--compression-codec", "snappy", "--compression-level", "3"], "a\n", 2, "the snappy codec has no levels"),
    (["--compression-codec", "brotli"], "a\n", 2, "Error: Invalid value for '--compression-codec': 'brotli' is not one of"),
    (["--property", "parse.headers=true"], b"ok:1\ttrue\n\xff\xfe:x\tv\n", 1,
     "Error: Header key on line number 2 is not valid UTF-8: '\\xff\\xfe'"),
    (["--property", "parse.headers=true"], "h:1 no delimiter\n", 1,
     "Error: No headers delimiter found on line number 1: 'h:1 no delimiter'"),
    (["--property", "parse.key=maybe"], "a\n", 2, "Error: Invalid value for '--property': parse.key must be true or false, got 'maybe'"),
    (["--property", "parse.headers=1"], "a\n", 2, "Error: Invalid value for '--property': parse.headers must be true or false, got '1'"),
    (["--property", "ignore.error=perhaps"], "a\n", 2, "ignore.error must be true or false, got 'perhaps'"),
    (["--property", "parse.keys=true"], "a\n", 2, "Error: Invalid value for '--property': unknown producer property parse.keys (known: "),
    (["--property", "parse.key=true", "--property", "key.separator="], "a\n", 2,
     "Error: Invalid value for '--property': key.separator must not be empty"),
    (["--property", "parse.headers=true", "--property", "headers.delimiter="], "a\n", 2, "headers.delimiter must not be empty"),
    (["--property", "parse.key=true", "--property", "key.separator=\\x"], "a\n", 2,
     "Error: Invalid value for '--property': key.separator=\\x: bad escape (truncated \\xXX escape)"),
    (["--batch-size", "-1"], "a\n", 2, "Error: Invalid value for '--batch-size': -1 is not in the range x>=0."),
    (["--batch-size", "16k"], "a\n", 2, "Error: Invalid value for '--batch-size': '16k' is not a valid integer."),
    ([], "x" * 2_000_000 + "\n", 1, "Error: The record batch size in the append to t-0 is"),
])
def test_produce_refuses_and_stores_nothing(data, args, stdin, code, message):
    refused(data, "produce", "--data-dir", "DATA", "--topic", "t", *args, input=stdin, code=code, message=message)


def test_produce_names_an_unknown_topic_and_a_keyless_record_on_a_compacted_one(data):
    refused(data, "produce", "--data-dir", "DATA", "--topic", "nope", input="a\n", code=1,
            message="Error: Topic 'nope' does not exist.")
    refused(data, "produce", "--data-dir", "DATA", "--topic", "c", input="keyless\n", code=1,
            message="Error: Compacted topic cannot accept message without key in topic partition c-0.")


def test_batch_size_zero_is_one_record_per_batch_as_in_kafka(data):
    res = cli("produce", "--data-dir", str(data), "--topic", "t", "--batch-size", "0", input="a\nb\nc\n")
    assert res.exit_code == 0, res.output
    out = cli("dump-log", "--files", str(data / "t-0" / f"{SEGMENT}.log")).output
    assert out.count("count: 1 ") == 3


def test_separators_keep_non_ascii_characters_and_take_escapes(data):
    res = cli("produce", "--data-dir", str(data), "--topic", "c", "--property", "parse.key=true",
              "--property", "key.separator=→", input="k→v\n")
    assert res.exit_code == 0, res.output
    out = cli("consume", "--data-dir", str(data), "--topic", "c", "--from-beginning", "--property", "print.key=true",
              "--property", "key.separator=\\u2192").stdout
    assert out == "k→v\n"


def test_a_property_is_one_name_and_value_kept_as_typed(data):
    """Each --property is one name=value, as Kafka's console tools read them: a comma or a space is a
    separator like any other, and '=' may appear in the value."""
    res = cli("produce", "--data-dir", str(data), "--topic", "c", "--property", "parse.key=true",
              "--property", "key.separator=,", input="k1,a,b\n")
    assert res.exit_code == 0, res.output
    res = cli("produce", "--data-dir", str(data), "--topic", "c", "--property", "parse.key=true",
              "--property", "key.separator= ", input="k2 x=y\n")
    assert res.exit_code == 0, res.output
    out = cli("consume", "--data-dir", str(data), "--topic", "c", "--from-beginning", "--property", "print.key=true",
              "--property", "key.separator= = ").stdout
    assert out == "k1 = a,b\nk2 = x=y\n"


# --- topics -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("args, code, message", [
    (["--create", "--delete", "--topic", "t"], 2,
     "Error: Command must include exactly one action: --create, --delete, --list, --describe or --alter (got --create and --delete)"),
    ([], 2, "Error: Command must include exactly one action: --create, --delete, --list, --describe or --alter"),
    (["--create"], 2, "Error: --create needs --topic"),
    (["--delete"], 2, "Error: --delete needs --topic"),
    (["--describe", "--topic", "t", "--partitions", "3"], 2, "Error: --partitions only goes with --create, not --describe"),
    (["--delete", "--topic", "t", "--config", "retention.ms=1"], 2, "Error: --config only goes with --create, not --delete"),
    (["--create", "--topic", "u", "--partitions", "0"], 1, "Error: The partitions must be greater than 0"),
    (["--create", "--topic", "u", "--partitions", "-3"], 1, "Error: The partitions must be greater than 0"),
    (["--alter", "--topic", "t", "--partitions", "-3"], 1, "Error: The partitions must be greater than 0"),
    (["--create", "--topic", "u", "--replication-factor", "0"], 1,
     "Error: The replication factor must be between 1 and 32767 inclusive"),
    (["--create", "--topic", "u", "--partitions", "9" * 5000], 2,
     "Error: Invalid value for '--partitions': '" + "9" * 50 + "'... (5000 characters) is not in the range"),
    (["--create", "--topic", "u", "--partitions", "2147483647"], 1,  # max.broker.partitions, no directory made
     "Error: Cannot create topic 'u' with 2147483647 "
     "partitions: the data directory holds 2 partitions and max.broker.partitions is 10000."),
    (["--alter", "--topic", "t", "--partitions", "2147483647"], 1,
     "Error: Cannot grow topic 't' to 2147483647 partitions"),
    (["--create", "--topic", "u", "--partitions", "٣"], 2, "Error: Invalid value for '--partitions': '٣' is not a valid integer."),
    (["--create", "--topic", "u", "--partitions", "many"], 2, "Error: Invalid value for '--partitions': 'many' is not a valid integer."),
    (["--create", "--topic", "u", "--replication-factor", "3"], 1,  # the broker's answer, in Kafka's words
     "Error: Unable to replicate the partition 3 time(s): The target replication factor of 3 cannot be reached "
     "because only 1 broker(s) are registered."),
    (["--create", "--topic", "u", "--config", "retention.ms"], 2,
     "Error: Invalid value for '--config': 'retention.ms': Invalid topic config: all configs to be added must be in "
     "the format \"key=val\"."),
    (["--create", "--topic", "u", "--config", "a=b=c"], 2, "Invalid topic config"),
    (["--create", "--topic", "u", "--config", "retention.ms="], 2, "Invalid topic config"),
    (["--create", "--topic", "u", "--config", "=5"], 2, "Invalid topic config"),
    (["--create", "--topic", "u", "--config", "cleanup.policy=compacted"], 1,
     "Error: Invalid value compacted for configuration cleanup.policy: String must be one of: compact, delete"),
    (["--create", "--topic", "t"], 1, "Error: Topic 't' already exists."),
    (["--create", "--topic", "prices€"], 1,
     "Error: Topic name \"prices€\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"),
    (["--create", "--topic", "a" * 250], 1, "Error: Topic name is illegal, it can't be longer than 249 characters"),
    (["--create", "--topic", ".."], 1, "Error: Topic name cannot be \".\" or \"..\""),
    (["--describe", "--topic", "nope"], 1, "Error: Topic 'nope' does not exist as expected"),
    (["--delete", "--topic", "nope"], 1, "Error: Topic 'nope' does not exist as expected"),
    (["--alter", "--topic", "nope", "--partitions", "2"], 1, "Error: Topic 'nope' does not exist as expected"),
    (["--list", "--if-exists"], 2, "Error: --if-exists only goes with --alter, --delete or --describe"),
])
def test_topics_refuses(data, args, code, message):
    refused(data, "topics", "--data-dir", "DATA", *args, code=code, message=message)


def test_if_exists_makes_a_missing_topic_no_error(data):
    for action in (["--delete"], ["--describe"], ["--alter", "--partitions", "2"]):
        res = cli("topics", "--data-dir", str(data), *action, "--topic", "nope", "--if-exists")
        assert res.exit_code == 0 and res.output == "", (action, res.output)


def test_each_config_flag_is_one_name_and_value_commas_included(data):
    """kafka-topics' --config takes the value whole; kafka-configs' --add-config splits on commas, except
    inside [...], whose brackets are dropped."""
    assert cli("topics", "--data-dir", str(data), "--create", "--topic", "both",
               "--config", "cleanup.policy=compact,delete", "--config", "retention.ms=5000").exit_code == 0
    with compactlog.open(data) as cl:
        assert cl.describe_topic("both").config.overrides == {"cleanup.policy": "compact,delete", "retention.ms": "5000"}
    res = cli("configs", "--data-dir", str(data), "--alter", "--topic", "t",
              "--add-config", "cleanup.policy=[compact,delete],retention.ms=7000")
    assert res.exit_code == 0, res.output
    with compactlog.open(data) as cl:
        assert cl.describe_topic("t").config.overrides == {"cleanup.policy": "compact,delete", "retention.ms": "7000"}
    refused(data, "configs", "--data-dir", "DATA", "--alter", "--topic", "t", "--add-config",
            "cleanup.policy=compact,delete", code=2,
            message="Error: Invalid value for '--add-config': expected key=value, got 'delete'")
    refused(data, "configs", "--data-dir", "DATA", "--alter", "--topic", "t", "--add-config", "retention.ms=1=2",
            code=2, message="Error: Invalid value for '--add-config': expected key=value, got 'retention.ms=1=2'")


def test_topics_refuses_a_name_that_collides_after_dots_become_underscores(data):
    assert cli("topics", "--data-dir", str(data), "--create", "--topic", "a_b").exit_code == 0
    refused(data, "topics", "--data-dir", "DATA", "--create", "--topic", "a.b", code=1,
            message="Error: Topic 'a.b' collides with existing topic: a_b")


def test_a_mistyped_data_dir_is_an_error_not_a_new_directory(tmp_path):
    missing = tmp_path / "dta"
    for args in (["topics", "--list"], ["topics", "--describe"], ["consume", "--topic", "t"], ["clean"],
                 ["configs", "--describe", "--topic", "t"], ["compaction-status", "--topic", "t"]):
        res = cli(args[0], "--data-dir", str(missing), *args[1:])
        assert res.exit_code == 2 and f"Error: Invalid value for '--data-dir': Directory '{missing}' does not exist." in res.output
    assert not missing.exists()
    assert cli("topics", "--data-dir", str(missing), "--create", "--topic", "t").exit_code == 0  # --create makes it


def test_help_says_which_commands_make_a_missing_data_dir():
    """serve and topics --create make it; no command's help points at a --create it does not have."""
    ctx = click.Context(main)
    for name in main.list_commands(ctx):
        cmd = main.get_command(ctx, name)
        flags = {o for p in getattr(cmd, "params", ()) for o in getattr(p, "opts", ())}
        for p in getattr(cmd, "params", ()):
            if "--data-dir" in getattr(p, "opts", ()):
                text = " ".join((p.help or "").split())
                assert "--create" not in text or "--create" in flags, (name, text)
                if name in ("serve", "topics"):
                    assert text.endswith(f"{'serve' if name == 'serve' else '--create'} makes it if missing."), text


def test_serve_makes_a_missing_data_dir_as_its_help_says(tmp_path):
    missing = tmp_path / "new" / "data"
    proc = subprocess.Popen([sys.executable, "-m", "compactlog", "serve", "--data-dir", str(missing), "--override",
                             "listeners=PLAINTEXT://127.0.0.1:0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        import select

        ready, _, _ = select.select([proc.stdout], [], [], 60)  # the line comes once it accepts connections
        line = proc.stdout.readline().decode() if ready else ""
        assert "listening on PLAINTEXT://127.0.0.1:" in line, proc.stderr.read1().decode() if not line else line
        assert missing.is_dir()
    finally:
        proc.terminate()
        proc.wait(60)


def test_data_dir_must_be_a_directory(tmp_path):
    (tmp_path / "file").write_text("x")
    res = cli("topics", "--data-dir", str(tmp_path / "file"), "--list")
    assert res.exit_code == 2 and "is a file." in res.output
    res = cli("topics", "--data-dir", "", "--create", "--topic", "t")
    assert res.exit_code == 2 and "Error: Invalid value for '--data-dir': must name a directory, not be empty" in res.output
    res = cli("topics", "--data-dir", str(tmp_path / "file" / "sub"), "--create", "--topic", "t")
    assert res.exit_code == 1 and f"Error: cannot use {tmp_path / 'file' / 'sub'} as a data directory: Not a directory" in res.output


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_data_dir_is_a_storage_error(data):
    modes = {p: p.stat().st_mode for p in [data, *data.rglob("*")]}
    for p in modes:
        p.chmod(modes[p] & ~0o222)
    try:
        res = cli("topics", "--data-dir", str(data), "--list")
    finally:
        for p, mode in modes.items():
            p.chmod(mode)
    assert res.exit_code == 1 and f"Error: cannot use {data} as a data directory" in res.output


def test_garbled_topic_metadata_names_the_file(data):
    (data / "__topics" / "t.json").write_text("{garbled")
    res = refused(data, "topics", "--data-dir", "DATA", "--describe", code=1,
                  message="Error: topic metadata file __topics/t.json in DATA is not valid JSON")
    assert "restore it from a backup or rewrite it" in res.output  # removing it would give the topic broker defaults


def test_server_properties_with_a_bad_value_names_it(data, tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("log.retention.ms=abc\n")
    refused(data, "topics", "--data-dir", "DATA", "--list", "--server-properties", str(props), code=1,
            message="Error: Invalid value abc for configuration log.retention.ms: Not a number of type LONG")
    refused(data, "topics", "--data-dir", "DATA", "--list", "--server-properties", str(tmp_path / "nope.properties"),
            code=2, message="Error: Invalid value for '--server-properties': File ")


def test_a_locked_data_dir_is_named(data):
    with compactlog.open(data):
        res = cli("topics", "--data-dir", str(data), "--list")
    assert res.exit_code == 1
    assert f"Error: Failed to acquire lock on file .lock in {data}. A compactlog process is already using this data directory." in res.output


# --- configs ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("args, code, message", [
    (["--alter", "--add-config", "retention.ms"], 2, "Error: Invalid value for '--add-config': expected key=value, got 'retention.ms'"),
    (["--alter", "--add-config", "retention.ms=1,segment.ms"], 2, "expected key=value, got 'segment.ms'"),
    (["--alter"], 2, "Error: --alter needs --add-config or --delete-config"),
    (["--alter", "--describe"], 2, "Error: Command must include exactly one action: --alter or --describe (got --alter and --describe)"),
    ([], 2, "Error: Command must include exactly one action: --alter or --describe"),
    (["--describe", "--add-config", "retention.ms=1"], 2, "Error: --add-config and --delete-config only go with --alter"),
    (["--alter", "--add-config", "retention.ms=1", "--all"], 2, "Error: --all only goes with --describe"),
    (["--alter", "--add-config", "cleanup.policy=compacted"], 1,
     "Error: Invalid value compacted for configuration cleanup.policy: String must be one of: compact, delete"),
    (["--alter", "--add-config", "retention.ms=soon"], 1,
     "Error: Invalid value soon for configuration retention.ms: Not a number of type LONG"),
    (["--alter", "--add-config", "segmentbytes=1"], 1, "Error: Unknown topic config name: segmentbytes"),
    (["--alter", "--delete-config", "nosuch"], 1, "Error: Invalid config(s): nosuch"),
    (["--entity-type", "brokers", "--describe"], 2,
     "Error: Invalid value for '--entity-type': 'brokers' is not one of 'topics', 'users'."),
])
def test_configs_refuses(data, args, code, message):
    refused(data, "configs", "--data-dir", "DATA", "--topic", "t", *args, code=code, message=message)


def test_configs_names_an_unknown_topic(data):
    for action in (["--describe"], ["--alter", "--add-config", "retention.ms=1"]):
        refused(data, "configs", "--data-dir", "DATA", "--topic", "nope", *action, code=1,
                message="Error: Topic 'nope' does not exist.")


# --- dump-log -----------------------------------------------------------------------------------------

def dump(*paths: Path | str):
    return cli("dump-log", "--files", ",".join(map(str, paths)), "--print-data-log")


def test_dump_log_refuses_what_is_not_a_segment_file(tmp_path):
    (tmp_path / f"{SEGMENT}.log").mkdir()
    cases = {
        tmp_path: f"Error: {tmp_path} is a directory; --files takes .log, .index, .timeindex and .txnindex files",
        tmp_path / f"{SEGMENT}.log": "is a directory",
        tmp_path / "missing.log": f"Error: {tmp_path / 'missing.log'} does not exist",
        tmp_path / "notes.txt": "Error: notes.txt is not a .log, .index, .timeindex or .txnindex file",
        tmp_path / "prices.log": f"Error: {tmp_path / 'prices.log'}: a segment file's name starts with its base offset "
                                 f"(as in {SEGMENT}.log)",
        tmp_path / "x.index": "a segment file's name starts with its base offset (as in 00000000000000000000.index)",
    }
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "prices.log").write_text("x")
    (tmp_path / "x.index").write_bytes(b"")
    for path, message in cases.items():
        res = dump(path)
        assert res.exit_code == 1 and message in res.output and "Traceback" not in res.output, res.output
    for files in ("", ",", " "):
        res = cli("dump-log", "--files", files)
        assert res.exit_code == 2 and "Error: Invalid value for '--files': expected a comma-separated list" in res.output


def test_dump_log_names_a_file_name_the_system_refuses(tmp_path):
    res = dump(tmp_path / ("x" * 5000 + ".log"))
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    assert res.stderr.startswith("Error: '") and "(5" in res.stderr and res.stderr.endswith(": File name too long\n")


def test_verify_names_a_topic_it_does_not_find(data):
    refused(data, "verify", "--data-dir", "DATA", "--topic", "nope", code=1,
            message="Error: Topic 'nope' does not exist in DATA.")


def test_dump_log_names_garbage_short_and_torn_files(tmp_path):
    garbage = tmp_path / f"{SEGMENT}.log"
    garbage.write_bytes(bytes(range(7, 107)))
    res = dump(garbage)
    assert res.exit_code == 1 and res.output.endswith(
        f"Error: {garbage}: no whole record batch: the first claims 252711198 bytes, the file has 100 "
        "(not a log segment, or one torn inside its first batch)\n")
    garbage.write_bytes(b"\0" * 8 + b"\0\0\0\x01" + b"\0" * 50)
    res = dump(garbage)
    assert res.exit_code == 1 and "not a Kafka log segment: no record batch at position 0 (batch at" in res.output
    assert "has an impossible length 1" in res.output
    garbage.write_bytes(b"\0" * 8 + b"\0\0\0\x31" + b"\0" * 4 + b"\x07" + b"\0" * 48)
    res = dump(garbage)
    assert res.exit_code == 1 and "not a Kafka log segment: no record batch at position 0 (magic byte 7" in res.output
    short = tmp_path / "00000000000000000005.log"
    short.write_bytes(b"\1\2\3")
    res = dump(short)
    assert res.exit_code == 1 and "the file's 3 bytes are fewer than a batch header's 17" in res.output
    assert "Traceback" not in res.output


def test_dump_log_of_an_empty_segment_prints_kafkas_header_only(tmp_path):
    empty = tmp_path / "00000000000000000042.log"
    empty.write_bytes(b"")
    res = dump(empty)
    assert res.exit_code == 0 and res.output == f"Dumping {empty}\nLog starting offset: 42\n"


def test_dump_log_names_a_torn_index_and_a_torn_tail(data):
    seg = data / "t-0" / f"{SEGMENT}.log"
    torn = seg.parent / "torn" / seg.name
    torn.parent.mkdir()
    torn.write_bytes(seg.read_bytes() + b"\0\0\0")
    res = dump(torn)
    assert res.exit_code == 0 and res.output.endswith(f"Found 3 invalid bytes at the end of {SEGMENT}.log\n")
    for suffix, entry in ((".index", 8), (".timeindex", 12)):
        idx = torn.with_suffix(suffix)
        idx.write_bytes(b"\0" * (entry + 5))
        res = dump(idx)
        assert res.exit_code == 1 and (f"Error: {idx}: {entry + 5} bytes is not a whole number of {entry}-byte index "
                                       "entries (a torn index; the log rebuilds it when the partition is opened)") in res.output
    res = dump(torn)  # the log next to torn indexes still dumps: they are only shortcuts
    assert res.exit_code == 0 and "baseOffset: 0 lastOffset: 2 count: 3" in res.output


# --- clean, compact-topic, compaction-status ----------------------------------------------------------

@pytest.mark.parametrize("args, code, message", [
    (["clean", "--topic", "nope"], 1, "Error: Topic 'nope' does not exist."),
    (["compact-topic", "--topic", "nope"], 1, "Error: Topic 'nope' does not exist."),
    (["compact-topic", "--topic", "c", "--partition", "-1"], 2, "Error: Invalid value for '--partition': -1 is not in the range x>=0."),
    (["compact-topic", "--topic", "c", "--partition", "5"], 1, "Error: Partition 5 of topic 'c' does not exist (the topic has 1)."),
    (["compact-topic"], 2, "Error: Missing option '--topic'."),
    (["compaction-status", "--topic", "nope"], 1, "Error: Topic 'nope' does not exist."),
])
def test_housekeeping_commands_refuse(data, args, code, message):
    refused(data, args[0], "--data-dir", "DATA", *args[1:], code=code, message=message)


# --- spark: argument checks only, all before a Spark session would start -----------------------------

@pytest.fixture
def no_spark(monkeypatch):
    import compactlog.spark.session

    def fail(*_a, **_k):
        raise AssertionError("a refused command must not start Spark")

    monkeypatch.setattr(compactlog.spark.session, "spark_session", fail)


@pytest.mark.parametrize("args, code, message", [
    (["export", "--topic", "nope", "--output", "OUT"], 1, "Error: Topic 'nope' does not exist."),
    (["export", "--topic", "t", "--output", "DATA"], 2,
     "Error: Invalid value for '--output': 'DATA' would replace the data directory 'DATA' or part of it"),
    (["export", "--topic", "t", "--output", "DATA/.."], 2, "would replace the data directory"),
    (["export", "--topic", "t", "--output", "DATA/t-0"], 2, "would replace the data directory"),
    (["export", "--topic", "t", "--output", "DATA/__topics"], 2, "would replace the data directory"),
    (["export", "--topic", "t", "--output", "OUT", "--format", "xml"], 2, "Error: Invalid value for '--format': 'xml' is not one of"),
    (["recompress", "--topic", "t", "--compression.type", "gzip", "--compression.gzip.level", "99"], 1,
     "Error: Invalid value 99 for configuration compression.gzip.level: Value must be between 1 and 9 or equal to -1"),
    (["recompress", "--topic", "t", "--compression.type", "gzip", "--compression.zstd.level", "3"], 2,
     "Error: --compression.zstd.level goes with --compression.type zstd, not gzip"),
    (["recompress", "--topic", "t", "--compression.type", "brotli"], 2, "Error: Invalid value for '--compression.type': 'brotli'"),
    (["recompress", "--topic", "nope", "--compression.type", "zstd"], 1, "Error: Topic 'nope' does not exist."),
    (["recompress", "--topic", "t"], 2, "Error: Missing option '--compression.type'."),
    (["advise", "--topic", "t", "--sample-bytes", "10"], 2, "Error: Invalid value for '--sample-bytes': 10 is not in the range x>=65536."),
    (["advise", "--topic", "t", "--min-compress-mbps", "-1"], 2, "Error: Invalid value for '--min-compress-mbps': -1.0 is not in the range x>=0."),
    (["advise", "--topic", "t", "--chart", "OUT/missing/advice.png"], 2, "Error: Invalid value for '--chart': directory '"),
    (["advise", "--topic", "nope"], 1, "Error: Topic 'nope' does not exist."),
    (["compact", "--topic", "nope"], 1, "Error: Topic 'nope' does not exist."),
])
def test_spark_commands_check_arguments_before_starting_spark(data, tmp_path, no_spark, args, code, message):
    out = str(tmp_path / "out")
    args = [a.replace("OUT", out) for a in args]
    refused(data, "spark", args[0], "--data-dir", "DATA", *args[1:], code=code, message=message.replace("OUT", out))


def test_spark_export_may_write_into_a_new_directory_inside_the_data_dir(data):
    from compactlog.cli.spark import overwrites_data_dir

    assert not overwrites_data_dir(str(data / "exports" / "t"), str(data))
    assert not overwrites_data_dir(str(data.parent / "elsewhere"), str(data))
    assert overwrites_data_dir(str(data / "recovery-point-offset-checkpoint"), str(data))


def test_spark_data_dir_must_exist(tmp_path, no_spark):
    for sub in (["export", "--output", "x"], ["compact"], ["recompress", "--compression.type", "zstd"], ["advise"]):
        res = cli("spark", sub[0], "--data-dir", str(tmp_path / "nope"), "--topic", "t", *sub[1:])
        assert res.exit_code == 2 and "Error: Invalid value for '--data-dir': Directory" in res.output


# --- help and the group -------------------------------------------------------------------------------

def all_commands():
    out = [[]]
    ctx = click.Context(main)
    for name in main.list_commands(ctx):  # the group imports each command's module when it is looked up
        cmd = main.get_command(ctx, name)
        out.append([name])
        out += [[name, sub] for sub in getattr(cmd, "commands", {})]
    return out


@pytest.mark.parametrize("path", all_commands(), ids=lambda p: " ".join(p) or "compactlog")
def test_every_command_has_help(path):
    res = cli(*path, "--help")
    assert res.exit_code == 0 and res.output.startswith("Usage: ") and "Traceback" not in res.output


def test_group_help_documents_the_exit_statuses():
    out = cli("--help").output
    assert "Exit status:" in out
    for line in ("0    done", "1    error: the message says what was wrong (Error: ...)",
                 "2    usage: a flag or value the command does not take",
                 "3    a bug in compactlog: the traceback is printed; please report it",
                 "130  interrupted (Ctrl-C)", "141  standard output closed early (a pipe into head)"):
        assert line in out


def test_unknown_command_and_option_are_usage_errors():
    res = cli("frobnicate")
    assert res.exit_code == 2 and "Error: No such command 'frobnicate'." in res.output
    res = cli("topics", "--zookeeper", "localhost:2181", "--list")
    assert res.exit_code == 2 and "Error: No such option '--zookeeper'." in res.output


# --- the error surface itself -------------------------------------------------------------------------

def test_a_bug_prints_its_traceback_and_says_it_is_a_bug(data, monkeypatch):
    def broken(self):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(compactlog.CompactLog, "list_topics", broken)
    res = cli("topics", "--data-dir", str(data), "--list")
    assert res.exit_code == 3
    assert "Traceback (most recent call last):" in res.stderr and "ZeroDivisionError: division by zero" in res.stderr
    assert res.stderr.endswith(f"Error: this is a bug in compactlog {compactlog.__version__} (an unexpected "
                               "ZeroDivisionError); please report it with the traceback above.\n")


def test_a_bug_names_a_library_exception_with_its_module(data, monkeypatch):
    import zstandard

    def broken(self):
        raise zstandard.ZstdError("boom")

    monkeypatch.setattr(compactlog.CompactLog, "list_topics", broken)
    res = cli("topics", "--data-dir", str(data), "--list")
    kind = zstandard.ZstdError
    assert res.exit_code == 3 and f"(an unexpected {kind.__module__}.{kind.__qualname__});" in res.stderr


def test_ctrl_c_exits_130_without_a_traceback(data, monkeypatch):
    def interrupted(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(compactlog.CompactLog, "list_topics", interrupted)
    res = cli("topics", "--data-dir", str(data), "--list")
    assert res.exit_code == 130 and res.output == ""


def test_a_broken_pipe_that_is_not_standard_output_is_a_bug(data, monkeypatch):
    def broken(self):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(compactlog.CompactLog, "list_topics", broken)
    res = cli("topics", "--data-dir", str(data), "--list")  # the runner's standard output is a buffer: it cannot break
    assert res.exit_code == 3 and "(an unexpected BrokenPipeError)" in res.stderr


def test_the_group_covers_commands_without_their_own_handler():
    @click.group(cls=CompactLogGroup)
    def group():
        pass

    @group.command()
    def fails():
        raise InvalidRecordError("line 3 is bad")

    @group.command()
    def misused():
        raise click.UsageError("wrong")

    res = CliRunner().invoke(group, ["fails"])
    assert res.exit_code == 1 and res.output == "Error: line 3 is bad\n"
    res = CliRunner().invoke(group, ["misused"])
    assert res.exit_code == 2 and "Error: wrong" in res.output


# --- as a user runs it: real processes ----------------------------------------------------------------

def run(*args: str, input: bytes | None = None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compactlog", *args], input=input, capture_output=True, timeout=120, **kw)


@pytest.mark.parametrize("args, stdin, code, message", [
    (["consume", "--topic", "t", "--partition", "0", "--offset", "abc"], None, 2, "is not an offset"),
    (["produce", "--topic", "t", "--compression-codec", "gzip", "--compression-level", "99"], b"a\n", 1,
     "Error: Invalid value 99 for configuration compression.gzip.level"),
    (["produce", "--topic", "t", "--property", "parse.headers=true"], b"\xff:x\tv\n", 1,
     "Error: Header key on line number 1 is not valid UTF-8"),
    (["topics", "--create", "--topic", "t"], None, 1, "Error: Topic 't' already exists."),
])
def test_no_traceback_from_a_real_process(data, args, stdin, code, message):
    proc = run(args[0], "--data-dir", str(data), *args[1:], input=stdin)
    assert proc.returncode == code
    assert b"Traceback" not in proc.stderr and message.encode() in proc.stderr


def test_dump_log_of_garbage_in_a_real_process(tmp_path):
    (tmp_path / f"{SEGMENT}.log").write_bytes(os.urandom(300))
    proc = run("dump-log", "--files", str(tmp_path / f"{SEGMENT}.log"))
    assert proc.returncode == 1 and b"Traceback" not in proc.stderr and b"Error: " in proc.stderr


def test_a_bug_in_a_real_process_exits_3_with_its_traceback(data):
    code = ("import compactlog, sys; compactlog.CompactLog.list_topics = lambda self: 1 / 0; "
            "from compactlog.cli import main; sys.argv[0] = 'compactlog'; main()")
    proc = subprocess.run([sys.executable, "-c", code, "topics", "--data-dir", str(data), "--list"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3
    assert "Traceback (most recent call last):" in proc.stderr and "ZeroDivisionError" in proc.stderr
    assert proc.stderr.rstrip().splitlines()[-1].startswith("Error: this is a bug in compactlog")


def test_closed_standard_output_exits_141_quietly(data):
    with compactlog.open(data) as cl:
        cl.produce_batch("t", [(None, b"%d" % i * 20) for i in range(100_000)])
    for follow in ([], ["--timeout-ms", "200"]):
        proc = subprocess.Popen([sys.executable, "-m", "compactlog", "consume", "--data-dir", str(data), "--topic", "t",
                                 "--from-beginning", *follow], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdout.readline() == b"v0\n"
        proc.stdout.close()  # as head -1 does
        assert proc.wait(timeout=120) == 141
        assert proc.stderr.read() == b""


def test_ctrl_c_stops_a_following_consumer_with_130(data):
    proc = subprocess.Popen([sys.executable, "-m", "compactlog", "consume", "--data-dir", str(data), "--topic", "t",
                             "--from-beginning", "--timeout-ms", "-1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert [proc.stdout.readline() for _ in range(3)] == [b"v0\n", b"v1\n", b"v2\n"]
        time.sleep(0.5)  # following, with nothing new to print
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130
    assert out == b"" and b"Traceback" not in err


def test_a_topic_name_of_249_characters_works(data):
    name = "a" * 249  # Kafka's longest; its partition directories' names are up to 252 characters
    res = cli("topics", "--data-dir", str(data), "--create", "--topic", name, "--partitions", "11")
    assert res.exit_code == 0, res.output
    assert cli("produce", "--data-dir", str(data), "--topic", name, input="x\n").exit_code == 0
    assert cli("consume", "--data-dir", str(data), "--topic", name, "--from-beginning").stdout == "x\n"
    assert name in cli("topics", "--data-dir", str(data), "--list").output
    assert cli("topics", "--data-dir", str(data), "--delete", "--topic", name).exit_code == 0


# --- failures from below the command line ------------------------------------------------------------

def test_server_properties_that_is_not_utf8_is_read_as_java_reads_it(data, tmp_path):
    props = tmp_path / "server.properties"
    props.write_bytes(b"# caf\xe9\nlog.retention.ms=1000\n")  # ISO-8859-1, as Java's Properties.load reads it
    res = cli("topics", "--data-dir", str(data), "--list", "--server-properties", str(props))
    assert res.exit_code == 0, res.output


def test_a_serve_properties_file_works_for_data_dir_commands(data, tmp_path, caplog):
    """The same server.properties serves ``serve`` and the commands on its data directory: the server's own
    settings are known names there, and only a name nobody knows is warned about."""
    props = tmp_path / "server.properties"
    props.write_text("listeners=PLAINTEXT://127.0.0.1:9092\nsasl.enabled.mechanisms=PLAIN\nlog.retention.ms=1000\n"
                     "no.such.setting=1\n")
    with caplog.at_level("WARNING"):
        res = cli("topics", "--data-dir", str(data), "--list", "--server-properties", str(props))
    assert res.exit_code == 0, res.output
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert "no.such.setting" in warned
    assert "listeners" not in warned and "sasl.enabled.mechanisms" not in warned


@pytest.mark.parametrize("suffix", [".log", ".index", ".timeindex"])
def test_a_directory_in_place_of_a_segment_file_is_a_storage_error(data, suffix):
    path = data / "t-0" / f"{SEGMENT}{suffix}"
    path.unlink()
    path.mkdir()
    res = cli("consume", "--data-dir", str(data), "--topic", "t", "--from-beginning")
    assert res.exit_code == 1, res.output
    assert res.output.startswith("Error: ") and f"{SEGMENT}{suffix}" in res.output
