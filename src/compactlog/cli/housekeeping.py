"""``clean``: one round of housekeeping now (retention; compaction once the log cleaner exists)."""

from __future__ import annotations

import atexit
import gc

import click

from .common import data_dir_option, kafka_errors, open_data_dir
from .progress import io_progress


@click.command("clean")
@data_dir_option
@click.option("--topic", help="Only this topic (default: every topic).")
@kafka_errors
def clean(data_dir, server_properties, topic):
    """Run retention and log compaction now, and report what they did (Kafka's cleaner stats).

    Example: compactlog clean --data-dir data --topic prices
    """
    with open_data_dir(data_dir, server_properties) as cl:
        with io_progress("log cleaner") as on_io:
            report = cl.clean(topic, on_io=on_io)
        for (t, p), n in sorted(report.deleted_segments.items()):
            click.echo(f"{t}-{p}: deleted {n} segment(s) by retention")
        for r in report.compactions:
            click.echo(r.stats_report())
        if report.compactions:
            _summary_table(report)
        for (t, p), why in sorted(report.failed.items()):
            click.echo(f"{t}-{p}: cleaning failed: {why}; the partition is uncleanable until the directory is "
                       f"opened again (the log is unchanged)", err=True)
        if not report.deleted_segments and not report.compactions and not report.failed:
            click.echo("Nothing to clean: no segment past retention, no compacted log above its dirty ratio.")
    # What the process imported (numpy, the storage engine, the cleaner, click, rich) lives until it
    # exits: spare the collector's last walks over all of it then (0.03 s here). At exit, not now, so
    # that a caller running the command in its own process (a test) keeps its collector as it was.
    atexit.register(gc.freeze)
    if report.failed:
        raise SystemExit(1)


def _summary_table(report) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title="log compaction")
    for col in ("partition", "dirty section", "records before", "records after", "MB before", "MB after", "reduction", "seconds"):
        t.add_column(col, justify="right")
    for r in report.compactions:
        s = r.stats
        t.add_row(f"{r.topic}-{r.partition}", f"[{r.first_dirty}, {r.end_offset})", f"{s.messages_read:,}",
                  f"{s.messages_written:,}", f"{s.bytes_read / 2**20:,.2f}", f"{s.bytes_written / 2**20:,.2f}",
                  f"{100 * (1 - s.bytes_written / max(s.bytes_read, 1)):.1f}%", f"{s.elapsed:.2f}")
    Console(width=max(Console().width, 110)).print(t)
