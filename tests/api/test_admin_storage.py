"""The storage side of the broker's admin APIs: growing a topic (CreatePartitions), moving a log start
offset (DeleteRecords), and the checks of CreateTopics' and AlterConfigs' validate_only."""

from __future__ import annotations

import os
import shutil
import time

import pytest

import compactlog
from compactlog.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    OffsetOutOfRangeError,
    PolicyViolationError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from compactlog.storage import files
from compactlog.storage.topics import read_topics


def test_a_topic_grows_and_keeps_what_it_had(tmp_path):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 2)
        cl.produce("t", b"old", partition=1)
        assert cl.create_partitions("t", 4, validate_only=True) is None
        assert len(cl.describe_topic("t").partitions) == 2
        d = cl.create_partitions("t", 4)
        assert [p.partition for p in d.partitions] == [0, 1, 2, 3]
        cl.produce("t", b"new", partition=3)
        for count in (4, 3, 0):
            with pytest.raises(InvalidPartitionsError, match="can only be added"):
                cl.create_partitions("t", count)
        with pytest.raises(UnknownTopicOrPartitionError):
            cl.create_partitions("nope", 2)
    with compactlog.open(tmp_path) as cl:
        assert len(cl.describe_topic("t").partitions) == 4
        assert [r.value for r in cl.consume("t", 1, from_beginning=True)] == [b"old"]
        assert [r.value for r in cl.consume("t", 3, from_beginning=True)] == [b"new"]


def test_growth_respects_max_broker_partitions(tmp_path):
    with compactlog.open(tmp_path, {"max.broker.partitions": "5"}) as cl:
        cl.create_topic("t", 3)
        with pytest.raises(PolicyViolationError, match="max.broker.partitions is 5"):
            cl.create_partitions("t", 6)
        assert cl.manager.partitions_for("t") == 3
        cl.create_partitions("t", 5)


@pytest.mark.parametrize("count", [10_001, 2**31 - 1, 10**30])
def test_a_huge_count_is_refused_at_once_and_makes_nothing(tmp_path, count):
    """max.broker.partitions (10,000 by default) bounds a new topic and a grown one alike, before any
    directory is made; POLICY_VIOLATION, as Kafka answers a request over its controller's batch."""
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 2)
        before = sorted(p.name for p in tmp_path.iterdir())
        started = time.monotonic()
        with pytest.raises(PolicyViolationError, match=rf"^Cannot create topic 'huge' with {count} partitions: .*max.broker.partitions is 10000"):
            cl.create_topic("huge", count)
        with pytest.raises(PolicyViolationError, match=rf"Cannot grow topic 't' to {count} partitions"):
            cl.create_partitions("t", count)
        assert time.monotonic() - started < 1
        assert sorted(p.name for p in tmp_path.iterdir()) == before
        assert cl.list_topics() == ["t"] and cl.partitions_for("t") == 2
        assert PolicyViolationError.code == 44


def test_one_change_writes_at_most_kafkas_ten_thousand_records_whatever_the_limit(tmp_path):
    """max.broker.partitions set as high as Kafka's int32 (Kafka's "unlimited") still leaves Kafka's own
    bound: one create writes a topic record, its overrides and its partitions, at most 10,000 in all."""
    with compactlog.open(tmp_path, {"max.broker.partitions": str(2**31 - 1)}) as cl:
        cl.create_topic("t", 1)
        before = sorted(p.name for p in tmp_path.iterdir())
        with pytest.raises(PolicyViolationError, match="one change writes at most 10000 records, and this one "
                                                       "needs 2147483647"):
            cl.create_topic("huge", 2**31 - 2)  # with "t", as many partitions as the limit allows
        with pytest.raises(PolicyViolationError, match="needs 10001"):
            cl.create_topic("h", 9_999, {"retention.ms": "1"})
        with pytest.raises(PolicyViolationError, match="Cannot grow topic 't' to 10002 partitions: one change"):
            cl.create_partitions("t", 10_002)
        assert sorted(p.name for p in tmp_path.iterdir()) == before
        assert cl.check_new_topic("fits", 9_998, {"retention.ms": "1"}) == 9_998
        assert cl.create_partitions("t", 10_001, validate_only=True) is None


