"""A Kafka broker's log directory opens as Kafka's log manager opens it: topics from the partition
folders, topic ids from ``partition.metadata``, configs from the broker's defaults (and Kafka's own for
its internal topics), and every file Kafka keeps there left alone."""

from __future__ import annotations


import compactlog
from compactlog.consumer import SnapshotConsumer
from compactlog.storage.topics import read_topic_id
from compactlog.verify import verify

OFFSETS = "__consumer_offsets"  # the kafka_dir fixture (tests/conftest.py) writes this and "prices"


def test_a_kafka_log_directory_opens_with_its_topics(kafka_dir):
    root, made = kafka_dir
    with compactlog.open(root) as cl:
        assert cl.list_topics() == sorted(["prices", OFFSETS])
        assert {t: cl.describe_topic(t).topic_id for t in ("prices", OFFSETS)} == made["ids"]
        assert read_topic_id(root / "prices-1") == made["ids"]["prices"]
        offsets = cl.describe_topic(OFFSETS)
        assert len(offsets.partitions) == 3 and offsets.partitions[1].log_end_offset == 0
        assert offsets.config.compact and offsets.config.segment_bytes == 104857600  # Kafka's own configs for it
        assert not cl.describe_topic("prices").config.compact  # the broker's defaults
        for t in ("prices", OFFSETS):  # the transaction marker is not handed out as a record
            assert [(r.partition, r.offset, r.key, r.value) for r in cl.consume(t, from_beginning=True)] == made["expected"][t]
    # Kafka's files are left as they were, and no folder of ours was added.
    assert (root / "prices-0" / "00000000000000000123.snapshot").read_bytes() == b"producer state"
    assert (root / "prices-0" / "leader-epoch-checkpoint").exists() and (root / "meta.properties").exists()
    assert not (root / "__topics").exists()
    assert not (root / "prices-7.4b2e2a1f0b8c4f4d9c0d3d0e0a0b0c0d-delete").exists()  # Kafka removes these too


def test_a_kafka_log_directory_is_read_without_the_lock_cleaned_and_verified(kafka_dir):
    root, made = kafka_dir
    follower = SnapshotConsumer(root, "prices", start="earliest")
    got = []
    while batch := follower.poll():
        got += [(r.partition, r.offset, r.key, r.value) for r in batch]
    assert sorted(got) == sorted(made["expected"]["prices"])
    with compactlog.open(root) as cl:
        report = cl.clean()
        assert {(r.topic, r.partition) for r in report.compactions} == {(OFFSETS, 0), (OFFSETS, 2)}
        latest = {(r.partition, r.key): r.value for r in cl.consume(OFFSETS, from_beginning=True)}
        assert latest == {(p, b"group-%d" % g): b"offset-%d" % (196 + g) for p in (0, 2) for g in range(4)}
    report = verify(root)
    assert report.errors == []


def test_altering_a_kafka_topics_configs_keeps_them(kafka_dir):
    root, _ = kafka_dir
    with compactlog.open(root) as cl:
        cl.alter_topic_config("prices", set={"cleanup.policy": "compact"})
    with compactlog.open(root) as cl:
        assert cl.describe_topic("prices").config.compact
        cl.delete_topic("prices")
    with compactlog.open(root) as cl:
        assert cl.list_topics() == [OFFSETS]
