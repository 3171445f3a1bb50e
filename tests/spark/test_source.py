"""The compactlog data source: Spark's Kafka-source schema, offsets, headers, splits, streaming, appends."""

from __future__ import annotations

import json

import pytest

import compactlog

TS = 1_700_000_000_000


@pytest.fixture
def data(tmp_path):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("prices", 3, {"segment.bytes": "1000"})
        cl.create_topic("orders", 1)
        rows = [(b"p%d" % (i % 17), b"v%d" % i, (("src", b"shop"),) if i % 4 == 0 else ()) for i in range(600)]
        cl.produce_batch("prices", rows, compression="zstd", timestamp=TS, batch_bytes=300)
        cl.produce("prices", None, key=b"p3", timestamp=TS + 1)
        cl.produce("orders", b"o1", key=b"a", timestamp=TS)
        expected = sorted((r.partition, r.offset, r.key, r.value, r.timestamp) for r in cl.consume("prices", from_beginning=True))
    return tmp_path, expected


def load(spark, path, **opts):
    r = spark.read.format("compactlog").option("path", str(path))
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def test_batch_read_has_kafkas_schema_and_every_record(spark, data):
    path, expected = data
    df = load(spark, path, subscribe="prices")
    assert [f.name for f in df.schema.fields] == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    assert df.schema["timestamp"].dataType.typeName() == "timestamp"
    rows = sorted((r.partition, r.offset, bytes(r.key), None if r.value is None else bytes(r.value),
                   int(r.timestamp.timestamp() * 1000)) for r in df.collect())
    assert rows == expected
    assert {r.topic for r in df.select("topic").distinct().collect()} == {"prices"}


def test_offsets_patterns_and_splits(spark, data):
    path, expected = data
    start = json.dumps({"prices": {"0": 10, "1": -2, "2": -1}})
    end = json.dumps({"prices": {"0": 20, "1": -1, "2": -1}})
    df = load(spark, path, subscribe="prices", startingOffsets=start, endingOffsets=end)
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert got == [(p, o) for p, o, *_ in expected if (p == 0 and 10 <= o < 20) or p == 1]
    assert load(spark, path, subscribePattern="pri.*").count() == len(expected)
    assert load(spark, path, subscribePattern=".*").count() == len(expected) + 1
    split = load(spark, path, subscribe="prices", maxPartitionBytes="500")
    assert split.rdd.getNumPartitions() > 3
    assert split.count() == len(expected)


def test_headers(spark, data):
    path, _ = data
    df = load(spark, path, subscribe="prices", includeHeaders="true")
    with_headers = df.where("size(headers) > 0").collect()
    assert len(with_headers) == 150
    assert all(r.headers[0].key == "src" and bytes(r.headers[0].value) == b"shop" for r in with_headers)


def test_clear_errors(spark, data):
    path, _ = data
    with pytest.raises(Exception, match="Topic 'nope' does not exist"):
        load(spark, path, subscribe="nope").count()
    with pytest.raises(Exception, match='option "path"'):
        spark.read.format("compactlog").option("subscribe", "prices").load().count()
    missing = path / "no-such-dir"
    with pytest.raises(Exception, match=f"data directory {missing} does not exist"):
        load(spark, missing, subscribe="prices").count()
    with pytest.raises(Exception, match=f"data directory {missing} does not exist"):
        spark.createDataFrame([("v",)], "value string").write.format("compactlog").option("path", str(missing)) \
            .option("topic", "prices").mode("append").save()
    assert not missing.exists(), "nothing is created where the data directory was expected"


def test_streaming_available_now_reads_everything_in_bounded_batches(spark, data, tmp_path_factory):
    path, expected = data
    seen = []
    q = (spark.readStream.format("compactlog").option("path", str(path)).option("subscribe", "prices")
         .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "200").load()
         .writeStream.foreachBatch(lambda df, i: seen.append((i, df.count())))
         .option("checkpointLocation", str(tmp_path_factory.mktemp("ckpt")))
         .trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert sum(n for _, n in seen) == len(expected)
    assert len([n for _, n in seen if n]) >= 3 and max(n for _, n in seen) <= 200


