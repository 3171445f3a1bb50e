"""``verify``: a read-only scrub of a data directory, and ``--repair`` (see ``compactlog.verify``)."""

from __future__ import annotations

import sys

import click

from .common import kafka_errors
from .progress import io_progress


def _problems_table(title: str, problems) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=title)
    for col in ("severity", "file", "position", "problem", "--repair"):
        t.add_column(col, justify="right" if col == "position" else "left", overflow="fold")
    for p in problems:
        t.add_row(p.severity, p.where, "" if p.position is None else f"{p.position:,}", p.what, p.repair)
    Console(width=max(Console().width, 160)).print(t)


def _summary_table(report) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title="partitions checked")
    for col in ("partition", "segments", "batches", "records", "MB", "log start", "log end"):
        t.add_column(col, justify="left" if col == "partition" else "right")
    for s in report.partitions:
        t.add_row(s.name, f"{s.segments:,}", f"{s.batches:,}", f"{s.records:,}", f"{s.bytes / 2**20:,.2f}",
                  f"{s.log_start_offset:,}", f"{s.log_end_offset:,}")
    Console(width=max(Console().width, 110)).print(t)


@click.command("verify")
@click.option("--data-dir", required=True, type=click.Path(file_okay=False), help="The data directory.")
@click.option("--topic", help="Only this topic (default: every topic).")
@click.option("--repair", is_flag=True,
              help="Fix what recovery fixes (torn tails of a log's last segment, indexes, leftover swap files, "
                   "checkpoints), then check again. Takes the directory's lock; damage in the middle of a log is "
                   "never cut.")
@kafka_errors
def verify(data_dir, topic, repair):
    """Check every segment, index and checkpoint of a data directory and report each problem with its file and
    position; exit status 1 when a problem is left. Without --repair nothing is written.

    Example: compactlog verify --data-dir data
    """
    from .. import verify as scrub

    with io_progress("verify") as on_io:
        report = scrub.verify(data_dir, topic, on_io)
    if topic is not None and not report.partitions and not report.problems:  # nothing of it was found to check
        from ..errors import UnknownTopicOrPartitionError, shown

        raise UnknownTopicOrPartitionError(f"Topic {shown(topic)} does not exist in {data_dir}.")
    _summary_table(report)
    if report.problems:
        _problems_table("problems found", report.problems)
    if repair and report.problems:
        click.echo("repairing: opening the directory with a full recovery ...")
        scrub.repair(data_dir)
        with io_progress("verify") as on_io:
            report = scrub.verify(data_dir, topic, on_io)
        if report.problems:
            _problems_table("problems left after the repair", report.problems)
        else:
            click.echo("every problem was repaired")
    errors = len(report.errors)
    if errors:
        click.echo(f"{errors} problem(s) need attention", err=True)
        sys.exit(1)
    click.echo("no problem found" if not report.problems else "no error found (warnings above)")
