"""Kafka's topic and broker configs, declared once.

One table (``TOPIC_CONFIGS``, ``BROKER_CONFIGS``) gives each config its Kafka name, type, default, valid
values, importance and documentation, and drives validation, ``describe``, the CLI help and the docs
(``docs_table``), as Kafka's ``LogConfig`` drives its own. Names, types, defaults and error wording are
Kafka 3.9's; the documentation is ours.

A topic's effective config (``LogConfig``) is its overrides, over the broker's defaults from
``server.properties`` (each topic config has broker synonyms: ``retention.ms`` <- ``log.retention.ms``,
``log.retention.minutes``, ``log.retention.hours``), over Kafka's defaults. Configs that only matter with
replication or tiered storage are accepted and stored, so that tools written for Kafka work, and are
documented as having no effect.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterable, Mapping

from ..errors import InvalidConfigError, InvalidRequestError
from ..records.codecs import LEVELS, Codec
from .serverconfigs import SERVER_CONFIGS
from .configdef import (
    DOUBLE_MAX,
    INT_MAX,
    LONG_MAX,
    Check,
    ConfigKey,
    LevelOrDefault,
    at_least,
    between,
    describe_key,
    list_of,
    one_of,
    parse_properties,
)

log = logging.getLogger(__name__)

CODEC_NAMES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")  # Kafka's order
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = "DYNAMIC_TOPIC_CONFIG", "STATIC_BROKER_CONFIG", "DEFAULT_CONFIG"

_NO_REPLICATION = "a single node has no replicas"
_NO_TIERING = "there is no tiered storage"

# message.format.version: Kafka releases, each with how many inter-version (-IVn) steps it had (3.9's list).
_RELEASES = {"0.8.0": 0, "0.8.1": 0, "0.8.2": 0, "0.9.0": 0, "0.10.0": 2, "0.10.1": 3, "0.10.2": 1, "0.11.0": 3,
             "1.0": 1, "1.1": 1, "2.0": 2, "2.1": 3, "2.2": 2, "2.3": 2, "2.4": 2, "2.5": 1, "2.6": 1, "2.7": 3,
             "2.8": 2, "3.0": 2, "3.1": 1, "3.2": 1, "3.3": 4, "3.4": 1, "3.5": 3, "3.6": 3, "3.7": 5, "3.8": 1,
             "3.9": 1}
_VERSIONS = frozenset(_RELEASES) | {f"{r}-IV{i}" for r, n in _RELEASES.items() for i in range(n)}


def _is_version(text: str) -> bool:
    """Kafka's ``MetadataVersion.fromVersionString``: extra dotted parts (``3.0.1``) are ignored."""
    parts = text.split(".")
    keep = 3 if text.startswith("0.") else 2
    return (".".join(parts[:keep]) if len(parts) > keep else text) in _VERSIONS


def _is_strategy(value: str) -> bool:
    name = value[len("header:"):] if value.startswith("header:") else None
    return value in ("offset", "timestamp") or bool(name and not name[0].isspace())


def _is_throttle_list(items: list[str]) -> bool:
    return "".join(items) == "*" or all(re.fullmatch(r"([0-9]+:[0-9]+)?", i.strip()) for i in items)


_THROTTLED = Check(_is_throttle_list, "{name} must be the literal '*' or a list of replicas in the following format: "
                   "[partitionId]:[brokerId],[partitionId]:[brokerId],...", "[partitionId]:[brokerId],[partitionId]:[brokerId],...")


def _topic(name: str, typ: str, default: Any, validator: Any, synonyms: Iterable[str], doc: str,
           effect: str = "", importance: str = "medium") -> ConfigKey:
    return ConfigKey(name, typ, default, doc, validator, importance, tuple(synonyms), effect)


