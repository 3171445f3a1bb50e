"""Reading a topic into Spark: rows/s of a read + groupBy over a 10 M record topic (one partition) through
the `compactlog` data source, against the same rows read from Parquet in the same run; then the same on
local[1] and local[2] (each in its own process and JVM) for the speed-up. The source is read with its
defaults (a range per task slot, cut at equal offset counts); as Spark's Kafka source reads by default
(``minPartitions`` 1: one range per topic-partition); with ``maxPartitionBytes`` 128 MiB (ranges of
whole segments, a file source's split size); with its defaults and a ``.schema(...)`` of the three
columns the query uses; and through Spark's own interface for Python sources alone (the same Python
source registered under another name, so the format's columnar reader does not serve it: every column
copied into rows, none pruned), as a session reads where that reader cannot be built.

Sources take turns: a first round (which also starts the Python workers our data source reads in: a
fixed few seconds, shown apart), then three measured rounds, each source once a round; the figure is
the median, and the ratio the median of the rounds' ratios to Parquet in the same round. The query touches key, value and offset, so
neither source can skip the value bytes: per key, the highest offset and the value bytes.

The topic's batches are uncompressed unless ``--codec`` says otherwise; Parquet is written with Spark's
default codec (snappy), whatever the topic's: the Parquet a Spark user would otherwise keep.

Usage: python bench/bench_spark.py [--records 10000000] [--keys 1000000] [--codec none|lz4|zstd|...]
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys

from rich.table import Table

sys.path.insert(0, os.path.dirname(__file__))
from children import bench_start, median_cells, run_child, write_copies  # noqa: E402

ROUNDS = 3  # rounds measured per master, each source once a round (run to run this machine moves by 10-15%)

CHILD = """
import json, sys, time
from pyspark.sql import functions as F
from compactlog.spark.session import spark_session
data, parquet, master, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
spark = spark_session(master)
spark.range(1).count()
from compactlog.spark.source import CompactLogDataSource

class RowsOnly(CompactLogDataSource):  # the same source, which no JVM provider of that name serves
    @classmethod
    def name(cls):
        return "compactlog_rows"

spark.dataSource.register(RowsOnly)

def query(df):
    return df.groupBy("key").agg(F.max("offset").alias("o"), F.sum(F.length("value")).alias("b")).agg(F.count("*"), F.sum("b")).collect()[0]

def source(fmt="compactlog", **options):
    reader = spark.read.format(fmt)
    if options.pop("narrow", False):
        reader = reader.schema("key binary, value binary, offset long")
    for k, v in {"path": data, "subscribe": "bench", **options}.items():
        reader = reader.option(k, v)
    return reader.load()

import os
if not os.path.exists(parquet):  # ten files, as every run of this bench wrote them (Spark reads them as 3 splits)
    source(maxPartitionBytes=str(128 << 20)).write.parquet(parquet)
out = {}
frames = (("compactlog (defaults: a range per task slot)", source()),
          ("compactlog, minPartitions 1 (one range per partition)", source(minPartitions="1")),
          ("compactlog, maxPartitionBytes 128 MiB", source(maxPartitionBytes=str(128 << 20))),
          ("compactlog, defaults, .schema(key, value, offset)", source(narrow=True)),
          ("compactlog, defaults, Spark's Python path alone", source("compactlog_rows")),
          ("parquet", spark.read.parquet(parquet)))
for rep in range(1 + rounds):  # the first round also starts Python workers (compactlog) or warms the JIT
    for name, df in frames:
        t0 = time.perf_counter()
        keys, nbytes = query(df)
        x = out.setdefault(name, {"runs": [], "keys": keys, "value_bytes": nbytes})
        x["runs"].append(time.perf_counter() - t0)
        assert (x["keys"], x["value_bytes"]) == (keys, nbytes)
spark.stop()
print(json.dumps(out))
"""



def main() -> None:
    args, console, root = bench_start("spark")
    try:
        (data,) = write_copies(root, ["data"], args, console)
        parquet = os.path.join(root, "parquet")
        runs = {}
        for master in ("local[2]", "local[1]"):
            runs[master] = run_child(CHILD, data, parquet, master, str(ROUNDS))
            console.print(f"{master}: {json.dumps(runs[master])}")
        t = Table(title=f"read + groupBy(key) over {args.records:,} records ({args.codec} topic, snappy Parquet): "
                        f"medians of {ROUNDS} rounds, "
                        "each round every source once (after a round that starts the workers)")
        for col in ("master", "source", "first round s", "seconds", "rows/s", "vs Parquet, median of rounds"):
            t.add_column(col, justify="right")
        for master, r in runs.items():
            pq = r["parquet"]["runs"][1:]
            for name, x in r.items():
                assert x["keys"] == r["parquet"]["keys"] and x["value_bytes"] == r["parquet"]["value_bytes"]
                t.add_row(master, name, f"{x['runs'][0]:.1f}", *median_cells(args.records, x["runs"][1:], pq, digits=1))
        console.print(t)
        for name in runs["local[2]"]:
            one, two = (statistics.median(runs[m][name]["runs"][1:]) for m in ("local[1]", "local[2]"))
            console.print(f"{name}: local[2] is {one / two:.2f}x as fast as local[1]")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
