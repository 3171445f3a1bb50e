"""The broker's settings: ``server.properties`` values over Kafka's defaults (``BrokerConfig``).

The storage's settings are declared here (data directories, partitions, retention and flush
schedules, Pulsar-style compaction, the expiry of idempotent producers), the log cleaner's in
``cleaner_config.py``, and each topic config's broker synonyms come from the topic config table
(``topic_config.py``): together they make ``BROKER_CONFIGS``, which validates a ``server.properties``
file and fills ``describe``. A part of the broker above the storage that has settings of its own
extends ``BrokerConfig`` with its table (``BrokerConfig.TABLE``), so the storage never needs to know them.
"""

from __future__ import annotations

import logging
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar, Mapping

from ..errors import InvalidConfigError, shown
from .cleaner_config import CLEANER_CONFIGS
from .configdef import LONG_MAX, ConfigKey, at_least, parse_properties, setting
from .topic_config import TOPIC_CONFIGS

log = logging.getLogger(__name__)

# Broker synonyms in another unit than the topic config; values are multiplied into milliseconds.
UNIT_MS: Mapping[str, int] = MappingProxyType({
    "log.retention.minutes": 60_000, "log.retention.hours": 3_600_000,
    "log.roll.hours": 3_600_000, "log.roll.jitter.hours": 3_600_000,
})

# The storage's settings: its own, then the topic configs' synonyms that differ from their topic config in type
# or default (the other synonyms are made from the topic table, in _broker_table).
_LOG_SETTINGS = [
    setting("log.dirs", "list", None, None, "Data directories, comma-separated; compactlog works on the one it is "
            "opened on.", "high"),
    setting("log.dir", "string", "/tmp/kafka-logs", None, "Data directory when log.dirs is not set.", "high"),
    setting("num.partitions", "int", 1, at_least(1), "Partitions of a topic created without a count."),
    setting("max.broker.partitions", "int", 10000, at_least(1),
            "Most partitions the data directory may hold, all topics together (KIP-578's name; Kafka's default "
            "is unlimited, ours is finite so that a mistyped count is refused before any directory is made)."),
    setting("message.max.decompressed.bytes", "int", 64 * 1024 * 1024, at_least(1024),
            "Most bytes the records of one compressed batch may decompress to; a batch that inflates further is "
            "refused as corrupt (CORRUPT_MESSAGE). Bounds the memory a decompression bomb can take (Kafka has no "
            "such bound)."),
    setting("log.retention.check.interval.ms", "long", 300000, at_least(1), "How often background retention runs."),
    setting("log.compaction.threads", "int", 1, at_least(1),
            "Partitions compacted at once (Pulsar-style topic compaction); the dedupe buffer is split among them."),
    setting("log.compaction.monitor.interval.ms", "long", 60000, at_least(1),
            "How often a long-running process compares each partition's bytes after its compaction horizon with "
            "compaction.threshold.bytes (Pulsar's brokerServiceCompactionMonitorIntervalInSeconds)."),
    setting("log.flush.offset.checkpoint.interval.ms", "int", 60000, at_least(0),
            "How often recovery points are written to recovery-point-offset-checkpoint.", "high"),
    setting("log.flush.start.offset.checkpoint.interval.ms", "int", 60000, at_least(0),
            "How often log start offsets are written to log-start-offset-checkpoint.", "high"),
    setting("log.flush.scheduler.interval.ms", "long", LONG_MAX, None,
            "How often logs are checked against flush.ms; also flush.ms's default when log.flush.interval.ms is unset.",
            "high"),
    # Idempotent producer state, kept per partition by the storage (Kafka's TransactionLogConfig names them).
    setting("producer.id.expiration.ms", "int", 86400000, at_least(1),
            "An idempotent producer whose last batch's timestamp is this much older than the broker's clock, and "
            "that has no transaction open, is forgotten by each partition's producer state (checked at load and "
            "every producer.id.expiration.check.interval.ms); if it writes again it is treated as a new producer.",
            "low"),
    setting("producer.id.expiration.check.interval.ms", "int", 600000, at_least(1),
            "How often each partition's producer state drops the producers past producer.id.expiration.ms.", "low"),
    # Synonyms whose type or default differs from the topic config they feed.
    setting("log.retention.ms", "long", None, None, "Default retention.ms; wins over the minutes and hours forms.", "high"),
    setting("log.retention.minutes", "int", None, None, "Default retention.ms in minutes; wins over hours.", "high"),
    setting("log.retention.hours", "int", 168, None, "Default retention.ms in hours.", "high"),
    setting("log.roll.ms", "long", None, None, "Default segment.ms; wins over log.roll.hours.", "high"),
    setting("log.roll.hours", "int", 168, at_least(1), "Default segment.ms in hours.", "high"),
    setting("log.roll.jitter.ms", "long", None, None, "Default segment.jitter.ms; wins over log.roll.jitter.hours.", "high"),
    setting("log.roll.jitter.hours", "int", 0, at_least(0), "Default segment.jitter.ms in hours.", "high"),
    setting("log.flush.interval.ms", "long", None, None, "Default flush.ms.", "high"),
]
_BROKER_ONLY = [*_LOG_SETTINGS, *CLEANER_CONFIGS]


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
    reachable as ``broker.log_cleaner_threads``. ``TABLE`` is every setting known: a subclass for a
    part above the storage widens it with that part's own settings.
    """

    TABLE: ClassVar[Mapping[str, ConfigKey]] = BROKER_CONFIGS

    def __init__(self, props: Mapping[str, Any] | None = None) -> None:
        originals: dict[str, str] = {}
        values: dict[str, Any] = {}
        for name, raw in (props or {}).items():
            key = self.TABLE.get(name)
            if key is None:
                originals[name] = str(raw)
                if name in KAFKA_BROKER_CONFIGS_WITHOUT_EFFECT:
                    log.debug("Broker config %s has no effect in compactlog.", name)
                else:
                    log.warning("The configuration %s was supplied but isn't a known config.", shown(name, ""))
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
        raise AttributeError(f"{type(self).__name__} is immutable; build a new one")

    def __getattr__(self, attr: str) -> Any:
        name = attr.replace("_", ".")
        if attr.startswith("_") or name not in self.TABLE:
            raise AttributeError(attr)
        return self.get(name)

    def is_set(self, name: str) -> bool:
        """Whether ``name`` was supplied (rather than left at Kafka's default)."""
        return name in self.originals

    def get(self, name: str) -> Any:
        """The typed value of a broker config, its default when unset, the raw text of an unknown one."""
        if name in self._values:
            return self._values[name]
        key = self.TABLE.get(name)
        if key is not None:
            return key.default
        if name in self.originals:
            return self.originals[name]
        raise InvalidConfigError(f"Unknown broker config name: {shown(name, '')}")

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
        return f"{type(self).__name__}({dict(self.originals)})"