TOPIC_CONFIGS: Mapping[str, ConfigKey] = MappingProxyType({k.name: k for k in [
    _topic("cleanup.policy", "list", ["delete"], list_of("compact", "delete"), ["log.cleanup.policy"],
           "What happens to old data: 'delete' drops whole segments past retention.ms or retention.bytes, 'compact' "
           "keeps only the latest record of each key; both may be listed, and an empty list keeps everything."),
    _topic("compression.type", "string", "producer", one_of(*CODEC_NAMES), ["compression.type"],
           "Codec of the stored batches: 'producer' keeps each batch as the producer compressed it, any other value "
           "makes the broker recompress to that codec ('uncompressed' stores them plain)."),
    _topic("compression.gzip.level", "int", LEVELS[Codec.GZIP].default, LevelOrDefault(*LEVELS[Codec.GZIP][:3]),
           ["compression.gzip.level"], "Level used when the broker compresses with gzip; -1 is zlib's own default (6)."),
    _topic("compression.lz4.level", "int", LEVELS[Codec.LZ4].default, between(*LEVELS[Codec.LZ4][:2]),
           ["compression.lz4.level"],
           "Level used when the broker compresses with lz4; 9 is the fast default, higher levels are slower and smaller."),
    _topic("compression.zstd.level", "int", LEVELS[Codec.ZSTD].default, between(*LEVELS[Codec.ZSTD][:2]),
           ["compression.zstd.level"], "Level used when the broker compresses with zstd; negative levels trade ratio for speed."),
    _topic("delete.retention.ms", "long", 86400000, at_least(0), ["log.cleaner.delete.retention.ms"],
           "How long a tombstone (a null value) stays readable on a compacted topic once the cleaner has reached it, "
           "so that slow consumers still see the delete."),
    _topic("file.delete.delay.ms", "long", 60000, at_least(0), ["log.segment.delete.delay.ms"],
           "Time between taking a segment out of the log and removing its files, so readers holding it can finish."),
    _topic("flush.messages", "long", LONG_MAX, at_least(1), ["log.flush.interval.messages"],
           "fsync the log after this many records since the last fsync; the default leaves it to the OS."),
    _topic("flush.ms", "long", LONG_MAX, at_least(0), ["log.flush.interval.ms", "log.flush.scheduler.interval.ms"],
           "fsync the log once this long has passed since the last fsync; the default leaves it to the OS."),
    _topic("follower.replication.throttled.replicas", "list", [], _THROTTLED, [],
           "Replicas whose follower fetches are throttled during a reassignment.", _NO_REPLICATION),
    _topic("index.interval.bytes", "int", 4096, at_least(0), ["log.index.interval.bytes"],
           "Bytes appended between two entries of a segment's sparse offset index; smaller means bigger indexes "
           "and shorter scans."),
    _topic("leader.replication.throttled.replicas", "list", [], _THROTTLED, [],
           "Replicas whose leader side is throttled during a reassignment.", _NO_REPLICATION),
    _topic("local.retention.bytes", "long", -2, at_least(-2), ["log.local.retention.bytes"],
           "Bytes kept on local disk when older data lives in tiered storage (-2: retention.bytes).", _NO_TIERING),
    _topic("local.retention.ms", "long", -2, at_least(-2), ["log.local.retention.ms"],
           "Time data is kept on local disk when older data lives in tiered storage (-2: retention.ms).", _NO_TIERING),
    _topic("max.compaction.lag.ms", "long", LONG_MAX, at_least(1), ["log.cleaner.max.compaction.lag.ms"],
           "Longest a record may wait before it can be compacted: an older dirty record makes the log cleanable "
           "whatever its dirty ratio, and the active segment rolls in time for it."),
    _topic("max.message.bytes", "int", 1048588, at_least(0), ["message.max.bytes"],
           "Largest record batch, after compression, that one append may carry."),
    _topic("message.downconversion.enable", "boolean", True, None, ["log.message.downconversion.enable"],
           "Whether batches are converted to older message formats for old consumers.",
           "batches are only served in format v2", "low"),
    _topic("message.format.version", "string", "3.0-IV1",
           Check(_is_version, "Version {value} is not a valid version", "[0.8.0, 0.8.1, ..., 3.9, 3.9-IV0]"),
           ["log.message.format.version"], "Deprecated message format version, ignored by Kafka since 3.0.",
           "batches are always written in format v2"),
    _topic("message.timestamp.after.max.ms", "long", LONG_MAX, at_least(0), ["log.message.timestamp.after.max.ms"],
           "How far ahead of the broker's clock a CreateTime timestamp may be before the append is rejected."),
    _topic("message.timestamp.before.max.ms", "long", LONG_MAX, at_least(0), ["log.message.timestamp.before.max.ms"],
           "How far behind the broker's clock a CreateTime timestamp may be before the append is rejected."),
    _topic("message.timestamp.difference.max.ms", "long", LONG_MAX, at_least(0),
           ["log.message.timestamp.difference.max.ms"],
           "Deprecated: the largest gap either way between a CreateTime timestamp and the broker's clock; it "
           "stands in for the before/after limits left at their defaults."),
    _topic("message.timestamp.type", "string", "CreateTime", one_of("CreateTime", "LogAppendTime"),
           ["log.message.timestamp.type"],
           "Which time a record keeps: the producer's (CreateTime) or the time of the append (LogAppendTime)."),
    _topic("min.cleanable.dirty.ratio", "double", 0.5, between(0, 1), ["log.cleaner.min.cleanable.ratio"],
           "Share of a compacted log not yet cleaned above which the cleaner picks it; lower cleans more often."),
    _topic("min.compaction.lag.ms", "long", 0, at_least(0), ["log.cleaner.min.compaction.lag.ms"],
           "Shortest time a record stays uncompacted, so consumers see every update for at least this long."),
    _topic("min.insync.replicas", "int", 1, at_least(1), ["min.insync.replicas"],
           "Replicas that must hold a write before an acks=all produce succeeds.", _NO_REPLICATION),
    _topic("preallocate", "boolean", False, None, ["log.preallocate"],
           "Create each new segment file at its full segment.bytes size up front."),
    _topic("remote.log.copy.disable", "boolean", False, None, [],
           "Stop copying segments to tiered storage while keeping what is there.", _NO_TIERING),
    _topic("remote.log.delete.on.disable", "boolean", False, None, [],
           "Delete the tiered copy of the data when tiered storage is turned off for the topic.", _NO_TIERING),
    _topic("remote.storage.enable", "boolean", False, None, [],
           "Move older segments to remote (tiered) storage.", _NO_TIERING),
    _topic("retention.bytes", "long", -1, None, ["log.retention.bytes"],
           "Largest size a partition may reach under the delete policy before its oldest segments go; -1: no limit."),
    _topic("retention.ms", "long", 604800000, at_least(-1),
           ["log.retention.ms", "log.retention.minutes", "log.retention.hours"],
           "Age, by the newest record in a segment, after which the delete policy removes it; -1 keeps data forever."),
    _topic("segment.bytes", "int", 1073741824, at_least(14), ["log.segment.bytes"],
           "Size at which the active segment is closed and a new one started; retention and compaction work on "
           "whole closed segments."),
    _topic("segment.index.bytes", "int", 10485760, at_least(4), ["log.index.size.max.bytes"],
           "Size of each segment's offset and time index files; a full index also rolls the segment."),
    _topic("segment.jitter.ms", "long", 0, at_least(0), ["log.roll.jitter.ms", "log.roll.jitter.hours"],
           "Largest random amount taken off segment.ms per segment, so partitions do not all roll at once."),
    _topic("segment.ms", "long", 604800000, at_least(1), ["log.roll.ms", "log.roll.hours"],
           "Age, by record timestamps, at which the active segment rolls even when not full."),
    _topic("unclean.leader.election.enable", "boolean", False, None, ["unclean.leader.election.enable"],
           "Whether an out-of-sync replica may become leader, losing data.", _NO_REPLICATION),
    # Beyond Kafka.
    _topic("compaction.strategy", "string", "offset",
           Check(_is_strategy, "Must be offset, timestamp or header:<name> with a non-empty header name",
                 "[offset, timestamp, header:<name>]"), [],
           "Which record of a key survives compaction: the highest offset (Kafka's rule), the highest timestamp, or "
           "the highest version in the named header read as a number (KIP-280)."),
    _topic("compaction.threshold.bytes", "long", 0, at_least(0), [],
           "Pulsar-style topic compaction: compact once the bytes after the compaction horizon exceed this; 0 is off."),
]})

