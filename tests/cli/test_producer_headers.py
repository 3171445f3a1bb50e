"""produce --property parse.headers=true reads headers as Kafka's console producer does: a pair without the
header key separator is refused (it was stored as a header with a null value), and so is a header key that
is the null marker, in the words of Kafka's line reader; a refused line leaves the topic as it was. A line
for an internal topic is refused as the broker refuses it."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import compactlog
from compactlog.cli import main

HEADERS = ("--property", "parse.headers=true", "--property", "parse.key=true", "--property", "key.separator=:",
           "--property", "null.marker=N")


@pytest.fixture
def data(tmp_path):
    d = tmp_path / "data"
    with compactlog.open(d) as cl:
        cl.create_topic("t", 1)
    return d


@pytest.mark.parametrize("line, message", [
    ("h1v1\tk:v", "No header key separator found in pair 'h1v1' on line number 2"),
    ("h1:v1,h2\tk:v", "No header key separator found in pair 'h2' on line number 2"),
    ("N:x\tk:v", "Header keys should not be equal to the null marker 'N' as they can't be null"),
])
def test_a_bad_header_pair_is_refused(data, line, message):
    result = CliRunner().invoke(main, ["produce", "--data-dir", str(data), "--topic", "t", *HEADERS],
                                input="h:ok\tk0:v0\n" + line + "\n")
    assert (result.exit_code, result.output.splitlines()[-1]) == (1, "Error: " + message)
    with compactlog.open(data) as cl:
        assert cl.describe_topic("t").partitions[0].log_end_offset == 0


def test_a_null_marker_value_is_a_null_header(data):
    result = CliRunner().invoke(main, ["produce", "--data-dir", str(data), "--topic", "t", *HEADERS], input="h:N\tk:v\n")
    assert result.exit_code == 0, result.output
    out = CliRunner().invoke(main, ["consume", "--data-dir", str(data), "--topic", "t", "--from-beginning",
                                    "--property", "print.headers=true", "--property", "print.key=true"]).stdout
    assert out == "h:null\tk\tv\n"


def test_an_internal_topic_is_refused_as_the_broker_refuses_it(tmp_path):
    """Over a data directory a keyed line was appended to __consumer_offsets, where the group coordinator
    reads its records; the broker refuses a produce to it, and now so does the command, in its words."""
    d = tmp_path / "data"
    with compactlog.open(d) as cl:
        cl.create_topic("__consumer_offsets", 1, {"cleanup.policy": "compact"})
    result = CliRunner().invoke(main, ["produce", "--data-dir", str(d), "--topic", "__consumer_offsets",
                                       "--property", "parse.key=true", "--property", "key.separator=:"], input="k:v\n")
    assert (result.exit_code, result.output) == (1, "Error: Cannot append to internal topic __consumer_offsets\n")
    with compactlog.open(d) as cl:
        assert cl.describe_topic("__consumer_offsets").partitions[0].log_end_offset == 0
