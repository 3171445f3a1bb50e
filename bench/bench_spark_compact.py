"""The Spark compaction job against the local log cleaner on the same data, in the same run, in two
cases: the keys fit the cleaner's dedupe buffer (its default, 128 MiB: one round for the cleaner; the
job's tasks build the same map), and they overflow it 8 times (the cleaner then needs many rounds, each
rereading the log; the job maps by a shuffle, in one pass). Each result is checked to hold the same
records as the cleaner's. Goals: at most 2x the cleaner's time when the keys fit; one pass when not.
The job's time leaves out the session's start and that of its Python workers (one per core, started by a
trivial job first, as the read benchmark's first run starts them): a second job in the same session
would not pay them again.

Usage: python bench/bench_spark_compact.py [--records 10000000] [--keys 1000000] [--master local[*]]
"""

from __future__ import annotations

import json
import os
import shutil
import sys

from rich.table import Table

sys.path.insert(0, os.path.dirname(__file__))
from bench_cleaner import clean_in_child  # noqa: E402
from children import bench_start, run_child, write_copies  # noqa: E402

SPARK_CHILD = """
import json, sys, time
t0 = time.perf_counter()
import compactlog
from compactlog.spark.compact import compact
from compactlog.spark.session import spark_session
spark = spark_session(sys.argv[2])
spark.range(1).count()  # the JVM is up


def warm(batches):  # a Python worker per core, with what the job's tasks import (as bench_spark's first run does)
    import pyarrow as pa
    import compactlog.cleaning_round  # noqa: F401
    for b in batches:
        yield pa.RecordBatch.from_arrays([pa.array([len(b)])], names=["n"])


n = spark.sparkContext.defaultParallelism
spark.range(0, n, 1, n).mapInArrow(warm, "n long").collect()
t1 = time.perf_counter()
with compactlog.open(sys.argv[1], config=json.loads(sys.argv[3])) as cl:
    results = compact(spark, cl, "bench", progress=lambda m: None)
t2 = time.perf_counter()
spark.stop()
print(json.dumps({"startup": t1 - t0, "seconds": t2 - t1, "records": sum(r.stats.messages_read for r in results),
                  "kept": sum(r.stats.messages_written for r in results)}))
"""

DIGEST_CHILD = """
import hashlib, json, sys
import compactlog
h = hashlib.sha256()
n = 0
with compactlog.open(sys.argv[1]) as cl:
    for r in cl.consume("bench", 0, from_beginning=True):
        h.update(b"%d:%s=%s;" % (r.offset, r.key, r.value or b"~"))
        n += 1
print(json.dumps({"records": n, "digest": h.hexdigest()}))
"""



def main() -> None:
    args, console, root = bench_start("spark-compact")
    try:
        paths = write_copies(root, ["local-fit", "spark-fit", "local-overflow", "spark-overflow"], args, console)
        small = int(args.keys / 8 / 0.9 * 24) + 24  # the buffer holds 1/8 of the keys
        cases = {"fit": ({}, paths[0], paths[1]), "overflow": ({"log.cleaner.dedupe.buffer.size": str(small)}, *paths[2:])}
        t = Table(title=f"compaction of {args.records:,} records / {args.keys:,} keys")
        for col in ("keys", "", "rounds", "seconds", "records/s", "records after", "same records", "job / cleaner"):
            t.add_column(col, justify="right")
        wrong = []
        for case, (broker, local, spark) in cases.items():
            rl = clean_in_child(local, broker)
            console.print(f"{case}: local cleaner: {json.dumps(rl)}")
            rs = run_child(SPARK_CHILD, spark, args.master, json.dumps(broker))
            console.print(f"{case}: spark job: {json.dumps(rs)}")
            dl, ds = run_child(DIGEST_CHILD, local), run_child(DIGEST_CHILD, spark)
            if dl != ds:
                wrong.append(case)
            buffer = int(broker.get("log.cleaner.dedupe.buffer.size", 128 << 20))
            t.add_row(f"{case} ({buffer / 2**20:.1f} MiB buffer)", "local cleaner", str(rl["rounds"]), f"{rl['seconds']:.1f}",
                      f"{args.records / rl['seconds']:,.0f}", f"{dl['records']:,}", "", "")
            t.add_row("", f"Spark job ({args.master}, + {rs['startup']:.0f} s session and workers start)", "1", f"{rs['seconds']:.1f}",
                      f"{args.records / rs['seconds']:,.0f}", f"{ds['records']:,}", "yes" if dl == ds else "NO",
                      f"{rs['seconds'] / rl['seconds']:.2f}x")
        console.print(t)
        if wrong:
            raise SystemExit(f"the job and the cleaner kept different records ({', '.join(wrong)})")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
