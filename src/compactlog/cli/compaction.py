"""``compact-topic`` and ``compaction-status``: Pulsar's ``topics compact`` and ``compaction-status``."""

from __future__ import annotations

import datetime

import click

from .common import INT_MAX, Number, data_dir_option, kafka_errors, open_data_dir
from .progress import io_progress


def _when(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _table(title: str, rows: list[tuple], status: bool):
    from rich.console import Console
    from rich.table import Table

    t = Table(title=title)
    cols = ["partition"] + (["status"] if status else []) + ["horizon", "run at", "took", "records before", "records after",
                                                              "bytes before", "bytes after"] + (["error"] if status else [])
    for c in cols:
        t.add_column(c, justify="left" if c in ("status", "error", "run at") else "right", no_wrap=c != "error")
    for r in rows:
        t.add_row(*r)
    Console(width=max(Console().width, 150)).print(t)


def _figures(st) -> list[str]:
    if st is None:
        return ["-"] * 7
    return [f"{st.horizon:,}", _when(st.run_ms), f"{st.duration_ms / 1000:.2f} s", f"{st.records_before:,}",
            f"{st.records_after:,}", f"{st.bytes_before:,}", f"{st.bytes_after:,}"]


@click.command("compact-topic")
@data_dir_option
@click.option("--topic", required=True, help="The topic whose compacted view to build.")
@click.option("--partition", type=Number(0, INT_MAX), default=None, help="Only this partition.")
@kafka_errors
def compact_topic(data_dir, server_properties, topic, partition):
    """Build the compacted view of a topic now, beside its untouched log (Pulsar's topics compact).

    Example: compactlog compact-topic --data-dir data --topic orders
    """
    with open_data_dir(data_dir, server_properties) as cl:
        with io_progress("compaction") as on_io:
            done = cl.compact_topic(topic, partition, on_io=on_io)
        rows = []
        published = None  # the last published state of partitions with nothing new, read when one is met
        for p, st in done.items():
            if st is None and published is None:
                published = {s.partition: s.state for s in cl.compaction_status(topic)}
            shown = st if st is not None else published[p]
            rows.append((str(p), *_figures(shown)))
            if st is None:
                click.echo(f"{topic}-{p}: nothing appended since the last compaction")
    _table(f"compaction of {topic}", rows, status=False)


@click.command("compaction-status")
@data_dir_option
@click.option("--topic", required=True, help="The topic.")
@kafka_errors
def compaction_status(data_dir, server_properties, topic):
    """The compacted view of each partition: its horizon and last run (Pulsar's compaction-status).

    Status is NOT_RUN, RUNNING, SUCCESS or ERROR (with the error of the last run); the horizon and
    figures are those of the last successful run.
    """
    with open_data_dir(data_dir, server_properties) as cl:
        rows = [(str(s.partition), s.status, *_figures(s.state), s.error or "") for s in cl.compaction_status(topic)]
    _table(f"compaction status of {topic}", rows, status=True)
