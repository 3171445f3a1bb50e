"""``compactlog log-dirs``: Kafka's ``kafka-log-dirs.sh``, against a running broker.

``--describe`` asks each broker (all of the cluster's, or those of ``--broker-list``) for its log
directories (DescribeLogDirs) and prints what Kafka's tool prints: two lines, then one JSON line with
each directory's partitions, their size in bytes, how far a future replica lags and whether it is one.
``--topic-list`` keeps the partitions of those topics in the output, as the tool filters. The JSON keys
come in the order Kafka's tool writes them; partitions are sorted by topic and partition number
(Kafka's tool leaves them in hash order).

librdkafka's admin client has no DescribeLogDirs, so the request is written here with the protocol's
schemas (kio) over a connection of ours (``sasl_client.connect``: TLS and SASL as ``--command-config``
says); the broker list comes from the same Metadata the other wire commands read.
"""

from __future__ import annotations

import json
from typing import Any

import click

from ..errors import CompactLogError
from .client_properties import command_config_option
from .common import host_ports, kafka_errors, parse_number

TIMEOUT_S = 30.0
MAX_RESPONSE = 100 * 1024 * 1024  # a bigger answer is not a broker's


def _ids(text: str, flag: str) -> set[int]:
    out = set()
    for item in filter(None, (x.strip() for x in text.split(","))):
        try:
            out.add(parse_number(item, 0, (1 << 31) - 1))
        except ValueError as exc:  # a flag's value, refused as every other command refuses one (exit 2)
            raise click.BadParameter(str(exc), param_hint=f"'{flag}'") from None
    return out


def describe_log_dirs(host: str, port: int) -> Any:
    """One broker's DescribeLogDirs answer (every partition), as kio's response entity."""
    from kio.schema.describe_log_dirs.v1.request import DescribeLogDirsRequest
    from kio.schema.describe_log_dirs.v1.response import DescribeLogDirsResponse

    from .sasl_client import ask, connect

    try:
        with connect(host, port, TIMEOUT_S) as sock:
            return ask(sock, DescribeLogDirsRequest(topics=None), DescribeLogDirsResponse, MAX_RESPONSE,
                       f"{host}:{port}")
    except OSError as exc:
        raise CompactLogError(f"no answer to DescribeLogDirs from {host}:{port}: {exc}") from None


def _log_dir_json(result: Any, topics: set[str]) -> dict[str, Any]:
    """One directory as Kafka's tool prints it (keys in its order)."""
    rows = sorted((t.name, p.partition_index, p) for t in result.topics for p in t.partitions
                  if not topics or t.name in topics)
    error = None if result.error_code == 0 else result.error_code.name
    return {"partitions": [{"partition": f"{name}-{index}", "size": p.partition_size, "offsetLag": p.offset_lag,
                            "isFuture": p.is_future_key} for name, index, p in rows],
            "error": error, "logDir": result.log_dir}


@click.command("log-dirs")
@click.option("--bootstrap-server", "bootstrap_server", required=True, metavar="HOST:PORT", callback=host_ports,
              help="The broker to ask (a running compactlog serve, or any Kafka broker).")
@click.option("--describe", is_flag=True, required=True, help="Describe the brokers' log directories.")
@click.option("--topic-list", default="", metavar="T1,T2", help="Only these topics' partitions (default: all).")
@click.option("--broker-list", default="", metavar="ID1,ID2", help="Only these brokers (default: all of the cluster).")
@command_config_option
@kafka_errors
def log_dirs(bootstrap_server: str, describe: bool, topic_list: str, broker_list: str) -> None:
    """Describe the log directories of a running broker, as kafka-log-dirs.sh does.

    \b
    compactlog log-dirs --bootstrap-server 127.0.0.1:9092 --describe --topic-list prices
    """
    from .wire import WireClient

    topics = {t for t in (x.strip() for x in topic_list.split(",")) if t}
    wanted = _ids(broker_list, "--broker-list")
    with WireClient(bootstrap_server) as client:
        brokers = {b.id: (b.host, b.port) for b in client.brokers()}
    missing = wanted - set(brokers)
    if missing:
        raise CompactLogError(
            f"The given brokers do not exist from --broker-list: {','.join(map(str, sorted(missing)))}. "
            f"Current existent brokers: {','.join(map(str, sorted(brokers)))}")
    asked = sorted(wanted or brokers)
    click.echo("Querying brokers for log directories information")
    answers = {b: describe_log_dirs(*brokers[b]) for b in asked}
    click.echo(f"Received log directory information from brokers {','.join(map(str, asked))}")
    out = {"brokers": [{"broker": b, "logDirs": [_log_dir_json(r, topics) for r in answers[b].results]}
                       for b in asked], "version": 1}
    click.echo(json.dumps(out, separators=(",", ":")))
