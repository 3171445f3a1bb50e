"""Kafka's topic configs, declared once: the table ``TOPIC_CONFIGS``.

Each topic config has its Kafka name, type, default, valid values, importance, documentation and the
broker settings that supply its default (its synonyms: ``retention.ms`` <- ``log.retention.ms``,
``log.retention.minutes``, ``log.retention.hours``), as Kafka's ``TopicConfig`` names them and its
``LogConfig`` defines them. The table drives validation, ``describe``, the CLI help and the docs
(``docs_table``). Names, types, defaults and error wording are Kafka 3.9's; the documentation is ours.
Configs that only matter with replication or tiered storage are accepted and stored, so that tools
written for Kafka work, and are documented as having no effect.

A topic's effective config is ``log_config.LogConfig``; the broker settings are ``broker_config``'s.
"""

from __future__ import annotations

import re
from types import MappingProxyType
from typing import Any, Iterable, Mapping

from ..records.codecs import LEVELS, Codec
from .configdef import (
    LONG_MAX,
    Check,
    ConfigKey,
    LevelOrDefault,
    at_least,
    between,
    describe_key,
    list_of,
    one_of,
)

CODEC_NAMES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")  # Kafka's order

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
           "Replicas that must hold a write before an acks=all produce succeeds. One node is one in-sync replica, "
           "so above 1 every acks=all produce is refused with NOT_ENOUGH_REPLICAS and nothing is written, as "
           "Kafka's leader refuses it; acks=1 and acks=0 produces are taken."),
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


if __name__ == "__main__":  # python -m compactlog.storage.topic_config > table.md
    print(docs_table())