# Broker synonyms in another unit than the topic config; values are multiplied into milliseconds.
UNIT_MS: Mapping[str, int] = MappingProxyType({
    "log.retention.minutes": 60_000, "log.retention.hours": 3_600_000,
    "log.roll.hours": 3_600_000, "log.roll.jitter.hours": 3_600_000,
})


def _broker(name: str, typ: str, default: Any, validator: Any, doc: str, importance: str = "medium") -> ConfigKey:
    return ConfigKey(name, typ, default, doc, validator, importance)


_BROKER_ONLY = [
    _broker("log.dirs", "list", None, None, "Data directories, comma-separated; compactlog works on the one it is "
            "opened on.", "high"),
    _broker("log.dir", "string", "/tmp/kafka-logs", None, "Data directory when log.dirs is not set.", "high"),
    _broker("num.partitions", "int", 1, at_least(1), "Partitions of a topic created without a count."),
    _broker("max.broker.partitions", "int", 10000, at_least(1),
            "Most partitions the data directory may hold, all topics together (KIP-578's name; Kafka's default "
            "is unlimited, ours is finite so that a mistyped count is refused before any directory is made)."),
    _broker("message.max.decompressed.bytes", "int", 64 * 1024 * 1024, at_least(1024),
            "Most bytes the records of one compressed batch may decompress to; a batch that inflates further is "
            "refused as corrupt (CORRUPT_MESSAGE). Bounds the memory a decompression bomb can take (Kafka has no "
            "such bound)."),
    _broker("auto.create.topics.enable", "boolean", True, None,
            "Create a topic when a producer writes to one that does not exist.", "high"),
    _broker("log.cleaner.enable", "boolean", True, None, "Run the log cleaner; without it compacted topics only grow."),
    _broker("log.cleaner.threads", "int", 1, at_least(0), "Cleaner threads."),
    _broker("log.cleaner.dedupe.buffer.size", "long", 134217728, at_least(0),
            "Memory of the cleaner's offset maps, split between its threads (and between the runs of Pulsar-style "
            "compaction, log.compaction.threads); a bigger map covers more keys per pass."),
    _broker("log.cleaner.io.buffer.size", "int", 524288, at_least(0),
            "Read and write buffer memory of the cleaner, split between its threads."),
    _broker("log.cleaner.io.buffer.load.factor", "double", 0.9, between(0, 1),
            "How full the cleaner's offset map may get before a pass stops (it is the dedupe buffer's load factor)."),
    _broker("log.cleaner.backoff.ms", "long", 15000, at_least(0), "Sleep of a cleaner thread that found nothing to do."),
    _broker("log.cleaner.io.max.bytes.per.second", "double", DOUBLE_MAX, None,
            "Throttle on the cleaner's reads plus writes, all threads together."),
    _broker("log.retention.check.interval.ms", "long", 300000, at_least(1), "How often background retention runs."),
    _broker("log.compaction.threads", "int", 1, at_least(1),
            "Partitions compacted at once (Pulsar-style topic compaction); the dedupe buffer is split among them."),
    _broker("log.compaction.monitor.interval.ms", "long", 60000, at_least(1),
            "How often a long-running process compares each partition's bytes after its compaction horizon with "
            "compaction.threshold.bytes (Pulsar's brokerServiceCompactionMonitorIntervalInSeconds)."),
    _broker("log.flush.offset.checkpoint.interval.ms", "int", 60000, at_least(0),
            "How often recovery points are written to recovery-point-offset-checkpoint.", "high"),
    _broker("log.flush.start.offset.checkpoint.interval.ms", "int", 60000, at_least(0),
            "How often log start offsets are written to log-start-offset-checkpoint.", "high"),
    _broker("log.flush.scheduler.interval.ms", "long", LONG_MAX, None,
            "How often logs are checked against flush.ms; also flush.ms's default when log.flush.interval.ms is unset.",
            "high"),
    # Synonyms whose type or default differs from the topic config they feed.
    _broker("log.retention.ms", "long", None, None, "Default retention.ms; wins over the minutes and hours forms.", "high"),
    _broker("log.retention.minutes", "int", None, None, "Default retention.ms in minutes; wins over hours.", "high"),
    _broker("log.retention.hours", "int", 168, None, "Default retention.ms in hours.", "high"),
    _broker("log.roll.ms", "long", None, None, "Default segment.ms; wins over log.roll.hours.", "high"),
    _broker("log.roll.hours", "int", 168, at_least(1), "Default segment.ms in hours.", "high"),
    _broker("log.roll.jitter.ms", "long", None, None, "Default segment.jitter.ms; wins over log.roll.jitter.hours.", "high"),
    _broker("log.roll.jitter.hours", "int", 0, at_least(0), "Default segment.jitter.ms in hours.", "high"),
    _broker("log.flush.interval.ms", "long", None, None, "Default flush.ms.", "high"),
    *SERVER_CONFIGS,
]


