"""The command line with Kafka's flags: what it prints, and how it fails."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from compactlog.cli import main

PRICES = "p3:10\np5:7\np3:11\np6:25\np6:12\np5:14\np5:17\n"


@pytest.fixture
def run(tmp_path):
    runner = CliRunner()

    def invoke(*args: str, input: str | None = None, ok: bool = True):
        res = runner.invoke(main, [a.replace("DATA", str(tmp_path / "data")) for a in args], input=input)
        if ok:
            assert res.exit_code == 0, res.output
        return res

    return invoke


def test_walkthrough_commands(run, tmp_path):
    out = run("topics", "--data-dir", "DATA", "--create", "--topic", "latest-product-price", "--partitions", "1",
              "--config", "cleanup.policy=compact", "--config", "segment.ms=100").output
    assert out == "Created topic latest-product-price.\n"
    run("produce", "--data-dir", "DATA", "--topic", "latest-product-price", "--property", "parse.key=true",
        "--property", "key.separator=:", input=PRICES)
    out = run("consume", "--data-dir", "DATA", "--topic", "latest-product-price", "--from-beginning",
              "--property", "print.key=true", "--property", "key.separator=:").stdout
    assert out == PRICES
    out = run("consume", "--data-dir", "DATA", "--topic", "latest-product-price", "--partition", "0", "--offset", "5",
              "--property", "print.offset=true", "--property", "print.partition=true").stdout
    assert out == "Partition:0\tOffset:5\t14\nPartition:0\tOffset:6\t17\n"
    out = run("topics", "--data-dir", "DATA", "--describe", "--topic", "latest-product-price").output
    assert "PartitionCount: 1" in out and "Configs: cleanup.policy=compact,segment.ms=100" in out
    assert "LogEndOffset: 7" in out
    assert run("topics", "--data-dir", "DATA", "--list").output == "latest-product-price\n"
    out = run("configs", "--data-dir", "DATA", "--alter", "--topic", "latest-product-price",
              "--add-config", "compression.type=zstd,retention.ms=1000").output
    assert out == "Completed updating config for topic latest-product-price.\n"
    out = run("configs", "--data-dir", "DATA", "--describe", "--topic", "latest-product-price").output
    assert "compression.type=zstd" in out and "retention.ms=1000" in out
    out = run("configs", "--data-dir", "DATA", "--describe", "--topic", "latest-product-price", "--all").output
    assert "segment.bytes=1073741824" in out
    seg = tmp_path / "data" / "latest-product-price-0" / "00000000000000000000.log"
    out = run("dump-log", "--files", str(seg), "--print-data-log").output
    assert "baseOffset: 0 lastOffset: 6 count: 7" in out and "isvalid: true" in out
    assert "| offset: 2 CreateTime:" in out and "key: p3 payload: 11" in out
    idx = seg.with_suffix(".index")
    assert run("dump-log", "--files", str(idx)).output.startswith("Dumping")


def test_null_marker_makes_tombstones_and_null_literal_prints_them(run):
    run("topics", "--data-dir", "DATA", "--create", "--topic", "t", "--config", "cleanup.policy=compact")
    run("produce", "--data-dir", "DATA", "--topic", "t", "--property", "parse.key=true", "--property", "key.separator=:",
        "--property", "null.marker=NULL", input="a:1\na:NULL\n")
    out = run("consume", "--data-dir", "DATA", "--topic", "t", "--from-beginning", "--property", "print.key=true",
              "--property", "null.literal=<null>").stdout
    assert out == "a\t1\na\t<null>\n"


def test_headers_and_timestamps(run):
    run("topics", "--data-dir", "DATA", "--create", "--topic", "t")
    run("produce", "--data-dir", "DATA", "--topic", "t", "--property", "parse.headers=true", "--property", "parse.key=true",
        input="h1:x,h2:y\tk\tv\n")
    out = run("consume", "--data-dir", "DATA", "--topic", "t", "--from-beginning", "--property", "print.headers=true",
              "--property", "print.timestamp=true", "--property", "print.key=true").stdout
    ts, headers, key, value = out.rstrip("\n").split("\t")
    assert ts.startswith("CreateTime:") and headers == "h1:x,h2:y" and (key, value) == ("k", "v")


@pytest.mark.parametrize("args, stdin, message", [
    (["produce", "--data-dir", "DATA", "--topic", "t", "--property", "parse.key=true", "--property", "key.separator=:"],
     "ok:1\nno-separator\n", "Error: No key separator found on line number 2: 'no-separator'"),
    (["topics", "--data-dir", "DATA", "--create", "--topic", "bad/name"], None, "Error: Topic name \"bad/name\" is illegal"),
    (["topics", "--data-dir", "DATA", "--create", "--topic", "x", "--config", "retention.ms=soon"], None,
     "Error: Invalid value soon for configuration retention.ms: Not a number of type LONG"),
    (["topics", "--data-dir", "DATA", "--create", "--topic", "x", "--config", "segmentbytes=1"], None,
     "Error: Unknown topic config name: segmentbytes"),
    (["consume", "--data-dir", "DATA", "--topic", "nope"], None, "Error: Topic 'nope' does not exist."),
    (["produce", "--data-dir", "DATA", "--topic", "c"], "keyless\n",
     "Error: Compacted topic cannot accept message without key in topic partition c-0."),
])
def test_bad_input_is_a_clear_error_and_stores_nothing(run, args, stdin, message):
    run("topics", "--data-dir", "DATA", "--create", "--topic", "t")
    run("topics", "--data-dir", "DATA", "--create", "--topic", "c", "--config", "cleanup.policy=compact")
    res = run(*args, input=stdin, ok=False)
    assert res.exit_code == 1
    assert message in res.output
    assert run("consume", "--data-dir", "DATA", "--topic", "t", "--from-beginning").stdout == ""


def test_produce_cuts_batches_to_fit_a_topic_with_small_segments(run, tmp_path):
    """The console producer's 16 KB batches would all be refused by segment.bytes=1000; it knows the
    topic's limits and cuts batches that fit them, and a line too large for any batch is refused whole."""
    run("topics", "--data-dir", "DATA", "--create", "--topic", "t", "--config", "segment.bytes=1000")
    lines = "".join(f"k{i}:{i:03d}{'x' * 95}\n" for i in range(100))  # 10 KB
    run("produce", "--data-dir", "DATA", "--topic", "t", "--property", "parse.key=true", "--property", "key.separator=:",
        "--compression-codec", "lz4", input=lines)
    out = run("consume", "--data-dir", "DATA", "--topic", "t", "--from-beginning", "--property", "print.key=true",
              "--property", "key.separator=:").stdout
    assert out == lines
    segments = sorted((tmp_path / "data" / "t-0").glob("*.log"))
    assert len(segments) > 1
    out = run("dump-log", "--files", ",".join(map(str, segments))).output
    sizes = [int(line.split(" size: ")[1].split()[0]) for line in out.splitlines() if line.startswith("baseOffset:")]
    assert len(sizes) > 10 and max(sizes) <= 1000
    res = run("produce", "--data-dir", "DATA", "--topic", "t", input="a\n" + "b" * 2000 + "\nc\n", ok=False)
    assert res.exit_code == 1 and res.output == (
        "Error: Message batch size is 2070 bytes in append to partition t-0 which exceeds the maximum configured "
        "segment size of 1000. Record 1 alone makes a batch that large.\n")
    out = run("consume", "--data-dir", "DATA", "--topic", "t", "--from-beginning").stdout
    assert out == "".join(line.split(":", 1)[1] + "\n" for line in lines.splitlines())  # nothing of the refused input


def test_console_script_is_installed():
    out = subprocess.run([sys.executable, "-m", "compactlog", "--help"], capture_output=True, text=True, check=True).stdout
    for cmd in ("topics", "configs", "produce", "consume", "dump-log", "clean", "demo"):
        assert cmd in out


def test_every_command_has_help_and_a_readme_entry():
    from pathlib import Path

    readme = (Path(__file__).parents[2] / "README.md").read_text()
    ctx = click.Context(main)
    for name in main.list_commands(ctx):  # the group imports each command's module when it is looked up
        cmd = main.get_command(ctx, name)
        assert cmd.help and cmd.help.strip(), f"{name} has no help text"
        assert f"`{name}`" in readme, f"{name} is not documented in the README"