def test_append_dataframe_uses_topic_codec_and_partitioner(spark, tmp_path):
    from kafka.partitioner.default import murmur2

    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 4, {"compression.type": "lz4"})
    df = spark.createDataFrame([(f"k{i}", f"v{i}", [("h", bytearray(b"1"))]) for i in range(100)],
                               "key string, value string, headers array<struct<key:string,value:binary>>")
    df.write.format("compactlog").option("path", str(tmp_path)).option("topic", "t").mode("append").save()
    with compactlog.open(tmp_path) as cl:
        recs = list(cl.consume("t", from_beginning=True))
        assert sorted(r.value for r in recs) == sorted(f"v{i}".encode() for i in range(100))
        assert all(r.partition == (murmur2(r.key) & 0x7FFFFFFF) % 4 for r in recs)
        assert all(r.headers == (("h", b"1"),) for r in recs)
        assert {b.codec.config_name for p in range(4) for b in cl.log("t", p).batches(0)} == {"lz4"}
    assert not list((tmp_path / "__staging").iterdir())


def test_a_bad_row_appends_nothing(spark, tmp_path):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("c", 1, {"cleanup.policy": "compact"})
    df = spark.createDataFrame([("k1", "v1"), (None, "keyless")], "key string, value string")
    with pytest.raises(Exception, match="Compacted topic cannot accept message without key"):
        df.write.format("compactlog").option("path", str(tmp_path)).option("topic", "c").mode("append").save()
    with compactlog.open(tmp_path) as cl:
        assert cl.end_offsets("c") == {0: 0}
    assert not list((tmp_path / "__staging").iterdir())


def test_export_latest_value_per_key(spark, data, tmp_path_factory):
    from compactlog.spark.jobs import export_latest

    path, expected = data
    out = tmp_path_factory.mktemp("export") / "latest"
    n = export_latest(spark, str(path), "prices", str(out), progress=lambda _m: None)
    latest = {}
    for p, o, k, v, _ in sorted(expected, key=lambda r: r[1]):
        latest[(p, k)] = v
    live = {k: v for (p, k), v in latest.items() if v is not None}
    assert n == len(live) == 16  # p3 was deleted by its tombstone
    got = {bytes(r.key): bytes(r.value) for r in spark.read.parquet(str(out)).collect()}
    assert got == {k: v for k, v in live.items()}


def test_recompress_keeps_every_record_and_offset(spark, tmp_path):
    from compactlog.spark.recompress import recompress_topic

    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 2, {"segment.bytes": "20000"})
        cl.produce_batch("t", [(b"key-%d" % (i % 50), b'{"price": %d, "currency": "EUR"}' % i) for i in range(3000)],
                         batch_bytes=2000)
        before = [(r.partition, r.offset, r.key, r.value, r.timestamp) for r in cl.consume("t", from_beginning=True)]
        size_before = sum(cl.log("t", p).size for p in range(2))
        active = {p: cl.log("t", p).active_segment.base_offset for p in range(2)}
        results = recompress_topic(spark, cl, "t", "zstd", 3, progress=lambda _m: None)
        assert results and all(r.bytes_after < r.bytes_before for r in results)
        after = [(r.partition, r.offset, r.key, r.value, r.timestamp) for r in cl.consume("t", from_beginning=True)]
        assert after == before
        for p in range(2):
            codecs = {b.codec.config_name for b in cl.log("t", p).batches(0) if b.base_offset < active[p]}
            assert codecs == {"zstd"}
        assert sum(cl.log("t", p).size for p in range(2)) < size_before
    with compactlog.open(tmp_path) as cl:  # and it reopens the same
        assert [(r.partition, r.offset, r.key, r.value, r.timestamp) for r in cl.consume("t", from_beginning=True)] == before
    assert not [n for n in (tmp_path / "t-0").iterdir() if n.name.endswith((".cleaned", ".swap"))]
    assert not list((tmp_path / "__staging").iterdir())


def test_recompress_rejects_a_bad_level_and_touches_nothing(spark, tmp_path):
    from compactlog.errors import InvalidConfigError
    from compactlog.spark.recompress import recompress_topic

    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1, {"segment.bytes": "2000"})
        cl.produce_batch("t", [(b"k", b"v" * 50)] * 200, batch_bytes=500)
        files_before = sorted(p.name for p in (tmp_path / "t-0").iterdir())
        with pytest.raises(InvalidConfigError, match="compression.zstd.level"):
            recompress_topic(spark, cl, "t", "zstd", 99, progress=lambda _m: None)
        assert sorted(p.name for p in (tmp_path / "t-0").iterdir()) == files_before


