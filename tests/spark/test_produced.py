"""Appends whose batches the JVM builds (spark/java/ProducingWrite.java, RecordAccumulator.java): the same
records, in the same partitions and order, as the Python writer appends; Kafka's partitioner; batches
within the log's limits; and the Python path's errors for rows that cannot be routed, with nothing
appended and nothing left staged."""

from __future__ import annotations

import datetime as dt
import sys
import pytest
from kafka.partitioner.default import murmur2
from pyspark.sql import functions as F

import compactlog
from compactlog.spark.source import CompactLogDataSource

CODECS = ["uncompressed", "gzip", "snappy", "lz4", "zstd"]
T0 = dt.datetime(2024, 5, 1, 12, 0, 0, 123000, tzinfo=dt.timezone.utc)
T0_MS = int(T0.timestamp() * 1000)
SCHEMA = ("key binary, value string, partition int, timestamp timestamp, "
          "headers array<struct<key:string,value:binary>>")


class RowsOnly(CompactLogDataSource):
    """The same source under a name no JVM provider serves: Spark's Python path alone."""

    @classmethod
    def name(cls) -> str:
        return "compactlog_rows"


@pytest.fixture(scope="module")
def rows_only(spark):
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Spark's workers cannot import this module
    spark.dataSource.register(RowsOnly)
    return "compactlog_rows"


def write(df, path, fmt="compactlog", topic="t", **opts):
    w = df.write.format(fmt).option("path", str(path)).mode("append")
    if topic is not None:
        w = w.option("topic", topic)
    for k, v in opts.items():
        w = w.option(k, v)
    w.save()


def topic(path, name="t", partitions=3, **config):
    with compactlog.open(path) as cl:
        cl.create_topic(name, partitions, {k.replace("_", "."): str(v) for k, v in config.items()})
    return path


def by_partition(path, name="t"):
    with compactlog.open(path) as cl:
        got = {}
        for r in cl.consume(name, from_beginning=True):
            got.setdefault(r.partition, []).append(r)
        return got


def batches(path, name="t"):
    with compactlog.open(path) as cl:
        return {p: list(cl.log(name, p).batches(0)) for p in range(len(cl.end_offsets(name)))}


def nothing_staged(path):
    staging = path / "__staging"
    return not staging.exists() or not list(staging.iterdir())


def varied(spark, n=3000):
    """Keys of every length up to 9 (some null, some not UTF-8), null and empty values, headers (null
    lists, empty lists, null values, non-ASCII keys), explicit partitions and null timestamps."""
    rows = []
    for i in range(n):
        key = None if i % 11 == 0 else bytes([(i * 7 + j) % 256 for j in range(i % 10)])
        value = None if i % 13 == 0 else ("" if i % 17 == 0 else f"v{i}-" + "x" * (i % 50))
        part = 1 if i % 19 == 0 else None
        ts = None if i % 23 == 0 else T0 + dt.timedelta(milliseconds=i % 1000 - 500)
        hdrs = None if i % 3 == 0 else ([] if i % 3 == 1 else [("trace", b"%d" % i), ("ü", None)])
        rows.append((key, value, part, ts, hdrs))
    return spark.createDataFrame(rows, SCHEMA).repartition(3)


def plain(r):
    """A record's fields; the time of writing, which two writes cannot share, as "now"."""
    return (r.key, r.value, r.headers, r.timestamp if r.timestamp < T0_MS + 1000 else "now")


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_appends_what_the_python_writer_appends(spark, rows_only, tmp_path, codec):
    df = varied(spark).cache()
    jvm, py = topic(tmp_path / "jvm", compression_type=codec), topic(tmp_path / "py", compression_type=codec)
    before = int(dt.datetime.now(dt.timezone.utc).timestamp() * 1000)
    write(df, jvm)
    write(df, py, rows_only)
    got, want = by_partition(jvm), by_partition(py)
    assert sum(map(len, got.values())) == 3000
    for p in range(3):
        # Keyless rows go to a random sticky partition on either path; keyed and routed rows are fixed.
        assert [plain(r) for r in got[p] if r.key is not None] == [plain(r) for r in want[p] if r.key is not None]
        assert [o for o, r in enumerate(got[p])] == [r.offset for r in got[p]], "offsets from 0, none skipped"
    assert sorted(map(plain, sum(got.values(), [])), key=repr) == sorted(map(plain, sum(want.values(), [])), key=repr)
    now_stamped = [r for rs in got.values() for r in rs if r.timestamp >= before]
    assert len(now_stamped) == len(range(0, 3000, 23))  # a null timestamp is the time of writing
    assert {b.codec.config_name for bs in batches(jvm).values() for b in bs} == {codec.replace("uncompressed", "none")}
    assert nothing_staged(jvm)
    df.unpersist()


