"""What Spark's Python data source API costs by itself: the floor under any source or sink written in
Python, measured beside ours and Parquet in one run.

Reads: a "floor" source hands Spark Arrow batches that are already built (our source's own batches of
the Kafka source's seven columns, written beforehand to an Arrow file per range and memory-mapped), so
what is left is Spark's part: the batches written to a socket by the worker, read by the JVM, turned
into rows. Ours is read with its defaults; Parquet is the same rows in Spark's default format. The query
is bench_spark.py's (per key: the highest offset and the value bytes). A Python source can come no
nearer to Parquet than the floor does.

Appends: a "floor" sink takes the Arrow batches Spark hands a Python writer and drops them; ours appends
the same cached DataFrame to an lz4 topic of three partitions (``kafka.batch.size`` 262144); Parquet
writes it with lz4 (bench_spark_write.py's DataFrame and topic).

Micro-batches: a "floor" stream source hands Spark 1,000 rows a micro-batch, built on the spot, and ours
reads a 20,000 record topic with ``maxOffsetsPerTrigger`` 1,000; each is read to the end with
``trigger(availableNow=True)`` and ``foreachBatch`` counting the rows; the figure is seconds per
micro-batch, the fixed cost of a micro-batch from a Python stream source.

Rounds take turns, every contender once a round, after a first round that is not counted; figures are
medians of ``ROUNDS`` rounds and ratios are medians of the rounds' ratios to Parquet. Beside each read
and append, the CPU every process of the job used (the JVM, the Python daemon and workers; from /proc,
each with what its exited children used): on a machine with few cores a Python source's worker takes
CPU the task threads need, so on local[2] CPU more than time tells a contender's cost.

Usage: python bench/bench_spark_floor.py [--records 10000000] [--keys 1000000] [--master local[2]]
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

ROUNDS = 5
APPEND_RECORDS = 2_000_000

CHILD = """
import json, os, sys, time
from pyspark.sql import functions as F
from pyspark.sql.datasource import (DataSource, DataSourceArrowWriter, DataSourceReader, DataSourceStreamReader,
                                    InputPartition, WriterCommitMessage)
from pyspark.sql.streaming.datasource import ReadMaxRows, SupportsTriggerAvailableNow
import compactlog
from compactlog.spark.session import spark_session

data, root, master, rounds, append_records = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
SCHEMA = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, timestampType int"


class FloorReader(DataSourceReader):
    def __init__(self, files):
        self.files = files

    def partitions(self):
        return [InputPartition(f) for f in self.files]

    def read(self, partition):
        import pyarrow as pa
        reader = pa.ipc.open_file(pa.memory_map(partition.value))
        for i in range(reader.num_record_batches):
            yield reader.get_batch(i)


class Dropped(WriterCommitMessage):
    pass


class FloorWriter(DataSourceArrowWriter):
    def write(self, iterator):
        for _ in iterator:
            pass
        return Dropped()


STREAM_ROWS, STREAM_STEP = 20_000, 1_000