def test_recompress_refuses_a_corrupt_batch_rather_than_sealing_it_with_a_new_crc(spark, tmp_path):
    """A flipped byte in a closed segment: recompressing it would give the damaged records a fresh,
    valid CRC; the job fails instead and the partition's files stay as they were."""
    from compactlog.spark.recompress import recompress_topic

    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1, {"segment.bytes": "2000"})
        cl.produce_batch("t", [(b"k", b"value-%03d" % i) for i in range(200)], batch_bytes=500)
    first = tmp_path / "t-0" / "00000000000000000000.log"
    raw = bytearray(first.read_bytes())
    raw[raw.index(b"value-001") + 8] ^= 0x01  # value-001 reads value-000: plausible, only the CRC tells
    first.write_bytes(bytes(raw))
    with compactlog.open(tmp_path) as cl:
        files_before = {p.name: p.read_bytes() for p in (tmp_path / "t-0").iterdir() if p.suffix == ".log"}
        with pytest.raises(Exception, match="(?i)crc|corrupt"):
            recompress_topic(spark, cl, "t", "gzip", progress=lambda _m: None)
        assert {p.name: p.read_bytes() for p in (tmp_path / "t-0").iterdir() if p.suffix == ".log"} == files_before


def test_a_corrupt_batch_fails_the_read_naming_it_unless_crcs_are_off(spark, damaged):
    with pytest.raises(Exception, match=r"t-0: batch at offset 1 is corrupt .*t-0/00000000000000000000\.log position"):
        load(spark, damaged, subscribe="t").collect()
    rows = load(spark, damaged, subscribe="t", **{"kafka.check.crcs": "false"}).collect()
    assert [bytes(r.value) for r in sorted(rows, key=lambda r: r.offset)] == [b"value-0", b"value-0", b"value-2"]
    with pytest.raises(Exception, match='kafka.check.crcs" must be true or false'):
        load(spark, damaged, subscribe="t", **{"kafka.check.crcs": "maybe"}).collect()


def test_a_kafka_log_directory_loads_into_spark(spark, kafka_dir):
    """A directory laid out by Kafka's rules (no topic metadata of ours) reads as any other."""
    path, made = kafka_dir
    rows = load(spark, path, subscribe="prices,__consumer_offsets").collect()
    got = {t: sorted((r.partition, r.offset, bytes(r.key), bytes(r.value)) for r in rows if r.topic == t)
           for t in ("prices", "__consumer_offsets")}
    assert got == {t: sorted(made["expected"][t]) for t in got}


def test_a_schema_naming_fewer_columns_reads_only_those(spark, data):
    """Spark cannot prune a Python source's columns: a caller's ``.schema(...)`` does, in its order."""
    path, expected = data
    df = spark.read.format("compactlog").schema("offset long, value binary, partition int") \
        .option("path", str(path)).option("subscribe", "prices").option("minPartitions", "4").load()
    assert [f.name for f in df.schema.fields] == ["offset", "value", "partition"]
    rows = sorted((r.partition, r.offset, None if r.value is None else bytes(r.value)) for r in df.collect())
    assert rows == [(p, o, v) for p, o, _k, v, _t in expected]
    with_headers = spark.read.format("compactlog").schema("headers array<struct<key: string, value: binary>>") \
        .option("path", str(path)).option("subscribe", "prices").option("includeHeaders", "true").load()
    assert with_headers.where("size(headers) > 0").count() == 150


@pytest.mark.parametrize("schema, named", [
    ("key string", "'key' string"),  # a Kafka column with another type
    ("key binary, price double", "'price' double"),  # no such column
    ("headers array<struct<key: string, value: binary>>", "'headers'"),  # headers without includeHeaders
])
def test_a_schema_the_source_cannot_give_is_named(spark, data, schema, named):
    path, _ = data
    df = spark.read.format("compactlog").schema(schema).option("path", str(path)).option("subscribe", "prices").load()
    with pytest.raises(Exception, match=f"may name only its columns, with their types .*{named}"):
        df.count()


def test_streaming_with_a_schema_naming_fewer_columns(spark, data, tmp_path_factory):
    path, expected = data
    seen: list[int] = []
    q = (spark.readStream.format("compactlog").schema("partition int, offset long").option("path", str(path))
         .option("subscribe", "prices").option("startingOffsets", "earliest").load()
         .writeStream.foreachBatch(lambda df, i: seen.extend(r.offset * 10 + r.partition for r in df.collect()))
         .option("checkpointLocation", str(tmp_path_factory.mktemp("ckpt")))
         .trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert sorted(seen) == sorted(o * 10 + p for p, o, *_ in expected)
