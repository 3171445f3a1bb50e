"""Topic metadata: our ``__topics/<topic>.json`` files, and the topics of a Kafka broker's log directory.

Kafka keeps a topic's id, partition count and config overrides in its controller, not in the log
directory; each partition folder holds only ``partition.metadata`` (the topic id). With no controller,
compactlog writes one small JSON file per topic it creates. A directory copied from a Kafka broker's
``log.dirs`` has no such files: its topics are found from the partition folders instead, as Kafka's
own log manager finds its logs, with the topic id from ``partition.metadata`` and the broker's defaults
for configs (Kafka's internal topics get the configs Kafka gives them). Such a topic gets a JSON file only
when something about it changes (its configs are altered), so opening a Kafka directory adds nothing
to it but the lock and checkpoints Kafka itself keeps.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import CompactLogError, KafkaStorageError
from . import files

if TYPE_CHECKING:
    from .log import Log
    from .log_config import LogConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PartitionInfo:
    partition: int
    log_start_offset: int
    log_end_offset: int
    size_bytes: int
    segments: int

    @classmethod
    def of(cls, partition: int, lg: "Log") -> "PartitionInfo":
        return cls(partition, lg.log_start_offset, lg.log_end_offset, lg.size, len(lg.segments))


@dataclass(frozen=True)
class TopicDescription:
    name: str
    topic_id: str
    partitions: list[PartitionInfo]
    config: "LogConfig"


# What Kafka's broker forces on its internal topics (offsets.topic.segment.bytes and
# transaction.state.log.segment.bytes default to 100 MiB; both are compacted).
KAFKA_INTERNAL_TOPIC_CONFIGS = {
    "__consumer_offsets": {"cleanup.policy": "compact", "segment.bytes": "104857600"},
    "__transaction_state": {"cleanup.policy": "compact", "segment.bytes": "104857600"},
}
INTERNAL_TOPICS = frozenset(KAFKA_INTERNAL_TOPIC_CONFIGS)  # Kafka's own: clients may not write or delete them
_TOPIC_ID = re.compile(r"^topic_id:\s*(\S+)\s*$", re.M)


def new_topic_id() -> str:
    """A random topic id, written as Kafka writes a Uuid: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def partition_metadata_text(topic_id: str) -> str:
    """Kafka's ``partition.metadata`` file (version 0)."""
    return f"version: 0\ntopic_id: {topic_id}\n"


def read_topic_id(partition_dir: Path) -> str | None:
    """The topic id in a partition folder's ``partition.metadata``, or None without a readable one."""
    try:
        text = (partition_dir / files.PARTITION_METADATA).read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    m = _TOPIC_ID.search(text)
    return m.group(1) if m else None


def parse_topic(path: Path) -> dict:
    """One ``__topics/<topic>.json``, checked: a file that is not what we write is named, not guessed at
    (guessing a compacted topic's configs wrong would let retention delete it)."""
    where = f"{path.parent.name}/{path.name}"
    try:
        meta = json.loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise KafkaStorageError(f"topic metadata file {where} in {path.parent.parent} is not valid JSON ({exc}); "
                                f"restore it from a backup or rewrite it with the topic's configs (without it the topic's folders "
                                f"read as a Kafka broker's topic with broker defaults)") from None
    ok = (isinstance(meta, dict) and meta.get("name") == path.name[: -len(files.TOPIC_SUFFIX)]
          and isinstance(meta.get("partitions"), int) and not isinstance(meta.get("partitions"), bool)
          and meta["partitions"] > 0 and isinstance(meta.get("topic_id"), str) and isinstance(meta.get("config", {}), dict)
          and all(isinstance(k, str) and isinstance(v, str) for k, v in meta.get("config", {}).items()))
    if not ok:
        raise KafkaStorageError(f"topic metadata file {where} in {path.parent.parent} does not hold a topic's name, "
                                f"id, partition count and configs; restore it from a backup or rewrite it with the topic's configs "
                                f"(without it the topic's folders read as a Kafka broker's topic with broker defaults)")
    files.validate_topic_name(meta["name"])
    return meta