def test_a_failed_growth_leaves_the_old_count(tmp_path, monkeypatch):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 2)
        made = []
        real = cl.manager._create_log

        def failing(topic, partition):
            if made:
                raise RuntimeError("power cut")
            made.append(partition)
            return real(topic, partition)

        monkeypatch.setattr(cl.manager, "_create_log", failing)
        with pytest.raises(RuntimeError):
            cl.create_partitions("t", 4)
        monkeypatch.undo()
        assert cl.manager.partitions_for("t") == 2
        assert sorted(p for (t, p) in cl.manager.logs if t == "t") == [0, 1]
        assert not (tmp_path / files.partition_dir_name("t", 2)).exists()
    with compactlog.open(tmp_path) as cl:
        assert len(cl.describe_topic("t").partitions) == 2


def test_a_crash_after_the_new_count_is_written_completes_at_open(tmp_path, monkeypatch):
    with compactlog.open(tmp_path / "data") as cl:
        cl.create_topic("t", 1)

        def crash(topic, partition):
            raise SystemExit("killed")  # nothing after the count was written runs, not even the undo

        monkeypatch.setattr(cl.manager, "_create_log", crash)
        monkeypatch.setattr(cl.manager, "_undo_growth", lambda meta, count: None)
        with pytest.raises(SystemExit):
            cl.create_partitions("t", 3)
        shutil.copytree(tmp_path / "data", tmp_path / "after-crash")
    with compactlog.open(tmp_path / "after-crash") as cl:
        assert [p.partition for p in cl.describe_topic("t").partitions] == [0, 1, 2]
        cl.produce("t", b"x", partition=2)


def test_delete_records_moves_the_start_and_survives_a_crash(tmp_path):
    with compactlog.open(tmp_path / "data") as cl:
        cl.create_topic("t", 1)
        cl.produce_batch("t", [(None, b"%d" % i) for i in range(10)], partition=0)
        assert cl.delete_records("t", 0, 4) == 4
        assert cl.delete_records("t", 0, 2) == 4  # never backwards
        assert next(cl.consume("t", 0, from_beginning=True)).offset == 4
        for offset in (11, -2):
            with pytest.raises(OffsetOutOfRangeError, match="high watermark 10"):
                cl.delete_records("t", 0, offset)
        with pytest.raises(UnknownTopicOrPartitionError):
            cl.delete_records("t", 1, 0)
        shutil.copytree(tmp_path / "data", tmp_path / "after-crash")  # as if killed now: no clean shutdown
        assert cl.delete_records("t", 0, -1) == 10
    with compactlog.open(tmp_path / "after-crash") as cl:
        assert cl.beginning_offsets("t") == {0: 4}


def test_validate_only_checks_without_writing(tmp_path):
    with compactlog.open(tmp_path) as cl:
        assert cl.check_new_topic("t", None, {"cleanup.policy": "compact"}) == 1
        assert cl.list_topics() == []
        with pytest.raises(InvalidConfigError):
            cl.check_new_topic("t", 1, {"segment.bytes": "1"})
        cl.create_topic("t")
        with pytest.raises(TopicAlreadyExistsError):
            cl.check_new_topic("t", 0)  # the name is checked first, as Kafka answers
        cfg = cl.alter_topic_config("t", {"retention.ms": "1000"}, validate_only=True)
        assert cfg.retention_ms == 1000
        assert cl.describe_topic("t").config.overrides == {}


def test_a_delete_interrupted_after_its_folders_were_marked_leaves_the_topics_own_configs(tmp_path):
    """delete_topic marks the partition folders first and removes the metadata after: a crash in between
    must leave the topic with its own configs (compacted here), never folders read with broker defaults
    (delete policy, 7-day retention), which would let retention remove compacted data."""
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("prices", 1, {"cleanup.policy": "compact"})
        cl.produce("prices", b"1", key=b"k")
    os.replace(tmp_path / "prices-0", tmp_path / files.delete_dir_name("prices-0", "abc", files.DELETE_SUFFIX))
    with compactlog.open(tmp_path) as cl:
        assert cl.describe_topic("prices").config.compact
    assert (tmp_path / "prices-0").is_dir()  # opened again, empty
    files.topic_file(tmp_path, "prices").write_text("{garbled")  # a reader must not invent defaults either
    assert "prices" not in read_topics(tmp_path)