def test_a_task_builds_one_batch_a_partition_when_they_fit(spark, rows_only, tmp_path):
    """The JVM path is the one taken: Spark's Python path cuts batches where its Arrow batches end."""
    df = spark.range(25_000).selectExpr("cast(id % 7 as string) as key", "cast(id as string) as value").coalesce(1)
    write(df, topic(tmp_path / "jvm", compression_type="lz4"), **{"kafka.batch.size": "1000000"})
    write(df, topic(tmp_path / "py", compression_type="lz4"), rows_only, **{"kafka.batch.size": "1000000"})
    assert [len(bs) for bs in batches(tmp_path / "jvm").values()] == [1, 1, 1]
    assert all(len(bs) > 1 for bs in batches(tmp_path / "py").values())


def test_keys_hash_like_kafka_and_order_is_kept(spark, tmp_path):
    rows = [(bytes([(i * 31 + j) % 256 for j in range(i % 13)]), i) for i in range(1, 4000)]
    df = spark.createDataFrame(rows, "key binary, n int").selectExpr("key", "cast(n as string) as value")
    write(df.repartition(4), topic(tmp_path, partitions=5))
    got = by_partition(tmp_path)
    for p, rs in got.items():
        assert all((murmur2(r.key) & 0x7FFFFFFF) % 5 == p for r in rs if r.key)
    assert sorted(int(r.value) for rs in got.values() for r in rs) == list(range(1, 4000))
    single = spark.createDataFrame([(f"k{i % 40}", str(i)) for i in range(2000)], "key string, value string")
    write(single.coalesce(1), topic(tmp_path / "ordered"))
    for rs in by_partition(tmp_path / "ordered").values():
        values = [int(r.value) for r in rs]
        assert values == sorted(values), "rows of one partition keep the DataFrame's order"


def test_keyless_rows_stick_to_a_partition_and_switch_after_a_batch(spark, tmp_path):
    df = spark.range(3000).selectExpr("cast(null as binary) as key", "repeat('x', 90) || id as value").coalesce(1)
    write(df, topic(tmp_path), **{"kafka.batch.size": "2000"})
    got = by_partition(tmp_path)
    assert sum(map(len, got.values())) == 3000 and len(got) == 3, "the sticky partition moves on"
    for p, bs in batches(tmp_path).items():
        assert all(b.size <= 2000 for b in bs)
    for rs in got.values():
        ids = [int(r.value[90:]) for r in rs]
        assert ids == sorted(ids)


def test_batch_size_zero_is_a_record_a_batch(spark, tmp_path):
    df = spark.createDataFrame([("k", str(i)) for i in range(50)], "key string, value string")
    write(df, topic(tmp_path, partitions=1), **{"kafka.batch.size": "0"})
    assert [b.record_count for b in batches(tmp_path)[0]] == [1] * 50


