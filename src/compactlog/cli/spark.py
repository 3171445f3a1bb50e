"""``compactlog spark ...``: the Spark jobs, on ``local[*]`` by default or any cluster by ``--master``."""

from __future__ import annotations

import click

from .common import kafka_errors


def master_option(f):
    return click.option("--master", default=None,
                        help="Spark master URL (default local[*]; e.g. spark://host:7077 for a standalone cluster).")(f)


@click.group("spark")
def spark() -> None:
    """Jobs that run on Apache Spark: export (more to come: compact, recompress, advise)."""


@spark.command("export")
@click.option("--data-dir", required=True, type=click.Path(file_okay=False, exists=True), help="The data directory.")
@click.option("--topic", required=True, help="The topic to export.")
@click.option("--format", "fmt", type=click.Choice(["parquet", "orc", "json", "csv", "table"]), default="parquet",
              show_default=True, help="Output format, or 'table' to save as a Spark table.")
@click.option("--output", required=True, help="Output directory (or table name with --format table).")
@master_option
@kafka_errors
def export(data_dir, topic, fmt, output, master):
    """Write the latest value per key (the compacted view, tombstones honoured) of a topic.

    Example: compactlog spark export --data-dir data --topic prices --format parquet --output latest/
    """
    from ..spark.jobs import export_latest
    from ..spark.session import spark_session

    session = spark_session(master)
    try:
        export_latest(session, data_dir, topic, output, fmt, progress=click.echo)
    finally:
        session.stop()
