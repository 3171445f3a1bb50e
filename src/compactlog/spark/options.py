"""Options of the ``compactlog`` data source, named as Spark's Kafka source names them."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Mapping

from ..compaction.reader import earliest_offset
from ..errors import UnknownTopicOrPartitionError
from ..storage.manager import read_topics

EARLIEST, LATEST = -2, -1  # Spark's Kafka source uses these in per-partition offset JSON


class OptionError(ValueError):
    """An option is missing or malformed."""


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
    read_compacted: bool = False  # the compacted view (compact-topic) instead of the whole log

    @classmethod
    def parse(cls, options: Mapping[str, str], streaming: bool = False) -> "SourceOptions":
        opts = {k.lower(): v for k, v in options.items()}
        path = opts.get("path")
        if not path:
            raise OptionError('option "path" (the data directory) is required')
        topics = read_topics(path)
        if "subscribe" in opts:
            wanted = [t.strip() for t in opts["subscribe"].split(",") if t.strip()]
            missing = [t for t in wanted if t not in topics]
            if missing:
                raise UnknownTopicOrPartitionError(f"Topic '{missing[0]}' does not exist in {path}.")
        elif "subscribepattern" in opts:
            pattern = re.compile(opts["subscribepattern"])
            wanted = sorted(t for t in topics if pattern.fullmatch(t))
        elif "topic" in opts:
            wanted = [opts["topic"]]
            if wanted[0] not in topics:
                raise UnknownTopicOrPartitionError(f"Topic '{wanted[0]}' does not exist in {path}.")
        else:
            raise OptionError('one of the options "subscribe" or "subscribePattern" is required')
        default_start = "latest" if streaming else "earliest"
        return cls(
            path=path,
            topics=tuple(wanted),
            starting=_offsets(opts.get("startingoffsets", default_start), "startingOffsets"),
            ending=_offsets(opts.get("endingoffsets", "latest"), "endingOffsets"),
            include_headers=opts.get("includeheaders", "false").lower() == "true",
            max_offsets_per_trigger=int(opts["maxoffsetspertrigger"]) if "maxoffsetspertrigger" in opts else None,
            max_partition_bytes=int(opts.get("maxpartitionbytes", str(128 << 20))),
            partitions={t: topics[t]["partitions"] for t in wanted},
            read_compacted=opts.get("readcompacted", "false").lower() == "true",
        )

    def start_for(self, topic: str, partition: int, log_start: int, log_end: int) -> int:
        return _resolve(self.starting, topic, partition, earliest_offset(log_start, self.read_compacted), log_end)

    def end_for(self, topic: str, partition: int, log_start: int, log_end: int) -> int:
        # the compacted view begins before the live log once retention has trimmed it
        return _resolve(self.ending, topic, partition, earliest_offset(log_start, self.read_compacted), log_end)


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
