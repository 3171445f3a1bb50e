"""kafka-console-producer's producer flags over --bootstrap-server: --producer.config, --producer-property and
the named flags (--request-required-acks, --sync, --request-timeout-ms, --message-send-max-retries,
--retry-backoff-ms, --max-block-ms, --linger-ms) applied in Kafka's order of precedence, a name librdkafka
does not know refused by name, and the flags refused with --data-dir (there is no producer there)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("confluent_kafka")

from compactlog.cli import main  # noqa: E402
from compactlog.cli.producer_settings import producer_settings  # noqa: E402
from compactlog.errors import CompactLogError  # noqa: E402


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    spec = importlib.util.spec_from_file_location("_producer_flags_wire", Path(__file__).parents[1] / "server" / "wire.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with mod.serving(tmp_path_factory.mktemp("producer-flags") / "data") as s:
        yield s


def invoke(*args: str, input: str | None = None):
    return CliRunner().invoke(main, list(args), input=input)


def test_the_flags_are_applied_and_the_records_arrive(broker, tmp_path):
    conf = tmp_path / "producer.properties"
    conf.write_text("acks=1\nclient.id=console-producer\nkey.serializer=org.apache.kafka.common.serialization.StringSerializer\n")
    b = broker.bootstrap
    res = invoke("produce", "--bootstrap-server", b, "--topic", "flags", "--producer.config", str(conf),
                 "--producer-property", "compression.type=gzip", "--request-required-acks", "all", "--sync",
                 "--request-timeout-ms", "5000", "--message-send-max-retries", "2", "--retry-backoff-ms", "50",
                 "--max-block-ms", "10000", "--linger-ms", "0", input="one\ntwo\nthree\n")
    assert res.exit_code == 0, res.output
    res = invoke("produce", "--bootstrap-server", b, "--topic", "flags", "--request-required-acks", "0",
                 input="four\n")
    assert res.exit_code == 0, res.output
    out = invoke("consume", "--bootstrap-server", b, "--topic", "flags", "--from-beginning", "--max-messages", "4")
    assert out.stdout.split() == ["one", "two", "three", "four"]


@pytest.mark.parametrize("args, words", [
    (("--producer-property", "no.such.setting=1"), 'No such configuration property: "no.such.setting"'),
    (("--producer-property", "max.block.ms=soon"), "Invalid value 'soon' for configuration max.block.ms"),
    (("--producer-property", "linger.ms=-5"), "value -5 is outside allowed range 0..900000"),
])
def test_a_setting_that_cannot_be_honoured_is_named(broker, args, words):
    res = invoke("produce", "--bootstrap-server", broker.bootstrap, "--topic", "flags", *args, input="x\n")
    assert res.exit_code == 1 and words in res.stderr and len(res.stderr.splitlines()) == 1, res.output
    assert res.stderr.startswith("Error: ")


def test_the_flags_win_over_properties_which_win_over_the_file(tmp_path):
    conf = tmp_path / "p.properties"
    conf.write_text("acks=0\nlinger.ms=7\nretries=9\nmax.block.ms=5\n")
    settings, block = producer_settings(str(conf), {"acks": "1", "retries": "4"}, {"acks": "all"})
    assert (settings, block) == ({"acks": "all", "linger.ms": "7", "retries": "4"}, 5)
    with pytest.raises(CompactLogError, match="max.block.ms"):
        producer_settings(None, {"max.block.ms": "9" * 5000}, {})


@pytest.mark.parametrize("args", [("--sync",), ("--linger-ms", "5"), ("--producer-property", "acks=1")])
def test_the_producer_flags_need_a_broker(tmp_path, args):
    (tmp_path / "data").mkdir()
    res = invoke("produce", "--data-dir", str(tmp_path / "data"), "--topic", "t", *args, input="x\n")
    assert res.exit_code == 2 and "go with --bootstrap-server" in res.output


def test_consume_reports_its_count_on_standard_error(broker, tmp_path):
    """kafka-console-consumer ends with 'Processed a total of N messages' on standard error, the records alone
    on standard output; over a broker and over a data directory alike."""
    b = broker.bootstrap
    assert invoke("produce", "--bootstrap-server", b, "--topic", "counted", input="x\ny\n").exit_code == 0
    res = invoke("consume", "--bootstrap-server", b, "--topic", "counted", "--from-beginning", "--max-messages", "2")
    assert (res.exit_code, res.stdout, res.stderr) == (0, "x\ny\n", "Processed a total of 2 messages\n")
    (tmp_path / "data").mkdir()
    assert invoke("topics", "--data-dir", str(tmp_path / "data"), "--create", "--topic", "t").exit_code == 0
    res = invoke("consume", "--data-dir", str(tmp_path / "data"), "--topic", "t", "--from-beginning")
    assert (res.exit_code, res.stdout, res.stderr) == (0, "", "Processed a total of 0 messages\n")
    res = invoke("consume", "--data-dir", str(tmp_path / "data"), "--topic", "nope")
    assert (res.exit_code, res.stderr) == (1, "Error: Topic 'nope' does not exist.\n"), "a failure: its line alone"
