"""Options of the ``compactlog`` data source, named as Spark's Kafka source names them."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Mapping

from ..reading import COMPACTED, ISOLATION_LEVELS, LIVE, READ_COMMITTED, READ_UNCOMMITTED, earliest_offset, topic_metadata
from ..errors import InvalidConfigError, UnknownTopicOrPartitionError, shown

EARLIEST, LATEST = -2, -1  # Spark's Kafka source uses these in per-partition offset JSON
NO_BYTE_CUT = 2**63 - 1
# The cores Spark runs tasks on, when the session was made by ``spark_session`` (which knows its master);
# the planner of a read runs in a process of its own and cannot ask Spark.
CORES_ENV = "COMPACTLOG_SPARK_CORES"


def default_cores() -> int:
    """How many ranges a read is cut into at least when the caller names neither ``minPartitions`` nor
    ``maxPartitionBytes``: the task slots of a local master (``CORES_ENV``), else this machine's cores."""
    try:
        told = int(os.environ.get(CORES_ENV, ""))
    except ValueError:
        told = 0
    return told if told > 0 else machine_cores()


def machine_cores() -> int:
    """The cores this process may run on (its CPU affinity, as a container limits it), as Spark's
    ``local[*]`` counts them."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class OptionError(InvalidConfigError, ValueError):
    """An option is missing or malformed."""


def _int_option(opts: Mapping[str, str], key: str, name: str, default: int | None, least: int) -> int | None:
    raw = opts.get(key)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise OptionError(f'option "{name}" must be a whole number, got {raw!r}') from None
    if value < least:
        raise OptionError(f'option "{name}" must be at least {least}, got {value}')
    return value


def _bool_option(opts: Mapping[str, str], key: str, name: str, default: bool) -> bool:
    raw = opts.get(key)
    if raw is None:
        return default
    if raw.strip().lower() not in ("true", "false"):
        raise OptionError(f'option "{name}" must be true or false, got {raw!r}')
    return raw.strip().lower() == "true"


@dataclass(frozen=True)
class SourceOptions:
    path: str
    topics: tuple[str, ...]
    starting: dict[tuple[str, int], int] | int
    ending: dict[tuple[str, int], int] | int
    include_headers: bool
    max_offsets_per_trigger: int | None
    max_partition_bytes: int
    partitions: dict[str, int]  # topic -> partition count
    # Spark's Kafka source's minPartitions: at least this many Spark partitions, the larger ranges cut
    # into pieces of equal offset counts (inside segments and batches)
    min_partitions: int | None = None
    # with neither minPartitions nor maxPartitionBytes: the task slots a read is cut for (pieces of at
    # least MIN_PIECE_BYTES, so a small read, a micro-batch say, stays one task a partition)
    slots: int | None = None
    read_compacted: bool = False  # the compacted view (compact-topic) instead of the whole log
    check_crcs: bool = True  # kafka.check.crcs: verify every batch read (Kafka's consumer default)
    # kafka.isolation.level, as Spark's Kafka source passes it to its consumer: read_committed ends each
    # partition at its last stable offset and leaves aborted transactions out
    isolation: str = READ_UNCOMMITTED

    @classmethod
    def parse(cls, options: Mapping[str, str], streaming: bool = False) -> "SourceOptions":
        opts = {k.lower(): v for k, v in options.items()}
        path = opts.get("path")
        if not path:
            raise OptionError('option "path" (the data directory) is required')
        topics = topic_metadata(path)
        if "subscribe" in opts:
            wanted = [t.strip() for t in opts["subscribe"].split(",") if t.strip()]
            missing = [t for t in wanted if t not in topics]
            if missing:
                raise UnknownTopicOrPartitionError(f"Topic {shown(missing[0])} does not exist in {path}.")
        elif "subscribepattern" in opts:
            pattern = re.compile(opts["subscribepattern"])
            wanted = sorted(t for t in topics if pattern.fullmatch(t))
        elif "topic" in opts:
            wanted = [opts["topic"]]
            if wanted[0] not in topics:
                raise UnknownTopicOrPartitionError(f"Topic {shown(wanted[0])} does not exist in {path}.")
        else:
            raise OptionError('one of the options "subscribe" or "subscribePattern" is required')
        default_start = "latest" if streaming else "earliest"
        return cls(
            path=path,
            topics=tuple(wanted),
            starting=_offsets(opts.get("startingoffsets", default_start), "startingOffsets"),
            ending=_offsets(opts.get("endingoffsets", "latest"), "endingOffsets"),
            include_headers=_bool_option(opts, "includeheaders", "includeHeaders", False),
            max_offsets_per_trigger=_int_option(opts, "maxoffsetspertrigger", "maxOffsetsPerTrigger", None, 1),
            # No byte cut unless asked for; and unless either is named, a range per task slot for a read
            # large enough (Spark's Kafka source reads one per partition, leaving cores idle)
            max_partition_bytes=_int_option(opts, "maxpartitionbytes", "maxPartitionBytes", NO_BYTE_CUT, 1),
            partitions={t: topics[t]["partitions"] for t in wanted},
            min_partitions=_int_option(opts, "minpartitions", "minPartitions", None, 1),
            slots=None if "minpartitions" in opts or "maxpartitionbytes" in opts else default_cores(),
            read_compacted=_bool_option(opts, "readcompacted", "readCompacted", False),
            check_crcs=_bool_option(opts, "kafka.check.crcs", "kafka.check.crcs", True),
            isolation=_isolation_option(opts),
        )

    def end_of(self, snap) -> int:
        """Where "latest" is in a partition's snapshot for this reader: the last stable offset for
        read_committed (Kafka's endOffsets for such a consumer), else the log end offset."""
        return snap.last_stable_offset if self.isolation == READ_COMMITTED else snap.log_end_offset

    def start_for(self, topic: str, partition: int, log_start: int, log_end: int) -> int:
        return _resolve(self.starting, topic, partition, earliest_offset(log_start, COMPACTED if self.read_compacted else LIVE), log_end)

    def end_for(self, topic: str, partition: int, log_start: int, log_end: int) -> int:
        # the compacted view begins before the live log once retention has trimmed it
        return _resolve(self.ending, topic, partition, earliest_offset(log_start, COMPACTED if self.read_compacted else LIVE), log_end)


def _isolation_option(opts: Mapping[str, str]) -> str:
    raw = opts.get("kafka.isolation.level")
    if raw is None:
        return READ_UNCOMMITTED
    if raw.strip() not in ISOLATION_LEVELS:
        raise OptionError(f'option "kafka.isolation.level" must be one of {", ".join(ISOLATION_LEVELS)}, got {raw!r}')
    return raw.strip()


def _offsets(value: str, name: str) -> dict[tuple[str, int], int] | int:
    v = value.strip()
    if v == "earliest":
        return EARLIEST
    if v == "latest":
        return LATEST
    try:
        parsed = json.loads(v)
        return {(t, int(p)): int(o) for t, parts in parsed.items() for p, o in parts.items()}
    except (ValueError, AttributeError, TypeError):
        raise OptionError(f'{name} must be "earliest", "latest" or JSON like {{"topic":{{"0":23,"1":-2}}}}, got {value!r}') from None


def _resolve(spec, topic: str, partition: int, log_start: int, log_end: int) -> int:
    o = spec.get((topic, partition), spec.get((topic, -1), LATEST)) if isinstance(spec, dict) else spec
    if o == EARLIEST:
        return log_start
    if o == LATEST:
        return log_end
    return min(max(o, log_start), log_end)
