"""``compactlog spark ...``: the Spark jobs, on ``local[*]`` by default or any cluster by ``--master``."""

from __future__ import annotations

import os

import click

from ..log_dir import overwrites_data_dir
from ..records.levels import LEVEL_RANGES
from .common import (
    INT_MAX,
    LONG_MAX,
    CompactLogGroup,
    Decimal,
    Number,
    OneOf,
    check_compression_level,
    kafka_errors,
)


def master_option(f):
    return click.option("--master", default=None,
                        help="Spark master URL (default local[*]; e.g. spark://host:7077 for a standalone cluster).")(f)


@click.group("spark", cls=CompactLogGroup)
def spark() -> None:
    """Jobs that run on Apache Spark: compact, recompress, export and advise."""


@spark.command("export")
@click.option("--data-dir", required=True, type=click.Path(file_okay=False, exists=True), help="The data directory.")
@click.option("--topic", required=True, help="The topic to export.")
@click.option("--format", "fmt", type=OneOf(["parquet", "orc", "json", "csv", "table"]), default="parquet",
              show_default=True, help="Output format, or 'table' to save as a Spark table.")
@click.option("--output", required=True, help="Output directory (or table name with --format table).")
@master_option
@kafka_errors
def export(data_dir, topic, fmt, output, master):
    """Write the latest value per key (the compacted view, tombstones honoured) of a topic.

    Example: compactlog spark export --data-dir data --topic prices --format parquet --output latest/
    """
    from ..errors import UnknownTopicOrPartitionError, shown
    from ..spark.jobs import export_latest
    from ..spark.session import spark_session
    from ..reading import topic_metadata

    if topic not in topic_metadata(data_dir):  # fails before Spark starts; no lock, as the export takes none
        raise UnknownTopicOrPartitionError(f"Topic {shown(topic)} does not exist.")
    if fmt != "table" and overwrites_data_dir(output, data_dir):
        raise click.BadParameter(f"{output!r} would replace the data directory {data_dir!r} or part of it (Spark replaces "
                                 "the output directory): pick one outside it, or a new one inside it", param_hint="'--output'")
    session = spark_session(master)
    try:
        export_latest(session, data_dir, topic, output, fmt, progress=click.echo)
    finally:
        session.stop()


@spark.command("compact")
@click.option("--data-dir", required=True, type=click.Path(file_okay=False, exists=True), help="The data directory.")
@click.option("--topic", default=None, help="Only this topic (default: every compacted topic).")
@master_option
@kafka_errors
def compact(data_dir, topic, master):
    """Log compaction of every eligible partition in one Spark job (one pass, however many keys).

    The same rules and bytes as `compactlog clean`; the key -> latest offset map is a shuffle instead of
    the cleaner's dedupe buffer. Example: compactlog spark compact --data-dir data --topic prices
    """
    import compactlog

    from ..spark.compact import compact as run
    from ..spark.session import spark_session

    with compactlog.open(data_dir) as cl:
        if topic is not None:
            cl.partitions_for(topic)  # an unknown topic fails before Spark starts
        session = spark_session(master)
        try:
            results = run(session, cl, topic, progress=click.echo)
        finally:
            session.stop()
    if results:
        from rich.console import Console
        from rich.table import Table

        t = Table(title="compaction" + (f" of {topic}" if topic else ""))
        for col in ("partition", "dirty section", "messages", "kept", "bytes before", "bytes after", "saved"):
            t.add_column(col, justify="right")
        for r in results:
            s = r.stats
            t.add_row(f"{r.topic}-{r.partition}", f"[{r.first_dirty:,}, {r.end_offset:,})", f"{s.messages_read:,}",
                      f"{s.messages_written:,}", f"{s.bytes_read:,}", f"{s.bytes_written:,}",
                      f"{100 * (1 - s.bytes_written / max(s.bytes_read, 1)):.1f}%")
        Console(width=max(Console().width, 110)).print(t)


@spark.command("recompress")
@click.option("--data-dir", required=True, type=click.Path(file_okay=False, exists=True), help="The data directory.")
@click.option("--topic", required=True, help="The topic whose stored history to rewrite.")
@click.option("--compression.type", "compression", required=True,
              type=OneOf(["uncompressed", "none", "gzip", "snappy", "lz4", "zstd"]), help="The target codec.")