def write_topic(data_dir: Path, meta: dict) -> None:
    topics_dir = data_dir / files.TOPICS_DIR
    if not topics_dir.is_dir():  # the folder itself must survive a power loss, or every topic would revert
        topics_dir.mkdir()
        files.fsync_dir(data_dir)
    files.atomic_write(files.topic_file(data_dir, meta["name"]), json.dumps(meta, indent=2, sort_keys=True))


def partition_dirs(data_dir: Path) -> dict[tuple[str, int], Path]:
    """Every ``<topic>-<partition>`` folder of a data directory (not those marked for deletion)."""
    out = {}
    for child in data_dir.iterdir():
        if child.name.endswith(files.DELETE_SUFFIX) or not child.is_dir():
            continue
        parsed = files.parse_partition_dir(child.name)
        if parsed is not None:
            out[parsed] = child
    return out


def kafka_topics(data_dir: Path, known: set[str]) -> dict[str, dict]:
    """Topics found from partition folders alone (a Kafka broker's log directory): every topic with a
    folder and no metadata file. Its partition count is one past the highest partition found (a broker
    of a cluster holds only some partitions; the others are empty here)."""
    found: dict[str, list[int]] = {}
    dirs = partition_dirs(data_dir)
    for topic, p in dirs:
        if topic not in known:
            found.setdefault(topic, []).append(p)
    out = {}
    for topic, parts in sorted(found.items()):
        ids = {read_topic_id(dirs[(topic, p)]) for p in parts} - {None}
        if len(ids) > 1:
            log.warning("the partitions of %s name different topic ids %s; using the first", topic, sorted(ids))
        topic_id = sorted(ids)[0] if ids else base64.urlsafe_b64encode(
            uuid.uuid5(uuid.NAMESPACE_URL, f"compactlog:topic:{topic}").bytes).rstrip(b"=").decode()
        out[topic] = {"name": topic, "topic_id": topic_id, "partitions": max(parts) + 1,
                      "config": dict(KAFKA_INTERNAL_TOPIC_CONFIGS.get(topic, {}))}
    return out


def load_topics(data_dir: Path, strict: bool) -> dict[str, dict]:
    """Every topic of a data directory: our metadata files, then the topics of partition folders that
    have none. ``strict`` (the directory's owner): a metadata file that cannot be read is an error;
    otherwise (readers in other processes) it is skipped with a warning."""
    out: dict[str, dict] = {}
    unreadable: set[str] = set()
    topics_dir = data_dir / files.TOPICS_DIR
    for entry in sorted(topics_dir.glob("*" + files.TOPIC_SUFFIX)) if topics_dir.is_dir() else []:
        try:
            meta = parse_topic(entry)
        except FileNotFoundError:  # deleted right now
            continue
        except (OSError, CompactLogError) as exc:
            if strict:
                raise
            log.warning("skipping topic metadata %s: %s", entry.name, exc)
            unreadable.add(entry.name[: -len(files.TOPIC_SUFFIX)])  # not a Kafka topic with broker defaults
            continue
        out[meta["name"]] = meta
    out.update(kafka_topics(data_dir, set(out) | unreadable))
    return out


def require_data_dir(data_dir: str | os.PathLike[str]) -> Path:
    """Readers and Spark jobs name a directory that is not there instead of creating one."""
    if not Path(data_dir).is_dir():
        raise KafkaStorageError(f"data directory {data_dir} does not exist")
    return Path(data_dir)


def read_topics(data_dir: str | os.PathLike[str]) -> dict[str, dict]:
    """Topic metadata of a data directory, read without taking its lock (for readers in other processes)."""
    return load_topics(require_data_dir(data_dir), strict=False)
