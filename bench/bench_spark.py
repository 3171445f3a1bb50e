"""Reading a topic into Spark: rows/s of a read + groupBy over a 10 M record topic through the
`compactlog` data source, against the same rows read from Parquet in the same run; then the same on
local[1] and local[2] (each in its own process and JVM) for the speed-up. The source is read twice: with
its default ranges (128 MiB at segment boundaries) and with ``minPartitions`` set to the cores (ranges of
equal offset counts, one per core: for this per-key aggregate over many keys, the fastest measured), and
with that and a ``.schema(...)`` of the three columns the query uses (Spark cannot prune a Python
source's columns; Parquet reads only those by itself).

Each query runs twice and the second run is the figure: the first also starts the Python workers that
our data source reads in (a fixed few seconds, shown apart). The query touches key, value and offset, so neither source can skip the value bytes (Parquet could
prune columns, our Python data source cannot): per key, the highest offset and the value bytes.

Usage: python bench/bench_spark.py [--records 10000000] [--keys 1000000]
"""

from __future__ import annotations

import json
import os
import shutil
import sys

from rich.table import Table

sys.path.insert(0, os.path.dirname(__file__))
from children import bench_start, run_child, write_copies  # noqa: E402

CHILD = """
import json, sys, time
from pyspark.sql import functions as F
from compactlog.spark.session import spark_session
data, parquet, master = sys.argv[1:4]
spark = spark_session(master)
spark.range(1).count()

def query(df):
    return df.groupBy("key").agg(F.max("offset").alias("o"), F.sum(F.length("value")).alias("b")).agg(F.count("*"), F.sum("b")).collect()[0]

src = spark.read.format("compactlog").option("path", data).option("subscribe", "bench").load()
cores = spark.sparkContext.defaultParallelism
balanced = spark.read.format("compactlog").option("path", data).option("subscribe", "bench") \
    .option("minPartitions", str(cores)).load()
import os
if not os.path.exists(parquet):
    src.write.parquet(parquet)
out = {}
narrow = spark.read.format("compactlog").schema("key binary, value binary, offset long").option("path", data) \
    .option("subscribe", "bench").option("minPartitions", str(cores)).load()
for name, df in (("compactlog", src), ("compactlog, minPartitions = cores", balanced),
                 ("compactlog, minPartitions = cores, .schema(key, value, offset)", narrow),
                 ("parquet", spark.read.parquet(parquet))):
    times = []
    for _ in range(2):  # the first run also starts Python workers (compactlog) or warms the JIT
        t0 = time.perf_counter()
        keys, nbytes = query(df)
        times.append(time.perf_counter() - t0)
    out[name] = {"seconds": times[1], "first_run": times[0], "keys": keys, "value_bytes": nbytes}
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
            runs[master] = run_child(CHILD, data, parquet, master)
            console.print(f"{master}: {json.dumps(runs[master])}")
        t = Table(title=f"read + groupBy(key) over {args.records:,} records")
        for col in ("master", "source", "first run s", "seconds", "rows/s", "keys", "vs Parquet"):
            t.add_column(col, justify="right")
        for master, r in runs.items():
            for name in r:
                x = r[name]
                assert x["keys"] == r["parquet"]["keys"] and x["value_bytes"] == r["parquet"]["value_bytes"]
                t.add_row(master, name, f"{x['first_run']:.1f}", f"{x['seconds']:.1f}", f"{args.records / x['seconds']:,.0f}", f"{x['keys']:,}",
                          f"{r['parquet']['seconds'] / x['seconds']:.2f}x")
        console.print(t)
        for name in runs["local[2]"]:
            console.print(f"{name}: local[2] is {runs['local[1]'][name]['seconds'] / runs['local[2]'][name]['seconds']:.2f}x "
                          "as fast as local[1]")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
