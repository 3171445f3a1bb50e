"""Read-only views of a partition for other processes (Spark executors, dump tools).

A data directory is opened for writing by one process at a time (it holds ``.lock``). Readers in other
processes use this instead: it lists the live segment files, opens them read-only and never creates,
recovers or renames anything. A segment swapped out by the cleaner while we read it stays readable
through its open descriptor; a file renamed between listing and opening makes us list again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from ..errors import UnknownTopicOrPartitionError
from ..records.batch import RecordBatch
from . import files
from .reader import read_batches
from .segment import LogSegment


@dataclass
class PartitionSnapshot:
    """The segments of one partition directory as they were when it was opened."""

    directory: Path
    segments: list[LogSegment]

    @classmethod
    def open(cls, data_dir: str | os.PathLike[str], topic: str, partition: int, attempts: int = 5) -> "PartitionSnapshot":
        files.validate_topic_name(topic)
        d = Path(data_dir) / files.partition_dir_name(topic, partition)
        if not d.is_dir():
            raise UnknownTopicOrPartitionError(f"Partition {topic}-{partition} does not exist in {data_dir}.")
        return cls.of_directory(d, attempts)

    @classmethod
    def of_directory(cls, d: Path, attempts: int = 5) -> "PartitionSnapshot":
        """The segments of any directory of segment files (a partition, or a compacted side log)."""
        for attempt in range(attempts):
            bases = sorted(files.base_offset_of(n) for n in os.listdir(d) if files.is_segment_file(n) and n.endswith(files.LOG_SUFFIX))
            try:
                return cls(d, [LogSegment(d, b, read_only=True) for b in bases])
            except FileNotFoundError:  # swapped by a cleaner between listing and opening: list again
                if attempt == attempts - 1:
                    raise
        raise AssertionError("unreachable")

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].read_next_offset() if self.segments else 0

    @property
    def log_start_offset(self) -> int:
        return self.segments[0].base_offset if self.segments else 0

    def batches(self, start: int = 0, end: int | None = None, *, check_crcs: bool = True) -> Iterator[RecordBatch]:
        """Whole batches holding offsets in [start, end), in order, each checked (see ``reader.py``)."""
        return read_batches(self.segments, start, end, check_crcs=check_crcs)

    def close(self) -> None:
        for s in self.segments:
            s.close_handlers()

    def __enter__(self) -> "PartitionSnapshot":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