def _broker_table() -> dict[str, ConfigKey]:
    table = {k.name: k for k in _BROKER_ONLY}
    for key in TOPIC_CONFIGS.values():  # the remaining synonyms take the topic config's type, default and rule
        for syn in key.synonyms:
            table.setdefault(syn, ConfigKey(syn, key.type, key.default, f"Default {key.name} of topics.", key.validator))
    return dict(sorted(table.items()))


BROKER_CONFIGS: Mapping[str, ConfigKey] = MappingProxyType(_broker_table())
# The broker settings that are not defaults of a topic config (documented in docs/configs.md).
BROKER_ONLY_CONFIGS: Mapping[str, ConfigKey] = MappingProxyType({k.name: k for k in _BROKER_ONLY})

# Kafka broker settings found in Kafka's sample server.properties that mean nothing here: kept, not warned about.
KAFKA_BROKER_CONFIGS_WITHOUT_EFFECT = frozenset({
    "broker.id", "controller.listener.names", "controller.quorum.bootstrap.servers",
    "controller.quorum.voters", "inter.broker.listener.name",
    "num.io.threads", "num.network.threads",
    "num.recovery.threads.per.data.dir", "offsets.topic.replication.factor", "process.roles",
    "socket.receive.buffer.bytes", "socket.send.buffer.bytes",
    "transaction.state.log.min.isr", "transaction.state.log.replication.factor", "zookeeper.connect",
    "zookeeper.connection.timeout.ms",
})


