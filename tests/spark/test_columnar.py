"""The format's columnar reader (spark/java/ColumnarSource.java): Spark gets the Python worker's Arrow
columns as they are and asks only for the columns a query reads; every record still comes once, intact,
at its own offset, whichever columns are read and however often one DataFrame is queried."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import textwrap

import pytest

import compactlog
from compactlog.spark import columnar

TS = 1_700_000_000_000
COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Three partitions of small zstd batches with headers and a null value, and a compacted topic with
    gaps in its offsets."""
    path = tmp_path_factory.mktemp("columnar")
    with compactlog.open(path) as cl:
        cl.create_topic("prices", 3, {"segment.bytes": "1000"})
        rows = [(b"p%d" % (i % 17), b"v%d" % i, (("src", b"shop"),) if i % 4 == 0 else ()) for i in range(600)]
        cl.produce_batch("prices", rows, compression="zstd", timestamp=TS, batch_bytes=300)
        cl.produce("prices", None, key=b"p3", timestamp=TS + 1)
        cl.create_topic("latest", 1, {"cleanup.policy": "compact", "segment.bytes": "1000",
                                      "min.cleanable.dirty.ratio": "0.01"})
        cl.produce_batch("latest", [(b"k%d" % (i % 5), b"%d" % i, ()) for i in range(300)], timestamp=TS,
                         batch_bytes=200)
        cl.clean("latest")
        records = {t: [r for r in cl.consume(t, from_beginning=True)] for t in ("prices", "latest")}
    expected = {t: {(r.partition, r.offset): {"key": r.key, "value": r.value, "topic": t,
                                               "partition": r.partition, "offset": r.offset,
                                               "timestamp": r.timestamp, "timestampType": 0}
                     for r in rs} for t, rs in records.items()}
    assert len(expected["latest"]) < 300  # the cleaner left gaps for the reader to step over
    return path, expected


def load(spark, path, topic="prices", **opts):
    r = spark.read.format("compactlog").option("path", str(path)).option("subscribe", topic)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def plain(name, value):
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if name == "timestamp":
        return round(value.timestamp() * 1000)
    return value


def test_a_session_reads_through_the_columnar_reader_and_prunes(spark, data):
    """On a machine with Java's compiler (the README's set-up) the session has the reader: a read's plan
    is columnar and its scan lists only the columns the query uses."""
    assert columnar.columnar_jar() is not None
    path, _ = data
    plan = load(spark, path).select("offset", "key")._jdf.queryExecution().executedPlan().toString()
    assert "ColumnarToRow" in plan and "compactlog (columnar)" in plan
    scan = next(line for line in plan.splitlines() if "BatchScan" in line)
    assert "offset" in scan and "key" in scan and "value" not in scan and "timestamp" not in scan


@pytest.mark.parametrize("topic", ["prices", "latest"])
def test_every_choice_of_columns_gives_each_record_once_intact(spark, data, topic):
    """Each subset of columns (one, two, the reader's order reversed, all) gives the records of the
    embedded API, each once; the offset tells which record a row must be."""
    path, expected = data
    df = load(spark, path, topic, minPartitions="5")  # ranges cut inside partitions and batches
    choices = [[c] for c in COLUMNS] + [["value", "offset"], ["timestamp", "partition", "key"],
                                        COLUMNS[::-1], COLUMNS]
    for cols in choices:
        got = [tuple(plain(c, getattr(r, c)) for c in cols) for r in df.select(*cols).collect()]
        want = [tuple(rec[c] for c in cols) for rec in expected[topic].values()]
        assert sorted(got, key=repr) == sorted(want, key=repr), cols


def test_one_dataframe_queried_for_different_columns_each_time(spark, data):
    """Spark's own Python source keeps the first reader it made; each pruned scan must make its own."""
    path, expected = data
    df = load(spark, path)
    keys = sorted(bytes(r.key) for r in df.select("key").collect())
    pairs = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    stamps = {round(r.timestamp.timestamp() * 1000) for r in df.select("timestamp").collect()}
    assert keys == sorted(rec["key"] for rec in expected["prices"].values())
    assert pairs == sorted(expected["prices"])
    assert stamps == {TS, TS + 1}
    assert df.count() == len(expected["prices"])  # no column at all: each record still counted once


def test_counts_and_offset_ranges(spark, data):
    path, expected = data
    assert load(spark, path, "latest").count() == len(expected["latest"])
    start, end = json.dumps({"latest": {"0": 7}}), json.dumps({"latest": {"0": 211}})
    df = load(spark, path, "latest", startingOffsets=start, endingOffsets=end, minPartitions="4")
    assert sorted(r.offset for r in df.select("offset").collect()) == \
        sorted(o for _, o in expected["latest"] if 7 <= o < 211)
    assert df.where("offset % 2 = 0").count() == sum(1 for _, o in expected["latest"] if 7 <= o < 211 and o % 2 == 0)