@click.option("--compression.gzip.level", "gzip_level", type=Number(-INT_MAX - 1, INT_MAX), default=None, help=f"gzip level ({LEVEL_RANGES['gzip'].text}).")
@click.option("--compression.lz4.level", "lz4_level", type=Number(-INT_MAX - 1, INT_MAX), default=None, help=f"lz4 level ({LEVEL_RANGES['lz4'].text}).")
@click.option("--compression.zstd.level", "zstd_level", type=Number(-INT_MAX - 1, INT_MAX), default=None, help=f"zstd level ({LEVEL_RANGES['zstd'].text}).")
@master_option
@kafka_errors
def recompress(data_dir, topic, compression, gzip_level, lz4_level, zstd_level, master):
    """Rewrite the closed segments of a topic with another codec; offsets and records unchanged.

    Example: compactlog spark recompress --data-dir data --topic prices --compression.type zstd --compression.zstd.level 3
    """
    import compactlog

    from ..spark.recompress import recompress_topic
    from ..spark.session import spark_session

    levels = {"gzip": gzip_level, "lz4": lz4_level, "zstd": zstd_level}
    for codec, given in levels.items():
        if given is not None and codec != compression:
            raise click.UsageError(f"--compression.{codec}.level goes with --compression.type {codec}, not {compression}")
    level = levels.get(compression)
    check_compression_level(compression, level, f"--compression.{compression}.level")
    with compactlog.open(data_dir) as cl:
        cl.partitions_for(topic)  # an unknown topic fails before Spark starts
        session = spark_session(master)
        try:
            results = recompress_topic(session, cl, topic, compression, level, progress=click.echo)
        finally:
            session.stop()
    if results:
        from rich.console import Console
        from rich.table import Table

        t = Table(title=f"recompression of {topic} to {compression}")
        for col in ("partition", "segment", "batches", "bytes before", "bytes after", "saved"):
            t.add_column(col, justify="right")
        for r in results:
            t.add_row(str(r.partition), str(r.base_offset), f"{r.batches:,}", f"{r.bytes_before:,}", f"{r.bytes_after:,}",
                      f"{100 * (1 - r.bytes_after / max(r.bytes_before, 1)):.1f}%")
        Console(width=max(Console().width, 100)).print(t)


@spark.command("advise")
@click.option("--data-dir", required=True, type=click.Path(file_okay=False, exists=True), help="The data directory.")
@click.option("--topic", required=True, help="The topic whose stored batches to sample.")
@click.option("--sample-bytes", type=Number(1 << 16, LONG_MAX), default=16 << 20, show_default=True,
              help="How many stored bytes to sample, spread over partitions and segments.")
@click.option("--min-compress-mbps", type=Decimal(0.0), default=50.0, show_default=True,
              help="Only codecs compressing at least this fast per core are recommended.")
@click.option("--chart", default="compression-advice.png", show_default=True, help="Where to write the chart (PNG).")
@master_option
@kafka_errors
def advise(data_dir, topic, sample_bytes, min_compress_mbps, chart, master):
    """Measure every codec and level on a sample of a topic and recommend a compression.type.

    Example: compactlog spark advise --data-dir data --topic prices --chart prices.png
    """
    import compactlog

    from ..records.codecs import Codec
    from ..spark.advise import advise as run
    from ..spark.advise import write_chart
    from ..spark.session import spark_session

    chart_dir = os.path.dirname(chart) or "."
    if not os.path.isdir(chart_dir):
        raise click.BadParameter(f"directory {chart_dir!r} does not exist", param_hint="'--chart'")
    with compactlog.open(data_dir) as cl:
        cl.partitions_for(topic)  # an unknown topic fails before Spark starts
        session = spark_session(master)
        try:
            advice = run(session, cl, topic, sample_bytes, min_compress_mbps, progress=click.echo)
        finally:
            session.stop()
    if advice is None:
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"{topic}: {advice.trials[0].batches:,} batches, {advice.trials[0].records_bytes / 1e6:,.1f} MB of records sampled")
    for col in ("codec", "level", "stored bytes", "ratio", "compress MB/s", "decompress MB/s", ""):
        t.add_column(col, justify="right")
    for r in sorted(advice.trials, key=lambda r: r.stored_bytes):
        plain = r.codec is Codec.NONE  # nothing to time
        t.add_row(r.codec.config_name, "" if r.level is None else str(r.level), f"{r.stored_bytes:,}", f"{r.ratio:.2f}",
                  "" if plain else f"{r.compress_mbps:,.0f}", "" if plain else f"{r.decompress_mbps:,.0f}",
                  "recommended" if r is advice.choice else "")
    Console(width=max(Console().width, 110)).print(t)
    write_chart(advice, chart, f"compression of {topic}")
    click.echo(f"recommendation: {advice.config} (the smallest of the codecs compressing at least "
               f"{min_compress_mbps:g} MB/s per core)")
    click.echo(f"projected saving: {advice.projected_saving_bytes:,} of {advice.topic_bytes:,} bytes "
               f"({100 * advice.saving_fraction:.1f}%) once the topic's history is rewritten "
               f"(compactlog spark recompress) and new data follows the topic config")
    click.echo(f"chart: {chart}")