class BrokerConfig:
    """Broker settings: ``server.properties`` values over Kafka's defaults. Immutable once built.

    Unknown names are kept (``get`` returns their text) and logged as Kafka logs them, so a real
    ``server.properties`` loads. Values are typed: ``get("log.cleaner.threads")`` is an int; the same is
    reachable as ``broker.log_cleaner_threads``.
    """

    def __init__(self, props: Mapping[str, Any] | None = None) -> None:
        originals: dict[str, str] = {}
        values: dict[str, Any] = {}
        for name, raw in (props or {}).items():
            key = BROKER_CONFIGS.get(name)
            if key is None:
                originals[name] = str(raw)
                if name in KAFKA_BROKER_CONFIGS_WITHOUT_EFFECT:
                    log.debug("Broker config %s has no effect in compactlog.", name)
                else:
                    log.warning("The configuration %s was supplied but isn't a known config.", name)
                continue
            values[name] = key.parse(raw)
            originals[name] = key.render(values[name]) or ""
        self.__dict__["originals"] = MappingProxyType(originals)
        self.__dict__["_values"] = values
        self._check_requirements()

    @classmethod
    def from_properties(cls, text: str, overrides: Mapping[str, Any] | None = None) -> "BrokerConfig":
        """From ``server.properties`` text, with ``overrides`` (for example from the command line) on top."""
        return cls({**parse_properties(text), **(overrides or {})})

    @classmethod
    def from_file(cls, path: str | Path, overrides: Mapping[str, Any] | None = None) -> "BrokerConfig":
        """Read a ``server.properties`` file as Java's Properties.load reads one: ISO-8859-1."""
        try:
            raw = Path(path).read_bytes()
        except OSError as exc:
            raise InvalidConfigError(f"cannot read the broker properties file {path}: {exc.strerror or exc}") from None
        return cls.from_properties(raw.decode("latin-1"), overrides)

    def _check_requirements(self) -> None:
        """Kafka's start-up checks on the effective time settings (KafkaConfig's ``require``s)."""
        if self.topic_default("segment.ms")[0] < 1:
            raise InvalidConfigError("log.roll.ms must be greater than or equal to 1")
        if self.topic_default("segment.jitter.ms")[0] < 0:
            raise InvalidConfigError("log.roll.jitter.ms must be greater than or equal to 0")
        if self.topic_default("retention.ms")[0] == 0:
            raise InvalidConfigError("log.retention.ms must be unlimited (-1) or, greater than or equal to 1")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("BrokerConfig is immutable; build a new one")

    def __getattr__(self, attr: str) -> Any:
        name = attr.replace("_", ".")
        if attr.startswith("_") or name not in BROKER_CONFIGS:
            raise AttributeError(attr)
        return self.get(name)

    def is_set(self, name: str) -> bool:
        """Whether ``name`` was supplied (rather than left at Kafka's default)."""
        return name in self.originals

    def get(self, name: str) -> Any:
        """The typed value of a broker config, its default when unset, the raw text of an unknown one."""
        if name in self._values:
            return self._values[name]
        key = BROKER_CONFIGS.get(name)
        if key is not None:
            return key.default
        if name in self.originals:
            return self.originals[name]
        raise InvalidConfigError(f"Unknown broker config name: {name}")

    @property
    def log_dirs(self) -> list[str]:
        """``log.dirs``, else ``log.dir``, as Kafka picks them."""
        return list(self.get("log.dirs") or [self.get("log.dir")])

    def topic_default(self, key: ConfigKey | str) -> tuple[Any, str | None]:
        """The broker's default for a topic config, and the broker name that set it (None: Kafka's default).

        Synonyms are tried in priority order; hours and minutes become milliseconds, and a negative
        retention in any unit means "forever" (-1), as KafkaConfig reads it.
        """
        key = TOPIC_CONFIGS[key] if isinstance(key, str) else key
        for syn in key.synonyms:
            if syn in self._values and self._values[syn] is not None:
                value = self._values[syn] * UNIT_MS[syn] if syn in UNIT_MS else self._values[syn]
                if key.name == "retention.ms" and value < 0:
                    value = -1
                return value, syn
        return key.default, None

    def topic_defaults(self) -> dict[str, Any]:
        """Every topic config's default on this broker."""
        return {name: self.topic_default(key)[0] for name, key in TOPIC_CONFIGS.items()}

    def __repr__(self) -> str:
        return f"BrokerConfig({dict(self.originals)})"


