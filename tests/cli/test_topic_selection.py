"""kafka-topics' --topic outside --create is a regular expression the whole name must match (commas are
alternatives), so --list filters and --describe, --alter and --delete act on every match; --exclude-internal
leaves out __consumer_offsets. configs --alter with nothing to change is a usage
line. A number above a flag's range names both bounds (``x>=0`` alone would seem
to allow it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import compactlog
from compactlog.cli import main


@pytest.fixture
def data(tmp_path) -> Path:
    d = tmp_path / "data"
    with compactlog.open(d) as cl:
        for name in ("prices", "prices.eu", "pricesXeu", "orders", "__consumer_offsets"):
            cl.create_topic(name, 1)
    return d


def run(data: Path, *args: str):
    return CliRunner().invoke(main, ["topics", "--data-dir", str(data), *args])


def test_list_filters_by_the_pattern(data):
    assert run(data, "--list", "--topic", "orders").output.split() == ["orders"]
    assert run(data, "--list", "--topic", "prices.eu").output.split() == ["prices.eu", "pricesXeu"]
    assert run(data, "--list", "--topic", r"prices\.eu").output.split() == ["prices.eu"]
    assert run(data, "--list", "--topic", "orders, prices").output.split() == ["orders", "prices"]
    assert run(data, "--list", "--topic", "nothing.*").output == ""
    assert run(data, "--list", "--exclude-internal").output.split() == ["orders", "prices", "prices.eu", "pricesXeu"]


def test_describe_alter_and_delete_act_on_every_match(data):
    out = run(data, "--describe", "--topic", "pri.*", "--exclude-internal").output
    assert [line.split("\t")[0] for line in out.splitlines() if not line.startswith("\t")] == [
        "Topic: prices", "Topic: prices.eu", "Topic: pricesXeu"]
    assert run(data, "--alter", "--topic", "prices.eu", "--partitions", "2").exit_code == 0
    with compactlog.open(data) as cl:
        assert [len(cl.describe_topic(n).partitions) for n in ("prices", "prices.eu", "pricesXeu")] == [1, 2, 2]
    result = run(data, "--delete", "--topic", r"prices\..*")
    assert (result.exit_code, result.output) == (0, "Deleted topic prices.eu.\n")
    result = run(data, "--describe", "--topic", "nope.*")
    assert (result.exit_code, result.output) == (1, "Error: Topic 'nope.*' does not exist as expected\n")


def test_refusals_are_one_line(data):
    result = run(data, "--describe", "--topic", "x[")
    assert result.exit_code == 2
    assert "Error: Invalid value for '--topic': 'x[' is not a valid regular expression" in result.output
    result = run(data, "--delete", "--topic", "orders", "--exclude-internal")
    assert (result.exit_code, result.output.splitlines()[-1]) == (
        2, "Error: --exclude-internal only goes with --list or --describe")
    result = run(data, "--create", "--topic", "")
    assert (result.exit_code, result.output) == (1, "Error: Topic name is illegal, it can't be empty\n")


@pytest.mark.parametrize("args, message", [
    (["topics", "--create", "--topic", "t", "--partitions", "9" * 20],
     "Invalid value for '--partitions': '99999999999999999999' is not in the range -2147483648<=x<=2147483647."),
    (["topics", "--create", "--topic", "t", "--partitions", "3000000000"],
     "Invalid value for '--partitions': 3000000000 is not in the range -2147483648<=x<=2147483647."),
    (["consume", "--topic", "t", "--max-messages", "9" * 20],
     "Invalid value for '--max-messages': '99999999999999999999' is not in the range 0<=x<=2147483647."),
    (["consume", "--topic", "t", "--max-messages", "-" + "9" * 20],
     "Invalid value for '--max-messages': '-99999999999999999999' is not in the range x>=0."),
])
def test_a_number_above_the_range_names_the_upper_bound(data, args, message):
    result = CliRunner().invoke(main, [args[0], "--data-dir", str(data), *args[1:]])
    assert result.exit_code == 2
    assert result.output.splitlines()[-1] == "Error: " + message


@pytest.mark.parametrize("flags", [["--add-config", ""], ["--delete-config", ""], ["--delete-config", ",,"],
                                   ["--add-config", "", "--delete-config", " "]])
def test_configs_alter_with_nothing_to_change_is_a_usage_error(data, flags):
    """An empty --add-config reached librdkafka's 'expected non-empty list' ValueError over the wire (a
    traceback, exit 3); both ways it is now a usage line before anything is asked."""
    for target in (["--data-dir", str(data)], ["--bootstrap-server", "127.0.0.1:1"]):
        result = CliRunner().invoke(main, ["configs", *target, "--alter", "--topic", "orders", *flags])
        assert (result.exit_code, result.output.splitlines()[-1]) == (
            2, "Error: --alter needs a name=value in --add-config or a name in --delete-config"), result.output


def test_configs_describe_without_a_name_describes_every_topic(data):
    """kafka-configs --describe --entity-type topics without --entity-name describes each topic; it was refused."""
    assert CliRunner().invoke(main, ["configs", "--data-dir", str(data), "--alter", "--topic", "orders",
                                     "--add-config", "retention.ms=5"]).exit_code == 0
    result = CliRunner().invoke(main, ["configs", "--data-dir", str(data), "--describe", "--entity-type", "topics"])
    assert result.exit_code == 0, result.output
    heads = [line for line in result.output.splitlines() if not line.startswith("  ")]
    assert heads == [f"Dynamic configs for topic {t} are:" for t in
                     ("__consumer_offsets", "orders", "prices", "prices.eu", "pricesXeu")]
    assert "  retention.ms=5 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=5}" in result.output
    for args in (["--alter", "--add-config", "retention.ms=1"], ["--describe", "--topic", ""]):
        result = CliRunner().invoke(main, ["configs", "--data-dir", str(data), *args])
        assert (result.exit_code, result.output.splitlines()[-1]) == (2, "Error: Missing option '--topic' / '--entity-name'.")


def test_describe_report_flags(data):
    """kafka-topics' health-check flags: partition reports print partition lines only (none under-replicated
    or unavailable on one node; the ISR of 1 against min.insync.replicas), --topics-with-overrides the topic
    lines of topics with overrides."""
    run(data, "--create", "--topic", "strict", "--config", "min.insync.replicas=2")
    for flag in ("--under-replicated-partitions", "--unavailable-partitions"):
        result = run(data, "--describe", flag)
        assert (result.exit_code, result.output) == (0, "")
    under = run(data, "--describe", "--under-min-isr-partitions").output.splitlines()
    assert [line.split("\t")[1:3] for line in under] == [["Topic: strict", "Partition: 0"]]
    at = run(data, "--describe", "--at-min-isr-partitions", "--topic", "orders|strict").output.splitlines()
    assert [line.split("\t")[1] for line in at] == ["Topic: orders"]
    overridden = run(data, "--describe", "--topics-with-overrides").output.splitlines()
    assert [line.split("\t")[0] for line in overridden] == ["Topic: strict"]
    result = run(data, "--list", "--under-replicated-partitions")
    assert (result.exit_code, result.output.splitlines()[-1]) == (
        2, "Error: --under-replicated-partitions only goes with --describe")


def test_an_internal_topic_is_not_deleted(data):
    """Over a data directory --delete removed __consumer_offsets (a pattern such as '.*' matches it); the
    broker refuses it, and now so does the command, before deleting any other match."""
    for pattern in ("__consumer_offsets", ".*"):
        result = run(data, "--delete", "--topic", pattern)
        assert (result.exit_code, result.output) == (1, "Error: Topic '__consumer_offsets' is internal to the broker "
                                                        "(it holds consumer groups' state); it cannot be deleted.\n")
    assert "orders" in run(data, "--list").output.split()