def test_headers_are_read_as_columns(spark, data):
    path, expected = data
    df = load(spark, path, includeHeaders="true")
    got = sorted((r.partition, r.offset, [(h.key, bytes(h.value)) for h in r.headers])
                 for r in df.select("partition", "offset", "headers").collect())
    assert len(got) == len(expected["prices"])
    assert sum(1 for *_, h in got if h == [("src", b"shop")]) == 150
    assert all(h in ([], [("src", b"shop")]) for *_, h in got)


def test_a_query_reading_part_of_the_headers(spark, data):
    """Spark asks for a field of the headers' structs; the source gives whole columns."""
    path, _ = data
    df = load(spark, path, includeHeaders="true")
    assert df.select("headers.key").where("size(key) > 0").count() == 150
    firsts = df.selectExpr("try_element_at(headers, 1).value as v").where("v is not null").collect()
    assert len(firsts) == 150 and {bytes(r.v) for r in firsts} == {b"shop"}


def test_python_udfs_on_the_scan_see_their_own_rows(spark, data):
    """Spark hands Arrow vectors straight to Python UDFs and keeps them while the UDF runs; the worker's
    vectors are refilled for the next batch, so they must not reach a UDF as they are."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    path, expected = data
    double = F.udf(lambda o: o * 2, LongType())
    ln = F.pandas_udf(lambda v: v.str.len(), LongType())
    df = load(spark, path, maxPartitionBytes="500")  # several batches a task
    got = sorted((r.partition, r.offset, r.d, r.n) for r in
                 df.select("partition", "offset", double("offset").alias("d"), ln("value").alias("n")).collect())
    assert got == sorted((p, o, 2 * o, None if rec["value"] is None else len(rec["value"]))
                         for (p, o), rec in expected["prices"].items())


def test_an_empty_topic_and_an_empty_range_read_no_rows(spark, data, tmp_path):
    path, _ = data
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("empty", 2)
    assert load(spark, tmp_path, "empty").count() == 0
    assert load(spark, tmp_path, "empty").select("key", "offset").collect() == []
    same = json.dumps({"latest": {"0": 40}})
    assert load(spark, path, "latest", startingOffsets=same, endingOffsets=same).collect() == []


def test_a_stream_reads_through_the_columnar_reader(spark, data, tmp_path_factory):
    path, expected = data
    seen: list[tuple[int, int, bytes]] = []

    def each(df, _):
        seen.extend((r.partition, r.offset, bytes(r.key)) for r in df.collect())

    q = (spark.readStream.format("compactlog").option("path", str(path)).option("subscribe", "prices")
         .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "150").load()
         .select("partition", "offset", "key")
         .writeStream.foreachBatch(each)
         .option("checkpointLocation", str(tmp_path_factory.mktemp("ckpt")))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(120)
    assert q.exception() is None
    assert sorted(seen) == sorted((p, o, rec["key"]) for (p, o), rec in expected["prices"].items())
    # The last micro-batch's plan: columnar. (Spark builds a stream's scan before it plans a query, so
    # a stream's columns are never pruned; ColumnarToRow reads only the ones used.)
    plan = q._jsq.streamingQuery().lastExecution().executedPlan()
    assert "ColumnarToRow" in plan.toString() and "compactlog (columnar)" in plan.toString(), plan.toString()
    stream = plan.collectLeaves().head().stream()
    assert stream.equals(stream)  # Spark compares plans (to reuse exchanges): a stream equals itself


def test_without_the_columnar_reader_a_session_reads_the_same_rows(data):
    """``COMPACTLOG_SPARK_COLUMNAR=0`` (or a machine where the reader cannot be built): Spark's Python
    source path alone, the same rows."""
    path, expected = data
    child = textwrap.dedent("""
        import json, sys
        from compactlog.spark.session import spark_session
        spark = spark_session("local[1]")
        df = spark.read.format("compactlog").option("path", sys.argv[1]).option("subscribe", "latest").load()
        plan = df.select("offset")._jdf.queryExecution().executedPlan().toString()
        print(json.dumps({"columnar": "ColumnarToRow" in plan,
                          "rows": sorted([r.offset, r.value.decode()] for r in df.collect())}))
        spark.stop()
    """)
    env = {**os.environ, columnar.ENV: "0"}
    out = subprocess.run([sys.executable, "-c", child, str(path)], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["columnar"] is False
    assert got["rows"] == sorted([o, rec["value"].decode()] for (_, o), rec in expected["latest"].items())