@dataclass(frozen=True)
class DescribeRow:
    """One line of ``kafka-configs --describe --all``; ``synonyms`` lists (source, name, value) by priority."""

    name: str
    value: str | None
    source: str  # DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG or DEFAULT_CONFIG
    read_only: bool
    doc: str
    synonyms: tuple[tuple[str, str, str | None], ...] = ()


def _check_names(names: Iterable[str]) -> None:
    for name in names:
        if name not in TOPIC_CONFIGS:
            raise InvalidConfigError(f"Unknown topic config name: {name}")


def _check_lags(min_lag: int, max_lag: int) -> None:
    if min_lag > max_lag:
        raise InvalidConfigError(
            f"conflict topic config setting min.compaction.lag.ms ({min_lag}) > max.compaction.lag.ms ({max_lag})")


def validate_topic_overrides(mapping: Mapping[str, Any], broker: BrokerConfig | None = None) -> dict[str, str]:
    """Check the names, values and cross-key rules of topic overrides; return them normalized as strings.

    Names are all checked before any value, as Kafka does. The lag rule is checked on the overrides over
    ``broker``'s defaults when one is given (Kafka checks topic creation against the broker's defaults),
    else over Kafka's defaults.
    """
    _check_names(mapping)
    parsed = {name: TOPIC_CONFIGS[name].parse(raw) for name, raw in mapping.items()}

    def effective(name: str) -> Any:
        if name in parsed:
            return parsed[name]
        return broker.topic_default(name)[0] if broker is not None else TOPIC_CONFIGS[name].default

    _check_lags(effective("min.compaction.lag.ms"), effective("max.compaction.lag.ms"))
    return {name: TOPIC_CONFIGS[name].render(value) or "" for name, value in parsed.items()}


