"""``clean``: one round of housekeeping now (retention; compaction once the log cleaner exists)."""

from __future__ import annotations

import click

from .common import data_dir_option, kafka_errors, open_data_dir


@click.command("clean")
@data_dir_option
@click.option("--topic", help="Only this topic (default: every topic).")
@kafka_errors
def clean(data_dir, server_properties, topic):
    """Run retention (cleanup.policy=delete) on demand and report what was deleted.

    Example: compactlog clean --data-dir data --topic prices
    """
    with open_data_dir(data_dir, server_properties) as cl:
        deleted = cl.clean(topic)
        if not deleted:
            click.echo("Nothing to delete.")
        for (t, p), n in sorted(deleted.items()):
            click.echo(f"{t}-{p}: deleted {n} segment(s) by retention")
