"""Kafka's topic and broker configs, declared once.

This table drives validation, ``describe``, the CLI help and the docs (``docs_table``). Names and
defaults are Kafka's; the doc strings are ours. A topic's effective config is its overrides, over the
broker's ``log.*`` defaults (from ``server.properties``), over Kafka's defaults.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ..errors import InvalidConfigError
from .configdef import (
    DOUBLE_MAX,
    INT_MAX,
    LONG_MAX,
    Check,
    ConfigKey,
    ListOf,
    OneOf,
    Range,
    invalid,
    parse_properties,
)

log = logging.getLogger(__name__)

CODEC_NAMES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


def _check_strategy(name: str, value: str) -> None:
    if value in ("offset", "timestamp"):
        return
    if value.startswith("header:") and value[len("header:"):].strip():
        return
    raise invalid(name, value, "Must be offset, timestamp or header:<header name>")


def _topic(name: str, typ: str, default: Any, doc: str, validator=None, synonyms=(), importance="medium", effect=""):
    return ConfigKey(name, typ, default, doc, validator, importance, tuple(synonyms), effect)


_ONE_NODE = "accepted for compatibility; has no effect on a single node"

TOPIC_CONFIGS: dict[str, ConfigKey] = {k.name: k for k in [
    _topic("cleanup.policy", "list", ["delete"], "Retention policy: 'delete' removes old segments by time or size, 'compact' keeps the latest record per key, both may be combined.",
           ListOf(("compact", "delete")), ["log.cleanup.policy"], "high"),
    _topic("compression.type", "string", "producer", "Codec of stored batches; 'producer' keeps what the producer sent, 'uncompressed' stores none.",
           OneOf(CODEC_NAMES), ["compression.type"], "high"),
    _topic("compression.gzip.level", "int", -1, "gzip level when the broker compresses (-1 = zlib's default, 6).",
           Range(1, 9, also=(-1,)), ["compression.gzip.level"]),
    _topic("compression.lz4.level", "int", 9, "lz4 level when the broker compresses (9 = fast mode, others high compression).",
           Range(1, 17), ["compression.lz4.level"]),
    _topic("compression.zstd.level", "int", 3, "zstd level when the broker compresses.",
           Range(-131072, 22), ["compression.zstd.level"]),
    _topic("delete.retention.ms", "long", 86400000, "How long tombstones stay readable on a compacted topic after the cleaner first sees them.",
           Range(0), ["log.cleaner.delete.retention.ms"]),
    _topic("file.delete.delay.ms", "long", 60000, "Delay between taking a segment out of the log and removing its files, so readers in flight finish.",
           Range(0), ["log.segment.delete.delay.ms"]),
    _topic("flush.messages", "long", LONG_MAX, "fsync the log after this many appends (default: leave it to the OS and the periodic flush).",
           Range(1), ["log.flush.interval.messages"]),
    _topic("flush.ms", "long", LONG_MAX, "fsync the log when this long has passed since the last fsync.",
           Range(0), ["log.flush.interval.ms"]),
    _topic("follower.replication.throttled.replicas", "list", [], "Replication throttling.", None, (), "medium", _ONE_NODE),
    _topic("leader.replication.throttled.replicas", "list", [], "Replication throttling.", None, (), "medium", _ONE_NODE),
    _topic("index.interval.bytes", "int", 4096, "Bytes appended between two entries of the sparse offset index.",
           Range(0), ["log.index.interval.bytes"]),
    _topic("local.retention.bytes", "long", -2, "Tiered storage local retention.", Range(-2), (), "medium", _ONE_NODE),
    _topic("local.retention.ms", "long", -2, "Tiered storage local retention.", Range(-2), (), "medium", _ONE_NODE),
    _topic("max.compaction.lag.ms", "long", LONG_MAX, "Longest time a record may stay uncompacted; forces cleaning and bounds segment rolling.",
           Range(1), ["log.cleaner.max.compaction.lag.ms"]),
    _topic("max.message.bytes", "int", 1048588, "Largest batch (after compression) an append may carry.",
           Range(0), ["message.max.bytes"], "high"),
    _topic("message.downconversion.enable", "boolean", True, "Down-conversion for old consumers.", None, (), "low", _ONE_NODE),
    _topic("message.timestamp.after.max.ms", "long", LONG_MAX, "How far in the future a CreateTime timestamp may be.",
           Range(0), ["log.message.timestamp.after.max.ms"]),
    _topic("message.timestamp.before.max.ms", "long", LONG_MAX, "How far in the past a CreateTime timestamp may be.",
           Range(0), ["log.message.timestamp.before.max.ms"]),
    _topic("message.timestamp.difference.max.ms", "long", LONG_MAX, "Deprecated: the before/after window when neither of those is set.",
           Range(0), ["log.message.timestamp.difference.max.ms"]),
    _topic("message.timestamp.type", "string", "CreateTime", "Whether record timestamps are the producer's (CreateTime) or the append time (LogAppendTime).",
           OneOf(("CreateTime", "LogAppendTime")), ["log.message.timestamp.type"]),
    _topic("min.cleanable.dirty.ratio", "double", 0.5, "Dirty share of a log above which the cleaner picks it.",
           Range(0.0, 1.0), ["log.cleaner.min.cleanable.ratio"]),
    _topic("min.compaction.lag.ms", "long", 0, "Shortest time a record stays uncompacted.",
           Range(0), ["log.cleaner.min.compaction.lag.ms"]),
    _topic("min.insync.replicas", "int", 1, "Replicas that must acknowledge acks=all.", Range(1), ["min.insync.replicas"], "medium", _ONE_NODE),
    _topic("preallocate", "boolean", False, "Create each new segment file at its full size.", None, ["log.preallocate"]),
    _topic("remote.storage.enable", "boolean", False, "Tiered storage.", None, (), "medium", _ONE_NODE),
    _topic("retention.bytes", "long", -1, "Largest size a partition may reach before its oldest segments go (-1 = no limit).",
           None, ["log.retention.bytes"], "high"),
    _topic("retention.ms", "long", 604800000, "Age after which a segment is deleted, judged by its newest record (-1 = no limit).",
           Range(-1), ["log.retention.ms", "log.retention.minutes", "log.retention.hours"], "high"),
    _topic("segment.bytes", "int", 1073741824, "Size at which the active segment rolls.",
           Range(14), ["log.segment.bytes"], "high"),
    _topic("segment.index.bytes", "int", 10485760, "Size limit of each index file; a full index rolls the segment.",
           Range(4), ["log.index.size.max.bytes"]),
    _topic("segment.jitter.ms", "long", 0, "Random slack subtracted from segment.ms per segment, so partitions do not all roll at once.",
           Range(0), ["log.roll.jitter.ms", "log.roll.jitter.hours"]),
    _topic("segment.ms", "long", 604800000, "Age (by record timestamps) at which the active segment rolls.",
           Range(1), ["log.roll.ms", "log.roll.hours"]),
    _topic("unclean.leader.election.enable", "boolean", False, "Leader election from out-of-sync replicas.", None,
           ["unclean.leader.election.enable"], "medium", _ONE_NODE),
    # Beyond Kafka.
    _topic("compaction.strategy", "string", "offset", "Which record of a key survives compaction: the highest offset (Kafka), the highest timestamp, or the highest version in a header (KIP-280).",
           Check(_check_strategy, "[offset, timestamp, header:<name>]")),
    _topic("compaction.threshold.bytes", "long", 0, "Pulsar-style compaction: compact when the bytes after the compaction horizon exceed this (0 = off).",
           Range(0)),
]}

# Broker synonyms whose unit differs from the topic config's (hours/minutes -> ms).
_UNIT_MS = {"log.retention.minutes": 60_000, "log.retention.hours": 3_600_000, "log.roll.hours": 3_600_000,
            "log.roll.jitter.hours": 3_600_000}


def _broker(name: str, typ: str, default: Any, doc: str, validator=None) -> ConfigKey:
    return ConfigKey(name, typ, default, doc, validator)


BROKER_CONFIGS: dict[str, ConfigKey] = {k.name: k for k in [
    _broker("log.dirs", "list", [], "Data directories (compactlog uses the one it is opened on)."),
    _broker("log.dir", "string", "/tmp/kafka-logs", "Data directory when log.dirs is unset."),
    _broker("num.partitions", "int", 1, "Partition count of topics created without one.", Range(1)),
    _broker("auto.create.topics.enable", "boolean", True, "Create a topic when a producer writes to one that does not exist."),
    _broker("log.cleaner.enable", "boolean", True, "Run the log cleaner for compacted topics."),
    _broker("log.cleaner.threads", "int", 1, "Cleaner threads.", Range(0)),
    _broker("log.cleaner.dedupe.buffer.size", "long", 134217728, "Memory of the cleaner's offset maps, shared by its threads.", Range(0)),
    _broker("log.cleaner.io.buffer.size", "int", 524288, "Read and write buffer memory of the cleaner threads.", Range(0)),
    _broker("log.cleaner.io.buffer.load.factor", "double", 0.9, "Fill factor of the cleaner's offset map.", Range(0.0, 1.0)),
    _broker("log.cleaner.backoff.ms", "long", 15000, "Sleep of a cleaner thread that found nothing to clean.", Range(0)),
    _broker("log.cleaner.io.max.bytes.per.second", "double", DOUBLE_MAX, "Cleaner I/O throttle (reads plus writes)."),
    _broker("log.retention.check.interval.ms", "long", 300000, "How often retention runs in long-running processes.", Range(1)),
    _broker("log.flush.offset.checkpoint.interval.ms", "int", 60000, "How often recovery points are checkpointed.", Range(0)),
    _broker("log.flush.start.offset.checkpoint.interval.ms", "int", 60000, "How often log start offsets are checkpointed.", Range(0)),
    _broker("log.flush.scheduler.interval.ms", "long", LONG_MAX, "How often logs are checked for flush.ms."),
]}
for _key in TOPIC_CONFIGS.values():
    for _i, _syn in enumerate(_key.synonyms):
        if _syn not in BROKER_CONFIGS:
            _typ = "int" if _syn in _UNIT_MS else _key.type
            _default = _key.default if _i == 0 else None
            if _syn == "log.retention.hours":
                _default = 168
            if _syn == "log.roll.hours":
                _default = 168
            BROKER_CONFIGS[_syn] = ConfigKey(_syn, _typ, _default, f"Broker default of {_key.name}.", None if _syn in _UNIT_MS else _key.validator)


class BrokerConfig:
    """Broker-level settings: ``server.properties`` values over Kafka's defaults."""

    def __init__(self, props: Mapping[str, Any]) -> None:
        self.raw = {k: str(v) for k, v in props.items()}
        self.values: dict[str, Any] = {}
        for k, v in self.raw.items():
            key = BROKER_CONFIGS.get(k) or TOPIC_CONFIGS.get(k)
            if key is None:
                log.warning("The configuration %s was supplied but isn't a known config.", k)
                continue
            self.values[k] = key.parse(v)

    @classmethod
    def from_file(cls, path: Path) -> "BrokerConfig":
        return cls(parse_properties(Path(path).read_text(encoding="utf-8")))

    def get(self, name: str) -> Any:
        if name in self.values:
            return self.values[name]
        key = BROKER_CONFIGS.get(name)
        if key is None:
            raise InvalidConfigError(f"Unknown broker config name: {name}")
        return key.default

    def topic_default(self, key: ConfigKey) -> tuple[Any, str | None]:
        """The broker's default for a topic config, and which broker name set it (None = Kafka's default)."""
        for syn in key.synonyms:
            if syn in self.values:
                value = self.values[syn]
                return (value * _UNIT_MS[syn] if syn in _UNIT_MS else value), syn
        return key.default, None


