"""Spark jobs over topics: the compacted view (latest value per key) and its export."""

from __future__ import annotations

from typing import Callable


def read_topic(spark, data_dir: str, topic: str, **options: str):
    """A topic as a DataFrame with Spark's Kafka-source schema."""
    reader = spark.read.format("compactlog").option("path", data_dir).option("subscribe", topic)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def latest_per_key(df):
    """The compacted view of a topic: per (topic, partition, key) the record with the highest offset,
    dropped when that record is a tombstone. Compaction is per partition in Kafka, and so is this;
    keyless records have no key to be latest for and are left out."""
    from pyspark.sql import functions as F

    cols = [c for c in df.columns]
    latest = (
        df.where(F.col("key").isNotNull())
        .groupBy("topic", "partition", "key")
        .agg(F.max_by(F.struct(*[F.col(c) for c in cols]), F.col("offset")).alias("r"))
        .select("r.*")
    )
    return latest.where(F.col("value").isNotNull())


def export_latest(spark, data_dir: str, topic: str, output: str, fmt: str = "parquet",
                  progress: Callable[[str], None] = print) -> int:
    """Write the latest value per key of ``topic`` to ``output`` (Parquet, ORC, JSON or CSV files, or a
    table when ``fmt`` is ``table``); returns the number of rows written."""
    from .progress import spark_progress

    df = latest_per_key(read_topic(spark, data_dir, topic)).cache()
    with spark_progress(spark, "export"):
        n = df.count()
        progress(f"{topic}: {n:,} live keys")
        if fmt == "table":
            df.write.mode("overwrite").saveAsTable(output)
        else:
            df.write.mode("overwrite").format(fmt).save(output)
    progress(f"wrote {n:,} rows to {output} ({fmt})")
    df.unpersist()
    return n
