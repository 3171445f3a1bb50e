"""A topic's effective config (``LogConfig``): its overrides, over the broker's defaults from
``server.properties`` (``broker_config.BrokerConfig``, through each topic config's synonyms), over
Kafka's defaults (``topic_config.TOPIC_CONFIGS``); and the checks and edits of those overrides
(``validate_topic_overrides``, ``alter``), as Kafka's ``LogConfig`` and ``kafka-configs`` make them.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Iterable, Mapping

from ..errors import InvalidConfigError, InvalidRequestError, shown
from ..records.codecs import Codec
from .broker_config import BROKER_CONFIGS, BrokerConfig
from .configdef import LONG_MAX, ConfigKey, describe_key
from .topic_config import TOPIC_CONFIGS

DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = "DYNAMIC_TOPIC_CONFIG", "STATIC_BROKER_CONFIG", "DEFAULT_CONFIG"


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
            raise InvalidConfigError(f"Unknown topic config name: {shown(name, '')}")


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
            raise InvalidConfigError(f"Unknown topic config name: {shown(name, '')}")
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