@dataclass(frozen=True)
class DescribeRow:
    name: str
    value: str
    source: str  # DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG or DEFAULT_CONFIG
    read_only: bool
    doc: str


def validate_topic_overrides(mapping: Mapping[str, Any]) -> dict[str, str]:
    """Check names and values of topic overrides; returns them as trimmed strings."""
    out: dict[str, str] = {}
    parsed: dict[str, Any] = {}
    for name, raw in mapping.items():
        key = TOPIC_CONFIGS.get(name)
        if key is None:
            raise InvalidConfigError(f"Unknown topic config name: {name}")
        parsed[name] = key.parse(raw)
        out[name] = key.render(parsed[name])
    lo = parsed.get("min.compaction.lag.ms", TOPIC_CONFIGS["min.compaction.lag.ms"].default)
    hi = parsed.get("max.compaction.lag.ms", TOPIC_CONFIGS["max.compaction.lag.ms"].default)
    if lo > hi:
        raise InvalidConfigError(
            f"conflict topic config setting min.compaction.lag.ms ({lo}) > max.compaction.lag.ms ({hi})"
        )
    return out


def alter(current: Mapping[str, str], set_configs: Mapping[str, str], delete: list[str]) -> dict[str, str]:
    """kafka-configs --add-config / --delete-config applied to a topic's overrides."""
    missing = [n for n in delete if n not in TOPIC_CONFIGS]
    if missing:
        raise InvalidConfigError(f"Invalid config(s): {','.join(missing)}")
    updated = {k: v for k, v in current.items() if k not in delete}
    updated.update(set_configs)
    return validate_topic_overrides(updated)


