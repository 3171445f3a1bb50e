"""A value a user types is repeated by the message that refuses it, but a 5,000-character one is shown
by its head and its length (``errors.shown``), whatever path it came by: the embedded API, the command
line, the broker's config parser. The message still names what was refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import compactlog
from compactlog.cli import main
from compactlog.errors import CompactLogError, shown

LONG = "x" * 5000
DIGITS = "9" * 5000
MOST = 300  # characters a message may take with a 5,000-character value in it


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("long") / "data"
    with compactlog.open(d) as cl:
        cl.create_topic("t", 1)
    return d


def test_shown_keeps_short_values_whole_and_cuts_long_ones():
    assert shown("abc") == "'abc'" and shown("abc", "") == "abc" and shown(7) == "'7'"
    assert shown("y" * 200, "") == "y" * 200
    assert shown("y" * 201, "") == "y" * 50 + "... (201 characters)"
    assert shown("a\nb\x1b[2J") == "'a\\nb\\x1b[2J'"  # one line, and a terminal does not obey it


API_CASES = {
    "unknown config name": (lambda cl: cl.create_topic("u", 1, {LONG: "1"}), "Unknown topic config name: xxx"),
    "config value": (lambda cl: cl.create_topic("u", 1, {"segment.ms": DIGITS}),
                     "for configuration segment.ms: Not a number of type LONG"),
    "missing topic": (lambda cl: cl.describe_topic(LONG), "Topic 'xxx"),
    "missing partition": (lambda cl: cl.partition(LONG, 0), "does not exist"),
    "long topic name": (lambda cl: cl.create_topic(LONG, 1), "Topic name is illegal, it can't be longer than 249"),
    "illegal topic name": (lambda cl: cl.create_topic("!" * 249, 1), "is illegal, it contains a character"),
    "compression name": (lambda cl: cl.produce_batch("t", [(b"k", b"v")], compression=LONG),
                         "Unknown compression name: xxx"),
    "config to alter": (lambda cl: cl.alter_topic_config("t", set={LONG: "1"}), "Unknown topic config name: xxx"),
}


@pytest.mark.parametrize("case", list(API_CASES))
def test_the_embedded_api(data, case):
    call, words = API_CASES[case]
    with compactlog.open(data) as cl, pytest.raises(CompactLogError) as info:
        call(cl)
    message = str(info.value)
    assert words in message
    assert len(message) < MOST, message
    assert "characters)" in message


CLI_CASES = {
    "unknown config name": (["topics", "--data-dir", "DATA", "--create", "--topic", "u", "--config", f"{LONG}=1"],
                            "Unknown topic config name: xxx"),
    "config value": (["topics", "--data-dir", "DATA", "--create", "--topic", "u", "--config", f"retention.ms={DIGITS}"],
                     "for configuration retention.ms"),
    "missing topic": (["topics", "--data-dir", "DATA", "--describe", "--topic", LONG], "Topic 'xxx"),
    "long topic name": (["topics", "--data-dir", "DATA", "--create", "--topic", LONG], "Topic name is illegal"),
    "consume a missing topic": (["consume", "--data-dir", "DATA", "--topic", LONG, "--from-beginning"], "xxx"),
    "listener port": (["serve", "--data-dir", "DATA", "--override", f"listeners=PLAINTEXT://127.0.0.1:{DIGITS}"],
                      "for configuration listeners: port out of range"),
    "listener name": (["serve", "--data-dir", "DATA", "--override", f"listeners={LONG}://127.0.0.1:0"],
                      "No security protocol defined for listener XXX"),
    "producer property": (["produce", "--data-dir", "DATA", "--topic", "t", "--property", f"{LONG}=1"],
                          "unknown producer property xxx"),
    "consumer property": (["consume", "--data-dir", "DATA", "--topic", "t", "--consumer-property", f"{LONG}=1"],
                          "unknown consumer property xxx"),
    "listener host": (["serve", "--data-dir", "DATA", "--override", f"listeners=PLAINTEXT://{LONG}:0"],
                      "Socket server failed to bind to xxx"),
    "security protocol": (["serve", "--data-dir", "DATA", "--override", f"listener.security.protocol.map=PLAINTEXT:{LONG}"],
                          "Invalid security protocol `xxx"),
    "line without a key separator": (["produce", "--data-dir", "DATA", "--topic", "t", "--property", "parse.key=true"],
                                     "No key separator found on line number 1: 'xxx"),
    "reset to a date": (["consumer-groups", "--bootstrap-server", "127.0.0.1:1", "--reset-offsets", "--group", "g",
                         "--all-topics", "--to-datetime", LONG], "xxx"),
    "override": (["serve", "--data-dir", "DATA", "--override", LONG], "expected NAME=VALUE, got 'xxx"),
    "broker config value": (["serve", "--data-dir", "DATA", "--override", f"log.retention.ms={DIGITS}"],
                            "for configuration log.retention.ms: Not a number of type LONG"),
}


@pytest.mark.parametrize("case", list(CLI_CASES))
def test_the_command_line(data, case):
    args, words = CLI_CASES[case]
    res = CliRunner().invoke(main, [a.replace("DATA", str(data)) for a in args], input=LONG + "\n")
    assert res.exit_code in (1, 2), res.output
    assert "Traceback" not in res.output
    [line] = [ln for ln in res.output.splitlines() if ln.startswith("Error")]
    assert words in line
    assert len(line) < MOST, line
    assert "(5000 characters)" in line or "(5022 characters)" in line


def test_a_listener_that_cannot_be_bound_is_one_line(data):
    """A port in use, or a host nothing resolves, is the user's to fix: Kafka's words, exit 1, no traceback."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for listener, why in ((f"127.0.0.1:{port}", "address already in use"),
                              ("nosuchhost.invalid:0", "Socket server failed to bind to nosuchhost.invalid:0")):
            res = CliRunner().invoke(main, ["serve", "--data-dir", str(data), "--override",
                                            f"listeners=PLAINTEXT://{listener}"])
            assert res.exit_code == 1 and "Traceback" not in res.output, res.output
            assert res.output.startswith("Error: Socket server failed to bind to ") and why in res.output, res.output
