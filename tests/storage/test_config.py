"""Kafka's config names, defaults, validation wording, broker synonyms and describe sources."""

from __future__ import annotations

import pytest

from compactlog.errors import InvalidConfigError
from compactlog.storage.config import TOPIC_CONFIGS, BrokerConfig, LogConfig, alter, docs_table, validate_topic_overrides
from compactlog.storage.configdef import parse_properties

KAFKA_DEFAULTS = {
    "cleanup.policy": "delete", "compression.type": "producer", "compression.gzip.level": "-1",
    "compression.lz4.level": "9", "compression.zstd.level": "3", "delete.retention.ms": "86400000",
    "file.delete.delay.ms": "60000", "flush.messages": str(2**63 - 1), "index.interval.bytes": "4096",
    "max.compaction.lag.ms": str(2**63 - 1), "max.message.bytes": "1048588", "message.timestamp.type": "CreateTime",
    "min.cleanable.dirty.ratio": "0.5", "min.compaction.lag.ms": "0", "preallocate": "false", "retention.bytes": "-1",
    "retention.ms": "604800000", "segment.bytes": "1073741824", "segment.index.bytes": "10485760",
    "segment.jitter.ms": "0", "segment.ms": "604800000",
}


def test_defaults_are_kafkas():
    rows = {r.name: r for r in LogConfig().describe()}
    for name, value in KAFKA_DEFAULTS.items():
        assert rows[name].value == value, name
        assert rows[name].source == "DEFAULT_CONFIG"


@pytest.mark.parametrize("name, value, message", [
    ("segment.bytes", "abc", "Invalid value abc for configuration segment.bytes: Not a number of type INT"),
    ("segment.bytes", "13", "Invalid value 13 for configuration segment.bytes: Value must be at least 14"),
    ("segment.bytes", "3000000000", "Not a number of type INT"),
    ("retention.ms", "-2", "Value must be at least -1"),
    ("min.cleanable.dirty.ratio", "1.5", "Value must be in [0,...,1]"),
    ("compression.type", "zip", "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"),
    ("cleanup.policy", "compact,purge", "String must be one of: compact, delete"),
    ("compression.gzip.level", "0", "Value must be in [1,...,9] or -1"),
    ("compression.zstd.level", "23", "Value must be in [-131072,...,22]"),
    ("preallocate", "yes", "Expected value to be either true or false"),
    ("max.compaction.lag.ms", "0", "Value must be at least 1"),
    ("compaction.strategy", "header:", "Must be offset, timestamp or header:<header name>"),
    ("message.timestamp.type", "createtime", "String must be one of: CreateTime, LogAppendTime"),
])
def test_invalid_values_use_kafkas_wording(name, value, message):
    with pytest.raises(InvalidConfigError) as exc:
        validate_topic_overrides({name: value})
    assert message in str(exc.value)


@pytest.mark.parametrize("name, value", [
    ("segment.bytes", "14"), ("retention.ms", "-1"), ("min.cleanable.dirty.ratio", "0"), ("min.cleanable.dirty.ratio", "1"),
    ("compression.gzip.level", "-1"), ("compression.gzip.level", "9"), ("compression.zstd.level", "-131072"),
    ("cleanup.policy", "compact,delete"), ("cleanup.policy", " compact , delete "), ("preallocate", "TRUE"),
    ("compaction.strategy", "header:version"), ("compaction.strategy", "timestamp"),
])
def test_valid_bounds_are_accepted(name, value):
    validate_topic_overrides({name: value})


def test_unknown_names_are_rejected():
    with pytest.raises(InvalidConfigError, match="Unknown topic config name: retention.msx"):
        validate_topic_overrides({"retention.msx": "1"})


def test_min_lag_above_max_lag_is_rejected():
    with pytest.raises(InvalidConfigError, match=r"min.compaction.lag.ms \(10\) > max.compaction.lag.ms \(5\)"):
        validate_topic_overrides({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})


def test_precedence_overrides_broker_default():
    broker = BrokerConfig(parse_properties(
        "# comment\n! other comment\nlog.retention.hours=48\nlog.retention.minutes = 90\n"
        "log.cleaner.min.cleanable.ratio: 0.2\nlog.segment.bytes \\\n  1048576\ncompression.type=lz4\n"
    ))
    cfg = LogConfig({"compression.type": "zstd"}, broker)
    assert cfg.retention_ms == 90 * 60_000  # minutes beat hours
    assert cfg.min_cleanable_dirty_ratio == 0.2 and cfg.segment_bytes == 1048576
    assert cfg.compression_type == "zstd"
    sources = {r.name: r.source for r in cfg.describe()}
    assert sources["compression.type"] == "DYNAMIC_TOPIC_CONFIG"
    assert sources["retention.ms"] == "STATIC_BROKER_CONFIG" and sources["delete.retention.ms"] == "DEFAULT_CONFIG"
    assert BrokerConfig({"log.retention.ms": "5"}).topic_default(TOPIC_CONFIGS["retention.ms"]) == (5, "log.retention.ms")


def test_timestamp_window_falls_back_to_the_deprecated_difference():
    cfg = LogConfig({"message.timestamp.difference.max.ms": "1000"})
    assert cfg.message_timestamp_before_max_ms == 1000 and cfg.message_timestamp_after_max_ms == 1000
    cfg = LogConfig({"message.timestamp.difference.max.ms": "1000", "message.timestamp.before.max.ms": "50"})
    assert cfg.message_timestamp_before_max_ms == 50


def test_alter_adds_replaces_and_deletes():
    assert alter({"retention.ms": "5", "segment.ms": "9"}, {"retention.ms": "6"}, ["segment.ms"]) == {"retention.ms": "6"}
    with pytest.raises(InvalidConfigError, match="Invalid config"):
        alter({}, {}, ["bogus"])


def test_docs_table_lists_every_topic_config():
    table = docs_table()
    for name in TOPIC_CONFIGS:
        assert f"`{name}`" in table


def test_unknown_broker_keys_are_kept_but_warned(caplog):
    BrokerConfig({"socket.send.buffer.bytes": "1"})
    assert "socket.send.buffer.bytes was supplied but isn't a known config" in caplog.text