def alter(overrides: Mapping[str, str], set: Mapping[str, Any] | None = None,  # noqa: A002 - kafka-configs' words
          delete: Iterable[str] | None = None, *, broker: BrokerConfig | None = None) -> dict[str, str]:
    """``kafka-configs --alter --add-config ... --delete-config ...`` on a topic's overrides; returns the new ones.

    Deleting a name that is not currently overridden fails as kafka-configs does (``Invalid config(s): x``);
    naming a config in both lists fails as the broker does (``Error due to duplicate config keys``).
    """
    set, delete = dict(set or {}), list(delete or [])
    missing = [name for name in delete if name not in overrides]
    if missing:
        raise InvalidConfigError(f"Invalid config(s): {','.join(missing)}")
    if any(name in set for name in delete):
        raise InvalidRequestError("Error due to duplicate config keys")
    updated = {k: v for k, v in overrides.items() if k not in delete}
    updated.update(set)
    return validate_topic_overrides(updated, broker)


class LogConfig:
    """A topic's effective config: overrides over broker defaults over Kafka defaults. Immutable.

    Every topic config is an attribute under its Python name (``segment.bytes`` -> ``segment_bytes``), set
    once at construction so the append and cleaning paths read plain attributes. ``cleanup_policy`` is a
    tuple and ``compact`` / ``delete`` say whether it contains each policy. The timestamp window
    (``message_timestamp_before_max_ms`` / ``..._after_max_ms``) falls back to the deprecated
    ``message.timestamp.difference.max.ms`` when left at its default, as Kafka 3.9 does.
    """

    overrides: Mapping[str, str]
    broker: BrokerConfig
    cleanup_policy: tuple[str, ...]
    compact: bool
    delete: bool
    compaction_strategy: str
    compaction_threshold_bytes: int
    compression_type: str
    compression_gzip_level: int
    compression_lz4_level: int
    compression_zstd_level: int
    delete_retention_ms: int
    file_delete_delay_ms: int
    flush_messages: int
    flush_ms: int
    index_interval_bytes: int
    max_compaction_lag_ms: int
    max_message_bytes: int
    message_timestamp_after_max_ms: int
    message_timestamp_before_max_ms: int
    message_timestamp_type: str
    min_cleanable_dirty_ratio: float
    min_compaction_lag_ms: int
    preallocate: bool
    retention_bytes: int
    retention_ms: int
    segment_bytes: int
    segment_index_bytes: int
    segment_jitter_ms: int
    segment_ms: int

    def __init__(self, overrides: Mapping[str, Any] | None = None, broker: BrokerConfig | None = None) -> None:
        broker = broker if broker is not None else BrokerConfig()
        normalized = validate_topic_overrides(dict(overrides or {}))
        values: dict[str, Any] = {}
        sources: dict[str, str] = {}
        for name, key in TOPIC_CONFIGS.items():
            if name in normalized:
                values[name], sources[name] = key.parse(normalized[name]), DYNAMIC_TOPIC_CONFIG
            else:
                values[name], syn = broker.topic_default(key)
                sources[name] = STATIC_BROKER_CONFIG if syn else DEFAULT_CONFIG
        attrs = {name.replace(".", "_"): value for name, value in values.items()}
        difference = values["message.timestamp.difference.max.ms"]
        for side in ("before", "after"):
            if attrs[f"message_timestamp_{side}_max_ms"] == LONG_MAX:
                attrs[f"message_timestamp_{side}_max_ms"] = difference
        attrs["cleanup_policy"] = tuple(values["cleanup.policy"])
        attrs["compact"] = "compact" in attrs["cleanup_policy"]
        attrs["delete"] = "delete" in attrs["cleanup_policy"]
        self.__dict__.update(attrs, overrides=MappingProxyType(normalized), broker=broker,
                             _values=values, _sources=sources)

    def fingerprint(self) -> bytes:
        """8 bytes that differ when any effective value differs: lets a process check that a batch
        validated elsewhere was validated under the config it has now."""
        import hashlib

        if "_fingerprint" not in self.__dict__:  # immutable, so computed once
            self.__dict__["_fingerprint"] = hashlib.blake2b(repr(sorted(self._values.items())).encode(),
                                                            digest_size=8).digest()
        return self.__dict__["_fingerprint"]

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("LogConfig is immutable; use with_overrides()")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("LogConfig is immutable")

    def compression_level(self, codec: Codec) -> int | None:
        """The level this topic's ``compression.<codec>.level`` sets for ``codec`` (None: it has no levels)."""
        return {
            Codec.GZIP: self.compression_gzip_level,
            Codec.LZ4: self.compression_lz4_level,
            Codec.ZSTD: self.compression_zstd_level,
        }.get(codec)

    def get(self, name: str) -> Any:
        """The effective typed value of a topic config, by its Kafka name."""
        if name not in self._values:
            raise InvalidConfigError(f"Unknown topic config name: {name}")
        return self._values[name]

    def source(self, name: str) -> str:
        """Where the value of ``name`` comes from: DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG or DEFAULT_CONFIG."""
        self.get(name)
        return self._sources[name]

    def with_overrides(self, changes: Mapping[str, Any] | None = None, /, **python_names: Any) -> "LogConfig":
        """A copy with more overrides, by Kafka name (``{"segment.bytes": 1024}``) or Python name (``segment_bytes=1024``)."""
        extra = {**(changes or {}), **{k.replace("_", "."): v for k, v in python_names.items()}}
        return LogConfig({**self.overrides, **extra}, self.broker)

    def describe(self) -> list[DescribeRow]:
        """``kafka-configs --describe --all`` for this topic: one row per config, sorted by name."""
        return [self._row(name, key) for name, key in sorted(TOPIC_CONFIGS.items())]

    def _row(self, name: str, key: ConfigKey) -> DescribeRow:
        synonyms: list[tuple[str, str, str | None]] = []
        if name in self.overrides:
            synonyms.append((DYNAMIC_TOPIC_CONFIG, name, self.overrides[name]))
        for syn in key.synonyms:
            if self.broker.is_set(syn):
                synonyms.append((STATIC_BROKER_CONFIG, syn, self.broker.originals[syn]))
        for syn in key.synonyms:
            if BROKER_CONFIGS[syn].default is not None:
                synonyms.append((DEFAULT_CONFIG, syn, BROKER_CONFIGS[syn].render(BROKER_CONFIGS[syn].default)))
        return DescribeRow(name, key.render(self._values[name]), self._sources[name], False, describe_key(key)["doc"],
                           tuple(synonyms))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LogConfig) and (self._values, self._sources) == (other._values, other._sources)

    __hash__ = None  # type: ignore[assignment]  # equal configs may hold different brokers

    def __repr__(self) -> str:
        return f"LogConfig({dict(self.overrides)})"