class LogConfig:
    """A topic's effective config: overrides over broker defaults over Kafka defaults. Immutable."""

    def __init__(self, overrides: Mapping[str, Any] | None = None, broker: BrokerConfig | None = None) -> None:
        self.overrides = validate_topic_overrides(dict(overrides or {}))
        self.broker = broker if broker is not None else BrokerConfig({})
        values: dict[str, Any] = {}
        self._sources: dict[str, str] = {}
        for name, key in TOPIC_CONFIGS.items():
            if name in self.overrides:
                values[name] = key.parse(self.overrides[name])
                self._sources[name] = "DYNAMIC_TOPIC_CONFIG"
            else:
                values[name], syn = self.broker.topic_default(key)
                self._sources[name] = "STATIC_BROKER_CONFIG" if syn else "DEFAULT_CONFIG"
        self._values = values
        v = values
        self.cleanup_policy = frozenset(v["cleanup.policy"])
        self.compact = "compact" in self.cleanup_policy
        self.delete = "delete" in self.cleanup_policy
        self.compression_type = v["compression.type"]
        self.compression_gzip_level = v["compression.gzip.level"]
        self.compression_lz4_level = v["compression.lz4.level"]
        self.compression_zstd_level = v["compression.zstd.level"]
        self.delete_retention_ms = v["delete.retention.ms"]
        self.file_delete_delay_ms = v["file.delete.delay.ms"]
        self.flush_messages = v["flush.messages"]
        self.flush_ms = v["flush.ms"]
        self.index_interval_bytes = v["index.interval.bytes"]
        self.max_compaction_lag_ms = v["max.compaction.lag.ms"]
        self.min_compaction_lag_ms = v["min.compaction.lag.ms"]
        self.max_message_bytes = v["max.message.bytes"]
        self.message_timestamp_type = v["message.timestamp.type"]
        diff = v["message.timestamp.difference.max.ms"]
        before, after = v["message.timestamp.before.max.ms"], v["message.timestamp.after.max.ms"]
        self.message_timestamp_before_max_ms = diff if before == LONG_MAX and diff != LONG_MAX else before
        self.message_timestamp_after_max_ms = diff if after == LONG_MAX and diff != LONG_MAX else after
        self.min_cleanable_dirty_ratio = v["min.cleanable.dirty.ratio"]
        self.preallocate = v["preallocate"]
        self.retention_bytes = v["retention.bytes"]
        self.retention_ms = v["retention.ms"]
        self.segment_bytes = v["segment.bytes"]
        self.segment_index_bytes = v["segment.index.bytes"]
        self.segment_jitter_ms = v["segment.jitter.ms"]
        self.segment_ms = v["segment.ms"]
        self.compaction_strategy = v["compaction.strategy"]
        self.compaction_threshold_bytes = v["compaction.threshold.bytes"]

    def get(self, name: str) -> Any:
        if name not in self._values:
            raise InvalidConfigError(f"Unknown topic config name: {name}")
        return self._values[name]

    def with_overrides(self, **changes: Any) -> "LogConfig":
        return LogConfig({**self.overrides, **{k: str(v) for k, v in changes.items()}}, self.broker)

    def describe(self) -> list[DescribeRow]:
        return [
            DescribeRow(name, key.render(self._values[name]), self._sources[name], False, key.doc)
            for name, key in sorted(TOPIC_CONFIGS.items())
        ]

    def __repr__(self) -> str:
        return f"LogConfig({self.overrides})"


def docs_table() -> str:
    """The Markdown table of topic configs (name, default, valid values, meaning) for the docs."""
    rows = ["| config | default | valid values | meaning |", "|---|---|---|---|"]
    for name, key in sorted(TOPIC_CONFIGS.items()):
        default = key.render(key.default)
        doc = key.doc + (f" ({key.effect})" if key.effect else "")
        rows.append(f"| `{name}` | {default} | {key.valid_values} | {doc} |")
    return "\n".join(rows)


__all__ = ["BROKER_CONFIGS", "TOPIC_CONFIGS", "BrokerConfig", "DescribeRow", "LogConfig", "alter", "docs_table",
           "validate_topic_overrides", "INT_MAX"]