class FloorStream(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def initialOffset(self):
        return {"o": 0}

    def prepareForTriggerAvailableNow(self):
        pass

    def getDefaultReadLimit(self):
        return ReadMaxRows(STREAM_STEP)

    def latestOffset(self, start=None, limit=None):
        return {"o": min(STREAM_ROWS, (start or {"o": 0})["o"] + STREAM_STEP)}

    def partitions(self, start, end):
        return [InputPartition((start["o"], end["o"]))]

    def read(self, partition):
        import pyarrow as pa
        start, end = partition.value
        yield pa.record_batch({"key": pa.array([b"k%d" % i for i in range(start, end)]),
                               "value": pa.array([b"v" * 100] * (end - start))})

    def commit(self, end):
        pass


class Floor(DataSource):
    @classmethod
    def name(cls):
        return "floor"

    def streamReader(self, schema):
        return FloorStream()

    def schema(self):
        return SCHEMA

    def reader(self, schema):
        return FloorReader(json.loads(self.options["files"]))

    def writer(self, schema, overwrite):
        return FloorWriter()


spark = spark_session(master)
spark.dataSource.register(Floor)
ours = spark.read.format("compactlog").option("path", data).option("subscribe", "bench").load()
parquet = f"{root}/parquet-read"
ours.write.parquet(parquet)
# the floor reads the same ranges as ours: one per task slot, at equal offset counts
slots = spark.sparkContext.defaultParallelism
end = 0
with compactlog.open(data) as cl:
    end = cl.end_offsets("bench")[0]
files = []
for i in range(slots):
    from compactlog.spark.arrow import read_partition
    import pyarrow as pa
    files.append(f"{root}/floor-{i}.arrow")
    batches = read_partition(data, "bench", 0, end * i // slots, end * (i + 1) // slots, False)
    first = next(batches)
    with pa.ipc.new_file(files[-1], first.schema) as sink:
        sink.write_batch(first)
        for b in batches:
            sink.write_batch(b)


def query(df):
    return df.groupBy("key").agg(F.max("offset").alias("o"), F.sum(F.length("value")).alias("b")).agg(
        F.count("*"), F.sum("b")).collect()[0]


reads = {"floor (batches built beforehand)": spark.read.format("floor").option("files", json.dumps(files)).load(),
         "compactlog (defaults)": ours, "parquet": spark.read.parquet(parquet)}
df = spark.range(append_records).select(
    F.concat(F.lit("key-"), (F.col("id") % 100000).cast("string")).alias("key"),
    F.concat(F.lit('{"price": '), F.col("id").cast("string"),
             F.lit(', "currency": "EUR", "note": "'), F.lit("x" * 48), F.lit('"}')).alias("value"),
).cache()
df.count()


stream_data = f"{root}/stream"
with compactlog.open(stream_data) as cl:
    cl.create_topic("s", 1)
    for i in range(STREAM_ROWS):
        cl.produce("s", b"v" * 100, key=b"k%d" % i)
streams = {"floor (rows made on the spot)": lambda: spark.readStream.format("floor").schema("key binary, value binary").load(),
           "compactlog": lambda: spark.readStream.format("compactlog").option("path", stream_data).option("subscribe", "s")
           .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", str(STREAM_STEP)).load()}


def per_micro_batch(make):
    counts = []
    query = (make().writeStream.foreachBatch(lambda df, _: counts.append(df.count()))
             .option("checkpointLocation", f"{root}/checkpoints/{time.perf_counter_ns()}")
             .trigger(availableNow=True).start())
    t0 = time.perf_counter()
    query.awaitTermination()
    assert sum(counts) == STREAM_ROWS, counts  # every row once
    return (time.perf_counter() - t0) / len(counts)


def append(name, rep):
    if name.startswith("floor"):
        df.write.format("floor").mode("append").save()
    elif name.startswith("compactlog"):
        path = f"{root}/append-{rep}"
        with compactlog.open(path) as cl:
            cl.create_topic("bench", 3, {"compression.type": "lz4"})
        df.write.format("compactlog").option("path", path).option("topic", "bench") \\
            .option("kafka.batch.size", "262144").mode("append").save()
    else:
        df.write.mode("overwrite").option("compression", "lz4").parquet(f"{root}/parquet-write")


out = {"read": {}, "append": {}, "micro-batch": {}}
answers = set()
TICK = os.sysconf("SC_CLK_TCK")


def cpu():
    # CPU seconds so far of every process under this one (the JVM, the Python daemon and workers), each
    # with what its exited children used: each second once, whichever process exits meanwhile
    procs = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                raw = open(f"/proc/{d}/stat").read()
            except OSError:
                continue
            f = raw[raw.rindex(")") + 2 :].split()
            procs[int(d)] = (int(f[1]), sum(map(int, f[11:15])) / TICK)
    mine, grew = {os.getpid()}, True
    while grew:
        grew = False
        for pid, (ppid, _) in procs.items():
            if ppid in mine and pid not in mine:
                mine.add(pid)
                grew = True
    mine.discard(os.getpid())
    return sum(procs[p][1] for p in mine)


def timed(kind, name, run):
    c0, t0 = cpu(), time.perf_counter()
    run()
    c1, t1 = cpu(), time.perf_counter()
    out[kind].setdefault(name, []).append(t1 - t0)
    out["cpu"].setdefault(kind, {}).setdefault(name, []).append(c1 - c0)


out["cpu"] = {}
for rep in range(1 + rounds):
    for name, frame in reads.items():
        timed("read", name, lambda: answers.add(tuple(query(frame))))
    for name in ("floor (batches dropped)", "compactlog (batch.size 262144)", "parquet (lz4)"):
        timed("append", name, lambda: append(name, rep))
    for name, make in streams.items():
        out["micro-batch"].setdefault(name, []).append(per_micro_batch(make))
assert len(answers) == 1, answers  # every source read the same rows
spark.stop()
print(json.dumps(out))
"""


def main() -> None:
    args, console, root = bench_start("spark-floor")
    try:
        (data,) = write_copies(root, ["data"], args, console)
        master = "local[2]" if args.master == "local[*]" else args.master
        r = run_child(CHILD, data, root, master, str(ROUNDS), str(APPEND_RECORDS))
        console.print(json.dumps(r))
        t = Table(title=f"Spark's Python data source API alone ({master}, {os.cpu_count()} cores): medians of "
                        f"{ROUNDS} rounds after a first one")
        for col in ("", "contender", "seconds", "rows/s", "vs Parquet, median of rounds", "CPU s (JVM and Python)"):
            t.add_column(col, justify="right")
        for what, rows in (("read + groupBy", args.records), ("append", APPEND_RECORDS)):
            kind = "read" if what != "append" else "append"
            runs = {name: times[1:] for name, times in r[kind].items()}
            pq = next(times for name, times in runs.items() if name.startswith("parquet"))
            for name, times in runs.items():
                t.add_row(what, name, *median_cells(rows, times, pq), f"{statistics.median(r['cpu'][kind][name][1:]):.2f}")
        console.print(t)
        m = Table(title="one micro-batch of 1,000 rows from a Python stream source (availableNow): medians")
        for col in ("contender", "seconds a micro-batch", "rows/s", "vs the floor, median of rounds"):
            m.add_column(col, justify="right")
        runs = {name: times[1:] for name, times in r["micro-batch"].items()}
        floor = next(times for name, times in runs.items() if name.startswith("floor"))
        for name, times in runs.items():
            m.add_row(name, *median_cells(1_000, times, floor, digits=3))
        console.print(m)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