def docs_table(markdown: bool = True, configs: Mapping[str, ConfigKey] | None = None) -> str:
    """The reference of the topic configs (or of ``configs``), generated from the table.

    Markdown gives one table (name, default, valid values, server default property, meaning) for the
    docs; ``markdown=False`` gives a plain-text block per config for terminal help.
    """
    keys = [describe_key(k) for _, k in sorted((configs if configs is not None else TOPIC_CONFIGS).items())]
    if not markdown:
        blocks = []
        for k in keys:
            lines = [k["name"], f"    {k['doc']}", f"    Type: {k['type']}  Default: {k['default']}"]
            if k["valid_values"]:
                lines.append(f"    Valid values: {k['valid_values']}")
            if k["server_default_property"]:
                lines.append(f"    Server default property: {k['server_default_property']}")
            blocks.append("\n".join(lines))
        return "\n\n".join(blocks)

    def code(text: str) -> str:
        return f"`{text}`" if text else ""

    rows = ["| config | default | valid values | server default property | meaning |", "|---|---|---|---|---|"]
    for k in keys:
        doc = k["doc"].replace("|", "\\|")
        rows.append(f"| `{k['name']}` | {code(k['default'])} | {code(k['valid_values'])} | "
                    f"{code(k['server_default_property'])} | {doc} |")
    return "\n".join(rows)


__all__ = [
    "BROKER_CONFIGS", "CODEC_NAMES", "DEFAULT_CONFIG", "DYNAMIC_TOPIC_CONFIG", "INT_MAX", "KAFKA_BROKER_CONFIGS_WITHOUT_EFFECT",
    "LONG_MAX", "STATIC_BROKER_CONFIG", "TOPIC_CONFIGS", "UNIT_MS", "BrokerConfig", "ConfigKey", "DescribeRow", "LogConfig",
    "alter", "docs_table", "parse_properties", "validate_topic_overrides",
]

if __name__ == "__main__":  # python -m compactlog.storage.config > table.md
    print(docs_table())
