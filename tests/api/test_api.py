"""The embedded API: topics, produce, consume, partitioning, configs, reopen after close or crash."""

from __future__ import annotations

import json

import pytest

import compactlog
from compactlog.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidRecordError,
    InvalidTopicError,
    KafkaStorageError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from compactlog.records import kernels


def test_produce_consume_round_trip_keeps_order_and_offsets(tmp_path):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("prices", 1)
        md = cl.produce("prices", b"10", key=b"p3", headers=[("source", b"shop"), ("empty", None)])
        assert (md.partition, md.offset) == (0, 0)
        res = cl.produce_batch("prices", [(b"p%d" % i, b"v%d" % i) for i in range(1000)], compression="zstd", batch_bytes=512)
        assert res[0].first_offset == 1 and res[0].last_offset == 1000 and res[0].batches > 1
    with compactlog.open(tmp_path) as cl:
        recs = list(cl.consume("prices", from_beginning=True))
        assert [r.offset for r in recs] == list(range(1001))
        assert recs[0].headers == (("source", b"shop"), ("empty", None))
        assert recs[500].key == b"p499" and recs[500].value == b"v499"
        assert list(cl.consume("prices")) == []  # default start is the end, like auto.offset.reset=latest
        assert [r.offset for r in cl.consume("prices", partition=0, offset=998)] == [998, 999, 1000]
        assert cl.end_offsets("prices") == {0: 1001}


def test_keys_land_on_kafkas_default_partition(tmp_path):
    from kafka.partitioner.default import murmur2

    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 6)
        keys = [b"key-%d" % i for i in range(200)]
        cl.produce_batch("t", [(k, b"v") for k in keys])
        for rec in cl.consume("t", from_beginning=True):
            assert rec.partition == (murmur2(rec.key) & 0x7FFFFFFF) % 6
        assert cl.produce("t", b"v", key=b"key-7").partition == (murmur2(b"key-7") & 0x7FFFFFFF) % 6
    assert kernels.partition_for_keys([None], 3) == [-1]


def test_consume_from_timestamp(tmp_path):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1)
        for i in range(10):
            cl.produce("t", b"v", key=b"k", timestamp=1_000 + i * 100)
        assert [r.offset for r in cl.consume("t", timestamp=1_450)] == [5, 6, 7, 8, 9]


def test_topic_admin_errors(tmp_path):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("a.b", 2)
        with pytest.raises(TopicAlreadyExistsError):
            cl.create_topic("a.b", 1)
        with pytest.raises(TopicAlreadyExistsError, match="collides"):
            cl.create_topic("a_b", 1)
        with pytest.raises(InvalidTopicError):
            cl.create_topic("../escape", 1)
        with pytest.raises(InvalidPartitionsError):
            cl.create_topic("zero", 0)
        with pytest.raises(InvalidConfigError, match="Unknown topic config name: segment.byte"):
            cl.create_topic("bad", 1, {"segment.byte": "10"})
        with pytest.raises(InvalidConfigError, match="Invalid value lots for configuration retention.ms"):
            cl.create_topic("bad", 1, {"retention.ms": "lots"})
        assert "bad" not in cl.list_topics()
        with pytest.raises(UnknownTopicOrPartitionError):
            cl.produce("missing", b"v")
        with pytest.raises(UnknownTopicOrPartitionError):
            cl.produce("a.b", b"v", partition=2)
    assert not (tmp_path / "bad-0").exists()
    assert not (tmp_path / "..").joinpath("escape-0").exists()


def test_delete_topic_removes_data_and_it_stays_gone(tmp_path):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("gone", 2)
        cl.produce("gone", b"v", key=b"k")
        cl.delete_topic("gone")
        assert cl.list_topics() == []
    assert not any(p.name.startswith("gone-") for p in tmp_path.iterdir())
    with compactlog.open(tmp_path) as cl:
        assert cl.list_topics() == []
        cl.create_topic("gone", 1)
        assert cl.end_offsets("gone") == {0: 0}