def test_batches_stay_within_the_logs_limit_and_a_row_too_large_fails(spark, tmp_path):
    # Random bytes do not shrink: lz4 stores them with its frame's 15 bytes around them, so a batch cut
    # to the limit by its plain size comes out larger, and is split in halves until each fits.
    df = spark.range(4000).selectExpr("substr(unhex(sha2(cast(id as string), 256)), 1, 24) as value")
    path = topic(tmp_path, partitions=1, compression_type="lz4", max_message_bytes=4000)
    write(df.coalesce(1), path, **{"kafka.batch.size": "100000"})
    bs = batches(path)[0]
    assert sum(b.record_count for b in bs) == 4000 and max(b.size for b in bs) <= 4000
    full = max(b.record_count for b in bs)
    assert len(bs) > -(-4000 // full), "some batches were split"
    big = spark.createDataFrame([("k", "y" * 5000)], "key string, value string")
    with pytest.raises(Exception, match="exceeds the maximum configured value of 4000"):
        write(big, topic(tmp_path / "big", partitions=1, compression_type="uncompressed", max_message_bytes=4000))
    assert by_partition(tmp_path / "big") == {} and nothing_staged(tmp_path / "big")


def test_open_batches_are_flushed_when_they_hold_more_than_the_buffer_memory(spark, tmp_path):
    # 64 partitions of 0.75 MB each: every partition fits one batch, all of them together do not fit
    # the producer's 32 MB, so each is closed once before its rows end.
    df = spark.range(64 * 750).selectExpr("cast(id % 64 as int) as partition", "repeat('v', 1000) as value")
    path = topic(tmp_path, partitions=64, max_message_bytes=8 << 20)
    write(df.coalesce(1), path, **{"kafka.batch.size": str(4 << 20)})
    bs = batches(path)
    assert sum(b.record_count for p in bs for b in bs[p]) == 64 * 750
    assert all(len(bs[p]) == 2 for p in bs)


def test_a_topic_column_routes_rows_and_the_topic_option_overrides_it(spark, tmp_path):
    topic(tmp_path)
    topic(tmp_path, "u", 2)
    df = spark.createDataFrame([("a", "1", "t"), ("b", "2", "u"), ("c", "3", "t")], "key string, value string, topic string")
    write(df, tmp_path, topic=None)
    assert sorted(r.value for rs in by_partition(tmp_path).values() for r in rs) == [b"1", b"3"]
    assert [r.value for rs in by_partition(tmp_path, "u").values() for r in rs] == [b"2"]
    write(df, tmp_path, topic="u")
    assert sorted(r.value for rs in by_partition(tmp_path, "u").values() for r in rs) == [b"1", b"2", b"2", b"3"]


@pytest.mark.parametrize("rows, schema, topic_option, message", [
    ([("a", 3)], "value string, partition int", "t", "Partition 3 of topic 't' does not exist"),
    ([("a", -1)], "value string, partition long", "t", "Partition -1 does not exist"),
    ([("a", 5_000_000_000)], "value string, partition long", "t", "Partition 5000000000 of topic 't' does not exist"),
    ([("a",)], "value string", "nope", "Topic 'nope' does not exist"),
    ([("a", None)], "value string, topic string", None, "no topic"),
    ([("a", "nope")], "value string, topic string", None, "Topic 'nope' does not exist"),
    ([("a",)], "value string", None, "no topic"),
    ([("a", [(None, b"x")])], "value string, headers array<struct<key:string,value:binary>>", "t", "null key"),
    ([("a", [None])], "value string, headers array<struct<key:string,value:binary>>", "t", "null key"),
    ([(1, "a")], "key int, value string", "t", "must be binary or string, not int32"),
    ([("a",)], "key string", "t", "needs a value column"),
])
def test_rows_that_cannot_be_routed_fail_the_job_by_name_and_nothing_is_appended(spark, tmp_path, rows, schema,
                                                                               topic_option, message):
    topic(tmp_path)
    with pytest.raises(Exception, match=message):
        write(spark.createDataFrame(rows, schema), tmp_path, topic=topic_option)
    assert by_partition(tmp_path) == {} and nothing_staged(tmp_path)


def test_a_bad_row_after_batches_were_staged_leaves_nothing(spark, tmp_path):
    df = spark.range(20_001).selectExpr("cast(id as string) as value",
                                        "case when id = 20000 then 7 else cast(id % 3 as int) end as partition")
    with pytest.raises(Exception, match="Partition 7 of topic 't' does not exist"):
        write(df.coalesce(1), topic(tmp_path), **{"kafka.batch.size": "1000"})
    assert by_partition(tmp_path) == {} and nothing_staged(tmp_path)


def test_an_overwrite_is_refused_and_an_empty_dataframe_appends_nothing(spark, tmp_path):
    df = spark.createDataFrame([("k", "v")], "key string, value string")
    with pytest.raises(Exception, match="append-only log"):
        df.write.format("compactlog").option("path", str(topic(tmp_path))).option("topic", "t").mode("overwrite").save()
    write(df.limit(0).repartition(3), tmp_path)
    assert by_partition(tmp_path) == {} and nothing_staged(tmp_path)


def test_timestamp_ntz_and_narrow_partition_columns(spark, tmp_path):
    df = spark.sql("select 'v' as value, cast(2 as tinyint) as partition, "
                   "timestamp_ntz'2024-05-01 12:00:00.123' as timestamp")
    write(df, topic(tmp_path))
    (r,), = by_partition(tmp_path).values()
    assert r.partition == 2 and r.timestamp == int(dt.datetime(2024, 5, 1, 12, 0, 0, 123000,
                                                               tzinfo=dt.timezone.utc).timestamp() * 1000)


def test_the_plan_option_is_the_jvm_sides_alone(spark, rows_only, tmp_path):
    """Set on a DataFrame of records, it is refused by name (the JVM side sets its own)."""
    df = spark.createDataFrame([("k", "v")], "key string, value string")
    with pytest.raises(Exception, match="is for compactlog's JVM writer"):
        write(df, topic(tmp_path), rows_only, **{"compactlog.produced.plan": str(tmp_path / "plan")})
    write(df, tmp_path, **{"COMPACTLOG.produced.plan": str(tmp_path / "plan")})
    assert [r.value for rs in by_partition(tmp_path).values() for r in rs] == [b"v"]
    assert not (tmp_path / "plan").exists()


def test_duplicate_column_names_are_refused_as_the_python_path_refuses_them(spark, tmp_path):
    df = spark.sql("select 'a' as key, 'v1' as value, 'b' as key")
    with pytest.raises(Exception, match="DUPLICATED_FIELD_NAME"):
        write(df, topic(tmp_path))
    assert by_partition(tmp_path) == {} and nothing_staged(tmp_path)


def test_a_row_without_a_timestamp_is_stamped_when_it_is_written(spark, tmp_path):
    """Not when the task began: a window of 3 s passes rows that arrive 4 s into their task."""
    import time

    from pyspark.sql.functions import udf

    @udf("string")
    def late(v):
        time.sleep(4)
        return v

    path = topic(tmp_path, partitions=1, message_timestamp_before_max_ms=3000)
    before = int(time.time() * 1000)
    write(spark.createDataFrame([("v",)], "value string").coalesce(1).select(late("value").alias("value")), path)
    (r,), = by_partition(path).values()
    assert r.timestamp >= before + 4000


def test_a_compressed_batch_is_filled_by_its_estimated_compressed_size(spark, rows_only, tmp_path):
    """As Kafka's producer fills one: as the topic's ratio is learnt (a step a batch), batches of records
    that compress well hold more than batch.size of them, and come out larger, never beyond it."""
    df = spark.range(40_000).selectExpr("cast(id % 100 as string) as key",
                                        "concat('{\"price\": ', id, ', \"note\": \"', repeat('x', 60), '\"}') as value")
    jvm = topic(tmp_path / "jvm", partitions=1, compression_type="lz4")
    write(df.coalesce(1), jvm)
    bs = batches(jvm)[0]
    assert sum(b.record_count for b in bs) == 40_000 and max(b.size for b in bs) <= 16384
    quarter = len(bs) // 4
    first, last = sorted(b.size for b in bs[:quarter]), sorted(b.size for b in bs[-quarter - 1 : -1])
    assert last[len(last) // 2] > 2 * first[len(first) // 2]
    py = topic(tmp_path / "py", partitions=1, compression_type="lz4")
    write(df.coalesce(1), py, rows_only)
    assert len(batches(py)[0]) > 1.5 * len(bs)  # cut by plain size, as the API's producer cuts


def test_the_compression_estimate_never_falls_below_what_batches_showed(spark, tmp_path):
    """Records that gzip about 400 times over: the estimate stops at their ratio, so a batch holds about
    batch.size / ratio of them (7 MB), not everything until the producer's buffer.memory is full."""
    df = spark.range(16_000).selectExpr("concat(repeat('a', 4000), id) as value")
    path = topic(tmp_path, partitions=1, compression_type="gzip")
    write(df.coalesce(1), path)
    bs = batches(path)[0]
    assert sum(b.record_count for b in bs) == 16_000
    assert max(b.record_count for b in bs) * 4000 < 16 << 20, "no batch of 32 MiB: the estimate did not fall to 0"


def test_a_row_too_large_for_a_segment_fails_its_task_and_nothing_is_appended(spark, tmp_path):
    """segment.bytes below max.message.bytes: the task refuses the batch (the log would refuse it only
    at its append, after the job's other batches were appended)."""
    rows = [("k%d" % i, "v" * 100) for i in range(50)] + [("big", "y" * 3000)]
    df = spark.createDataFrame(rows, "key string, value string").coalesce(1)
    path = topic(tmp_path, partitions=1, segment_bytes=2000)
    with pytest.raises(Exception, match="exceeds the maximum configured segment size of 2000"):
        write(df, path)
    assert by_partition(path) == {} and nothing_staged(path)
