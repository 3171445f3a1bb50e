"""DescribeLogDirs and AlterReplicaLogDirs: the broker's one log directory.

Kafka lists, per log directory, the partitions in it with their size on disk (the bytes of their
segment files), how far a future replica lags (none here: there are no replicas moving) and, from
DescribeLogDirs v4, the file system's total and usable bytes. This broker has one directory, the data
directory it serves (``--data-dir``, also reported as ``log.dir`` and ``log.dirs`` by DescribeConfigs),
so every partition is in it, and moving a partition to another directory has nowhere to go: a
directory other than this one is LOG_DIR_NOT_FOUND, as Kafka answers for a directory it does not have,
and asking to move a partition to the directory it is already in changes nothing and succeeds.

Both need the cluster right Kafka asks for: DESCRIBE to list, ALTER to move (refused:
CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Iterable

from .broker import NO_THROTTLE, Broker, Session, error_code
from .entities import make, response, schema
from .protocol import Request

UNKNOWN_TOPIC_OR_PARTITION, CLUSTER_AUTHORIZATION_FAILED, LOG_DIR_NOT_FOUND = 3, 31, 57


def served_dir(broker: Broker) -> str:
    """The absolute path of the directory this broker serves, as Kafka names a log directory."""
    return str(Path(broker.cl.data_dir).resolve())


def partition_sizes(broker: Broker, wanted: set[tuple[str, int]] | None) -> dict[str, list[tuple[int, int]]]:
    """Per topic, (partition, bytes on disk) of the partitions in ``wanted`` this broker has (every one
    when None), in partition order. Partitions asked for that do not exist are left out, as in Kafka."""
    out: dict[str, list[tuple[int, int]]] = {}
    for p in broker.cl.partitions():
        if wanted is None or (p.topic, p.index) in wanted:
            out.setdefault(p.topic, []).append((p.index, p.size_bytes))
    for rows in out.values():
        rows.sort()
    return dict(sorted(out.items()))


def disk_space(path: str) -> tuple[int, int]:
    """(total, usable) bytes of the file system holding ``path``; (-1, -1) when it cannot be read."""
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return -1, -1
    return usage.total, usage.free


def _requested(topics) -> set[tuple[str, int]] | None:
    if topics is None:
        return None
    return {(t.topic, p) for t in topics for p in t.partitions}


async def describe_log_dirs(broker: Broker, req: Request, session: Session):
    s = schema(req)
    if not broker.authorize(session, "DESCRIBE", "CLUSTER"):
        return response(req, throttle_time=NO_THROTTLE, error_code=error_code(CLUSTER_AUTHORIZATION_FAILED),
                        results=())
    path = served_dir(broker)
    sizes = await broker.blocking(partition_sizes, broker, _requested(req.body.topics))
    total, usable = await broker.blocking(disk_space, path)
    topics = tuple(make(s.DescribeLogDirsTopic, name=name, partitions=tuple(
        make(s.DescribeLogDirsPartition, partition_index=index, partition_size=size, offset_lag=0, is_future_key=False)
        for index, size in rows)) for name, rows in sizes.items())
    result = make(s.DescribeLogDirsResult, error_code=error_code(0), log_dir=path, topics=topics,
                  total_bytes=total, usable_bytes=usable)
    return response(req, throttle_time=NO_THROTTLE, error_code=error_code(0), results=(result,))


def _same_dir(path: str, served: str) -> bool:
    """Whether a client's directory is the served one (a path that cannot be a path is not)."""
    try:
        return os.path.abspath(path) == served or str(Path(path).resolve()) == served
    except (OSError, ValueError):  # a NUL byte, a loop of links
        return False


def _moves(broker: Broker, dirs) -> Iterable[tuple[str, int, int]]:
    """(topic, partition, error code) of each partition a request moves."""
    served = served_dir(broker)
    for d in dirs:
        here = _same_dir(d.path, served)
        for t in d.topics:
            for index in t.partitions:
                if not here:
                    yield t.name, index, LOG_DIR_NOT_FOUND
                elif broker.cl.find_partition(t.name, index) is None:
                    yield t.name, index, UNKNOWN_TOPIC_OR_PARTITION
                else:
                    yield t.name, index, 0  # already there: nothing to move


async def alter_replica_log_dirs(broker: Broker, req: Request, session: Session):
    s = schema(req)
    allowed = broker.authorize(session, "ALTER", "CLUSTER")
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for topic, index, code in _moves(broker, req.body.dirs):
        by_topic.setdefault(topic, []).append((index, code if allowed else CLUSTER_AUTHORIZATION_FAILED))
    return response(req, throttle_time=NO_THROTTLE, results=tuple(
        make(s.AlterReplicaLogDirTopicResult, topic_name=topic, partitions=tuple(
            make(s.AlterReplicaLogDirPartitionResult, partition_index=index, error_code=error_code(code))
            for index, code in rows))
        for topic, rows in by_topic.items()))


HANDLERS = {35: describe_log_dirs, 34: alter_replica_log_dirs}