def test_alter_config_applies_at_once_and_persists(tmp_path):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1, {"retention.ms": "1000"})
        cl.alter_topic_config("t", set={"compression.type": "lz4", "cleanup.policy": "compact"}, delete=["retention.ms"])
        with pytest.raises(InvalidRecordError, match="without key"):
            cl.produce("t", b"v")
        cl.produce("t", b"v", key=b"k")
        assert next(iter(cl.log("t").batches(0))).codec.config_name == "lz4"
        with pytest.raises(InvalidConfigError, match="Invalid config"):
            cl.alter_topic_config("t", delete=["no.such"])
    meta = json.loads((tmp_path / "__topics" / "t.json").read_text())
    assert meta["config"] == {"compression.type": "lz4", "cleanup.policy": "compact"}
    with compactlog.open(tmp_path) as cl:
        desc = {r.name: r for r in cl.describe_topic("t").config.describe()}
        assert desc["compression.type"].value == "lz4" and desc["compression.type"].source == "DYNAMIC_TOPIC_CONFIG"
        assert desc["retention.ms"].value == "604800000" and desc["retention.ms"].source == "DEFAULT_CONFIG"


def test_broker_defaults_from_server_properties(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("# broker\nnum.partitions=3\nlog.retention.hours=1\nlog.segment.bytes : 4096\n")
    with compactlog.open(tmp_path / "data", props) as cl:
        d = cl.create_topic("t")
        assert len(d.partitions) == 3
        assert d.config.retention_ms == 3_600_000 and d.config.segment_bytes == 4096
        rows = {r.name: r for r in d.config.describe()}
        assert rows["retention.ms"].source == "STATIC_BROKER_CONFIG"


def test_a_data_directory_is_opened_by_one_process_at_a_time(tmp_path):
    with compactlog.open(tmp_path):
        with pytest.raises(KafkaStorageError, match="already using this data directory"):
            compactlog.open(tmp_path)
    compactlog.open(tmp_path).close()


def test_checkpoints_written_in_kafka_format_on_close(tmp_path):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 2)
        cl.produce_batch("t", [(b"k%d" % i, b"v") for i in range(50)])
    text = (tmp_path / "recovery-point-offset-checkpoint").read_text().splitlines()
    assert text[0] == "0" and text[1] == "2"
    ends = {(ln.split()[0], int(ln.split()[1])): int(ln.split()[2]) for ln in text[2:]}
    assert sum(ends.values()) == 50
    assert (tmp_path / ".kafka_cleanshutdown").exists()


def test_retention_by_size_through_clean(tmp_path):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1, {"segment.bytes": "2000", "retention.bytes": "4000", "file.delete.delay.ms": "0"})
        cl.produce_batch("t", [(b"k", b"x" * 100)] * 200, batch_bytes=500)
        before = cl.log("t").size
        deleted = cl.clean("t").deleted_segments
        assert deleted[("t", 0)] > 0
        lg = cl.log("t")
        assert lg.size < before and lg.size <= 4000 + 2000
        recs = list(cl.consume("t", from_beginning=True))
        assert recs[0].offset == lg.log_start_offset > 0 and recs[-1].offset == 199


def test_background_housekeeping_applies_retention(tmp_path):
    """A long-running process deletes expired segments by itself (bounded wait, no fixed sleep)."""
    import time as _time

    broker = {"log.retention.check.interval.ms": "20", "log.flush.offset.checkpoint.interval.ms": "20"}
    with compactlog.open(tmp_path, broker, background=True) as cl:
        cl.create_topic("t", 1, {"segment.bytes": "1000", "retention.ms": "1", "file.delete.delay.ms": "0"})
        cl.produce_batch("t", [(b"k", b"x" * 100)] * 40, batch_bytes=300, timestamp=1)
        deadline = _time.monotonic() + 10
        while cl.log("t").log_start_offset != 40 and _time.monotonic() < deadline:  # it may run mid-produce
            _time.sleep(0.01)
        assert cl.log("t").log_start_offset == 40  # every record had expired: every segment went
        assert list(cl.consume("t", from_beginning=True)) == []
        assert cl.produce("t", b"new", key=b"k").offset == 40  # offsets never go back
