"""File and directory names of a Kafka log directory: the one home for every name and suffix.

A segment with base offset B is ``P.log``, ``P.index``, ``P.timeindex`` (and ``P.txnindex``) where P is
B zero-padded to 20 digits. Temporary suffixes go after the extension (``P.log.cleaned``,
``P.log.swap``, ``P.log.deleted``). Producer state taken at offset O is ``O.snapshot`` (O padded the same
way). A partition lives in ``<topic>-<partition>``. Every other name a
data directory holds (checkpoints, markers, our metadata and staging folders) is here too, and nowhere
else.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
from pathlib import Path

from ..errors import InvalidTopicError, shown

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"
PRODUCER_SNAPSHOT_SUFFIX = ".snapshot"  # <offset>.snapshot: producer state as of that offset (Kafka's name)

# In a data directory (Kafka's names where Kafka has the file)
LOCK_FILE = ".lock"
TOPICS_DIR = "__topics"  # ours: topic metadata, one <topic>.json each (Kafka keeps it in its controller)
TOPIC_SUFFIX = ".json"
STAGING_DIR = "__staging"  # ours: Spark jobs' staging directories
DELETE_SUFFIX = "-delete"  # a partition directory being removed: <topic>-<partition>.<unique>-delete
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
META_PROPERTIES = "meta.properties"  # the cluster and node ids of a broker's log directory, as Kafka writes them
PRODUCER_ID_BLOCK = "producer-id-block"  # ours: the end of the last block of producer ids handed out
SECURITY_DIR = "__security"  # ours: SASL credentials and ACLs (Kafka keeps them in its metadata log)
SECURITY_LOCK = ".lock"  # in SECURITY_DIR: held while the broker or the CLI rewrites a file there
CREDENTIALS_FILE = "credentials.json"  # in SECURITY_DIR: users' salted SCRAM credentials, never a password
ACLS_FILE = "acls.json"  # in SECURITY_DIR: ACL bindings

# In a partition directory
PARTITION_METADATA = "partition.metadata"
COMPACTION_STATE_FILE = "compaction-state"  # ours: the published compacted view (Pulsar-style)
COMPACTION_ERROR_FILE = "compaction-error"  # ours: the last compaction run's failure
SIDE_LOG_PREFIX = "compacted."  # ours: compacted.<id>/, a compacted view's side log

MAX_TOPIC_NAME_LENGTH = 249
MAX_FILE_NAME = 255  # bytes in one path component (ext4, xfs, tmpfs)
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")


def filename_prefix(base_offset: int) -> str:
    """The 20-digit, zero-padded base offset every segment file starts with."""
    return f"{base_offset:020d}"


def segment_file(directory: Path, base_offset: int, suffix: str, temp: str = "") -> Path:
    return directory / f"{filename_prefix(base_offset)}{suffix}{temp}"


def producer_snapshot_file(directory: Path, offset: int) -> Path:
    """Kafka's producer state snapshot taken at ``offset``: ``<offset, 20 digits>.snapshot``."""
    return segment_file(directory, offset, PRODUCER_SNAPSHOT_SUFFIX)


def base_offset_of(path: str | os.PathLike[str]) -> int:
    """Base offset of a segment file: the integer before the first dot."""
    return int(os.path.basename(path).split(".", 1)[0])


def is_segment_file(name: str) -> bool:
    head = name.split(".", 1)[0]
    return len(head) == 20 and head.isdigit()


QUOTE = '"'  # around a topic name in Kafka's message


def validate_topic_name(topic: str) -> None:
    """Kafka's topic name rules; also guarantees a topic can never name a path outside its directory."""
    if not isinstance(topic, str) or not topic:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if topic in (".", ".."):
        raise InvalidTopicError('Topic name cannot be "." or ".."')
    if len(topic) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters, topic name: {shown(topic, '')}"
        )
    if not _LEGAL_TOPIC.fullmatch(topic):
        raise InvalidTopicError(
            f"Topic name {shown(topic, QUOTE)} is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"
        )


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def delete_dir_name(partition_dir: str, unique: str, suffix: str) -> str:
    """``<topic>-<partition>.<unique><suffix>``, the name a partition directory is renamed to before
    removal, with the topic shortened as needed to fit a file name (as Kafka does: a 249-character
    topic would not fit otherwise)."""
    topic, _, partition = partition_dir.rpartition("-")
    room = MAX_FILE_NAME - len(f"-{partition}.{unique}{suffix}")
    return f"{topic[:room]}-{partition}.{unique}{suffix}"


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a partition directory name, or None if it is not one."""
    topic, sep, part = name.rpartition("-")
    if not sep or not part.isdigit() or not topic:
        return None
    try:
        validate_topic_name(topic)
    except InvalidTopicError:
        return None
    return topic, int(part)


def fsync_dir(directory: Path) -> None:
    """Make renames and creations in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def topic_file(data_dir: Path, topic: str) -> Path:
    """A topic's metadata file: ``__topics/<topic>.json``."""
    return data_dir / TOPICS_DIR / f"{topic}{TOPIC_SUFFIX}"


def atomic_write(path: Path, text: str) -> None:
    """Write ``path`` as Kafka writes checkpoints: ``.tmp``, fsync, rename over, fsync the directory.
    (A name too long for the suffix gets a short hidden temporary name instead.)"""
    tmp_name = path.name + ".tmp"
    if len(tmp_name.encode()) > MAX_FILE_NAME:
        import hashlib  # here: hashlib loads OpenSSL, which a process that writes no long name need not

        tmp_name = f".{hashlib.sha1(path.name.encode()).hexdigest()[:16]}.tmp"
    tmp = path.with_name(tmp_name)
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def try_lock(path: Path, create: bool = True) -> int | None:
    """An exclusive ``flock`` on ``path``, or None when another open file holds it. The descriptor is
    the lock: the kernel drops it when the holder closes it or dies, so a crash never leaves a stale
    lock behind. A missing file raises FileNotFoundError unless ``create``."""
    fd = os.open(path, os.O_RDWR | (os.O_CREAT if create else 0), 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def write_fully(fd: int, parts, position: int) -> int:
    """Write ``parts`` at ``position`` in as many ``pwritev`` calls as it takes. A write that stops
    short (a full disk, a file-size limit) is retried for the rest, so that the OS reports its reason
    (ENOSPC, EFBIG) as an OSError instead of a bare count."""
    size = sum(map(len, parts))  # parts are bytes or byte views: len is their size
    written = total = os.pwritev(fd, parts, position)  # nearly always the whole of it
    if total == size:
        return total
    views = [memoryview(p).cast("B") for p in parts]
    while total < size:
        while written >= len(views[0]):  # drop what the last call wrote
            written -= len(views.pop(0))
        views[0] = views[0][written:]
        written = os.pwritev(fd, views, position + total)
        if written == 0:
            raise OSError(errno.EIO, "a write made no progress")
        total += written
    return total
