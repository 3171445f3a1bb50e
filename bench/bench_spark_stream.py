"""Streaming reads against batch reads, per micro-batch: the per-key aggregate of bench_spark.py over a
10 M record topic cut into four offset ranges, read as a stream (`spark.readStream`,
`trigger(availableNow=True)`, `maxOffsetsPerTrigger` a quarter of the topic, each micro-batch aggregated
in `foreachBatch`), as the same stream with a ``.schema(...)`` of the three columns the query uses
(Spark plans a stream's scan before its query, so it never prunes a stream's columns), and as four
batch reads of the same ranges (`startingOffsets` / `endingOffsets`), in one Spark session, in turns
over three rounds after a first one that starts the Python workers. All do the same reads and
aggregations; the ratio is what the stream's own machinery costs (its offset and commit logs, planning
each micro-batch) and what it reads that the batch read does not.

Usage: python bench/bench_spark_stream.py [--records 10000000] [--keys 1000000] [--master local[2]]
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys

from rich.table import Table

sys.path.insert(0, os.path.dirname(__file__))
from children import bench_start, run_child, write_copies  # noqa: E402

ROUNDS = 3
MICRO_BATCHES = 4

CHILD = """
import json, shutil, sys, tempfile, time
from pyspark.sql import functions as F
from compactlog.spark.session import spark_session
data, master, rounds, per_trigger, records = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
spark = spark_session(master)
spark.range(1).count()

def aggregate(df):  # (keys, value bytes, rows): bench_spark.py's query, with the rows counted on the way
    return df.groupBy("key").agg(F.max("offset").alias("o"), F.sum(F.length("value")).alias("b"),
                                 F.count("*").alias("n")).agg(F.count("*"), F.sum("b"), F.sum("n")).collect()[0]

def batch():  # the same offset ranges as the micro-batches, each read and aggregated as a batch
    rows = nbytes = pieces = 0
    total = records
    for start in range(0, total, per_trigger):
        end = min(start + per_trigger, total)
        df = (spark.read.format("compactlog").option("path", data).option("subscribe", "bench")
              .option("startingOffsets", json.dumps({"bench": {"0": start}}))
              .option("endingOffsets", json.dumps({"bench": {"0": end}})).load())
        _, b, n = aggregate(df)
        rows, nbytes, pieces = rows + n, nbytes + b, pieces + 1
    return {"rows": rows, "keys": None, "value_bytes": nbytes, "micro_batches": pieces}

def stream(schema=None):
    seen = []
    def each(df, batch_id):
        keys, nbytes, rows = aggregate(df)
        if rows:
            seen.append((rows, keys, nbytes))
    checkpoint = tempfile.mkdtemp()
    try:
        reader = spark.readStream.format("compactlog")
        if schema:  # Spark plans a stream's scan before its query, so it never prunes a stream's columns
            reader = reader.schema(schema)
        q = (reader.option("path", data).option("subscribe", "bench")
             .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", str(per_trigger)).load()
             .writeStream.foreachBatch(each).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
        q.awaitTermination()
    finally:
        shutil.rmtree(checkpoint, ignore_errors=True)
    return {"rows": sum(s[0] for s in seen), "keys": None, "value_bytes": sum(s[2] for s in seen),
            "micro_batches": len(seen)}

out = {"batch": [], "stream": [], "stream_schema": []}
for r in range(1 + rounds):  # the first round also starts the Python workers
    for name, fn in (("batch", batch), ("stream", stream),
                     ("stream_schema", lambda: stream("key binary, value binary, offset long"))):
        t0 = time.perf_counter()
        got = fn()
        got["seconds"] = time.perf_counter() - t0
        out[name].append(got)
spark.stop()
print(json.dumps(out))
"""


def main() -> None:
    args, console, root = bench_start("spark-stream")
    try:
        (data,) = write_copies(root, ["data"], args, console)
        per_trigger = -(-args.records // MICRO_BATCHES)
        master = args.master if args.master != "local[*]" else "local[2]"
        r = run_child(CHILD, data, master, str(ROUNDS), str(per_trigger), str(args.records))
        batch, stream, narrow = r["batch"][1:], r["stream"][1:], r["stream_schema"][1:]
        for s in batch + stream + narrow:  # every record once: the micro-batches' rows add up to the topic
            assert s["rows"] == args.records, s
            assert s["value_bytes"] == batch[0]["value_bytes"] and s["micro_batches"] == MICRO_BATCHES, (s, batch[0])
        t = Table(title=f"read + groupBy(key) over {args.records:,} records on {master}: "
                        f"medians of {ROUNDS} rounds, batch and stream in turn")
        for col in ("read", "micro-batches", "first round s", "seconds", "rows/s", "vs batch, median of rounds"):
            t.add_column(col, justify="right")
        for name, runs, key in (("batch, one read per range", batch, "batch"),
                                ("stream, availableNow", stream, "stream"),
                                ("stream, availableNow, .schema(key, value, offset)", narrow, "stream_schema")):
            secs = statistics.median(x["seconds"] for x in runs)
            first = r[key][0]["seconds"]
            ratio = statistics.median(b["seconds"] / x["seconds"] for b, x in zip(batch, runs))
            t.add_row(name, str(runs[0]["micro_batches"]), f"{first:.1f}", f"{secs:.1f}",
                      f"{args.records / secs:,.0f}", f"{ratio:.2f}x")
        console.print(t)
        console.print(json.dumps(r))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
