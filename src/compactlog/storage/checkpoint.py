"""Offset checkpoint files in Kafka's text format.

::

    0                       version (must be 0)
    N                       entry count
    <topic> <partition> <offset>   (N lines)

Used for ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint`` and
``cleaner-offset-checkpoint`` in the root of a log directory. Writes are atomic (tmp + fsync + rename
+ directory fsync), so a crash leaves the old or the new file, never a torn one.
"""

from __future__ import annotations

import threading
from pathlib import Path

from ..errors import KafkaStorageError
from .files import atomic_write

VERSION = 0
TopicPartition = tuple[str, int]


class OffsetCheckpointFile:
    """One checkpoint file; reads and writes whole maps of (topic, partition) -> offset."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    def write(self, offsets: dict[TopicPartition, int]) -> None:
        lines = [str(VERSION), str(len(offsets))]
        lines += [f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())]
        with self._lock:
            atomic_write(self.path, "\n".join(lines) + "\n")

    def read(self) -> dict[TopicPartition, int]:
        with self._lock:
            try:
                text = self.path.read_bytes().decode("utf-8")
            except FileNotFoundError:
                return {}
            except UnicodeDecodeError:
                raise KafkaStorageError(f"Checkpoint file {self.path} is not UTF-8 text") from None
        return parse_checkpoint(text, str(self.path))


def parse_checkpoint(text: str, where: str = "checkpoint") -> dict[TopicPartition, int]:
    """Parse checkpoint text; malformed content raises KafkaStorageError naming the file and line."""
    lines = text.splitlines()
    if not lines:
        return {}
    try:
        version = int(lines[0].strip())
    except ValueError:
        raise KafkaStorageError(f"Malformed line in checkpoint file {where}: {lines[0]!r}") from None
    if version != VERSION:
        raise KafkaStorageError(f"Unrecognized version of the checkpoint file {where}: {version}")
    if len(lines) < 2:
        raise KafkaStorageError(f"Checkpoint file {where} has no entry count")
    try:
        expected = int(lines[1].strip())
    except ValueError:
        raise KafkaStorageError(f"Malformed entry count in checkpoint file {where}: {lines[1]!r}") from None
    entries = [ln for ln in lines[2:] if ln.strip()]
    if len(entries) != expected:
        raise KafkaStorageError(f"Expected {expected} entries in checkpoint file {where}, but found {len(entries)}")
    out: dict[TopicPartition, int] = {}
    for ln in entries:
        parts = ln.split()
        if len(parts) != 3:
            raise KafkaStorageError(f"Malformed line in checkpoint file {where}: {ln!r}")
        try:
            partition, offset = int(parts[1]), int(parts[2])
        except ValueError:
            raise KafkaStorageError(f"Malformed line in checkpoint file {where}: {ln!r}") from None
        if partition < 0 or offset < 0:
            raise KafkaStorageError(f"Negative partition or offset in checkpoint file {where}: {ln!r}")
        out[(parts[0], partition)] = offset
    return out
