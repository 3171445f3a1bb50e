"""Staged appends: batches built and checked by tasks in other processes, appended by the holder of
the data directory all or none.

A write job (the Spark data source's ``df.write``) builds and compresses its batches in tasks that do
not hold the data directory. Each task validates every batch against its topic's rules (so a bad row
fails its task, in parallel) and stages it with the fingerprint of the config it validated under, in a
file of its own in the job's staging directory (``storage.staging``; :func:`begin` makes it). One entry::

    topic length  int32
    topic         UTF-8 bytes
    partition     int32
    fingerprint   8 bytes (LogConfig.fingerprint)
    header CRC    uint32: CRC-32C of the entry's bytes above (the batch's own CRC does not cover them,
                  and a flipped partition byte would otherwise send the batch to another partition)
    batch         a v2 record batch as stored (offsets assigned at the append)

At commit, :func:`append_staged` (the holder's side) checks every staged batch before appending any (a
batch validated under the topic's current config passes on its fingerprint; others are validated
again), so nothing is written unless everything can be; then it appends them in order through the
normal validated append, and removes the files. Both passes read the files a chunk at a time, so
memory does not grow with the size of the job.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from .errors import CorruptRecordError, InvalidRequestError
from .records.batch import LOG_OVERHEAD, RecordBatch, crc32c
from .storage.files import MAX_TOPIC_NAME_LENGTH
from .storage.log_config import LogConfig
from .storage.staging import JobStaging
from .storage.validator import LONG_MAX, check_fits_segment, validate_and_assign_offsets

FINGERPRINT_BYTES = 8  # LogConfig.fingerprint of the config a task validated a batch under
INT32 = struct.Struct(">i")
UINT32 = struct.Struct(">I")
MAX_TOPIC_BYTES = MAX_TOPIC_NAME_LENGTH * 4  # the longest topic name, in UTF-8 at most
STAGED_SUFFIX = ".batches"


def begin(data_dir: str | os.PathLike[str], group: str | None = None) -> JobStaging:
    """The holder's side, before the job: the job's staging directory (a missing data directory is
    named, not made), in ``group`` when given. Unlocked: a data source's driver side runs in
    short-lived workers (see ``JobStaging.begin``)."""
    return JobStaging.begin(data_dir, locked=False, group=group)


def discard(directory: str) -> None:
    """The holder's side, after the job: a staging directory its tasks staged in, and what it holds,
    removed (a stream's tasks stage in a directory other than the committing writer's own)."""
    JobStaging(directory).remove()


def staged_entry(topic: str, partition: int, fingerprint: bytes, batch: bytes) -> bytes:
    """One entry of a staging file (the format above), unchecked: :class:`BatchStager` checks first."""
    name = topic.encode()
    head = INT32.pack(len(name)) + name + INT32.pack(partition) + fingerprint
    return head + UINT32.pack(crc32c(head)) + batch


class BatchStager:
    """Task side: validates batches and stages them in one file of its own in the job's directory,
    created with the first batch. Use as a context manager: a task that fails removes its file (it
    sends no commit message, so nobody else would)."""

    def __init__(self, staging: JobStaging) -> None:
        self.staging = staging
        self.path: Path | None = None
        self._out = None

    def stage(self, topic: str, partition: int, config: LogConfig, batch: bytes, now_ms: int) -> None:
        """Check ``batch`` as the append will (raising the append's typed error), then stage it."""
        validate_and_assign_offsets(batch, 0, config, now_ms, f"{topic}-{partition}")  # fail fast
        check_fits_segment(len(batch), config, f"{topic}-{partition}")
        if self._out is None:
            self.path = self.staging.new_file(STAGED_SUFFIX)
            self._out = open(self.path, "r+b")
        self._out.write(staged_entry(topic, partition, config.fingerprint(), batch))

    def files(self) -> list[str]:
        """The file staged into, if any: the task's commit message."""
        return [str(self.path)] if self.path else []

    def __enter__(self) -> "BatchStager":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None
        if exc_type is not None and self.path is not None:
            self.path.unlink(missing_ok=True)
            self.path = None


@dataclass(frozen=True)
class _Staged:
    """One staged batch: where it goes, the config it was validated under, where its bytes are."""

    topic: str
    partition: int
    fingerprint: bytes
    position: int
    size: int


class _Chunks:
    """A staging file read a megabyte at a time, its entries parsed from memory: a read call or two per
    entry would cost more than the rest of the commit's work on a small batch."""

    def __init__(self, f) -> None:
        self.f = f
        self.buf = b""
        self.at = 0  # where the next entry starts in buf
        self.base = 0  # the file position of buf[0]

    def have(self, n: int) -> bool:
        """Whether ``n`` bytes from ``at`` are in memory, reading more (and the rest of the file's
        chunk) when they are not; False at the end of the file."""
        if len(self.buf) - self.at >= n:
            return True
        rest = self.buf[self.at :]
        self.base += self.at
        self.buf = rest + self.f.read(max(n - len(rest), _CHUNK))
        self.at = 0
        return len(self.buf) >= n


_CHUNK = 1 << 20


def _staged(path: str) -> Iterator[tuple[_Staged, memoryview]]:
    """The entries of one staging file, each with its batch's bytes, read in chunks: a write job's
    staged data can be far larger than the holder's memory, so only a few chunks (or entries, where
    an entry is larger) are held at a time. A header that fails its CRC, or a file that ends inside an entry, is named, with
    the entry's position."""
    total = os.path.getsize(path)
    with open(path, "rb") as f:  # (buffered: its read(n) returns short only at the end of the file)
        r = _Chunks(f)
        while r.have(1):
            at = r.base + r.at
            if not r.have(4):
                raise InvalidRequestError(f"staging file {path} ends inside an entry")
            (nlen,) = INT32.unpack_from(r.buf, r.at)
            if not 0 <= nlen <= MAX_TOPIC_BYTES:  # (read as it stands, a damaged length could ask for gigabytes)
                raise _damaged(path, at, "its topic length is not one a topic has")
            head_len = 4 + nlen + 4 + FINGERPRINT_BYTES
            if not r.have(head_len + 4 + LOG_OVERHEAD):
                raise InvalidRequestError(f"staging file {path} ends inside an entry")
            head = r.buf[r.at : r.at + head_len]
            if UINT32.unpack_from(r.buf, r.at + head_len)[0] != crc32c(head):
                raise _damaged(path, at, "its header fails its CRC")
            (p,) = INT32.unpack_from(head, 4 + nlen)
            (length,) = INT32.unpack_from(r.buf, r.at + head_len + 4 + 8)
            start = head_len + 4
            if length < 0 or at + start + LOG_OVERHEAD + length > total or not r.have(start + LOG_OVERHEAD + length):
                raise InvalidRequestError(f"staging file {path} ends inside an entry")
            body = memoryview(r.buf)[r.at + start : r.at + start + LOG_OVERHEAD + length]
            yield _Staged(head[4 : 4 + nlen].decode(), p, head[8 + nlen :], at + start, LOG_OVERHEAD + length), body
            r.at += start + LOG_OVERHEAD + length


def _damaged(path: str, at: int, why: str) -> InvalidRequestError:
    return InvalidRequestError(f"staging file {path}: the entry at position {at} is damaged: {why}")


def append_staged(data_dir: str | os.PathLike[str], paths: list[str]) -> int:
    """Check every staged batch, then append them in order; returns records appended. The files are
    removed either way.

    Tasks validated their batches (in parallel); a batch validated under the topic's current config
    needs no second look before appending, unless the config bounds how old a timestamp may be
    (``message.timestamp.before.max.ms``), a check that time passing can turn. Others are validated
    here again before anything is appended. The append validates each batch once more, as every
    append does, but does not walk the records of one that passed in its task under the current
    config (``prechecked``): its CRC shows the bytes are those that passed."""
    from .api import CompactLog

    try:
        with CompactLog(data_dir) as cl:
            targets: dict[tuple[str, int, bytes], tuple] = {}  # (partition, passed in its task) per destination

            def target(e: _Staged) -> tuple:
                key = (e.topic, e.partition, e.fingerprint)
                if key not in targets:  # (nothing else writes the data directory while it is held)
                    part = cl.partition(e.topic, e.partition)
                    targets[key] = part, _passed_in_task(e, part)
                return targets[key]

            for path in paths:  # check everything before writing anything
                for e, body in _staged(path):
                    part, passed = target(e)
                    check_fits_segment(e.size, part.config, part.name)  # the append checks it only as it stores
                    if passed:
                        _check_intact(path, e, body)  # its bytes are still those that passed
                    else:
                        validate_and_assign_offsets(body, part.log_end_offset, part.config,
                                                    cl.time.milliseconds(), part.name)
            appended = 0
            for path in paths:
                for e, body in _staged(path):
                    part, passed = target(e)
                    appended += part.append(body, prechecked=passed).record_count
            return appended
    finally:
        for p in paths:
            Path(p).unlink(missing_ok=True)


def _passed_in_task(entry: _Staged, part) -> bool:
    """Whether the task's validation of a staged batch still holds: it ran under the partition's current
    config, and that config has no ``message.timestamp.before.max.ms``, a bound time passing can turn."""
    config = part.config
    return entry.fingerprint == config.fingerprint() and config.message_timestamp_before_max_ms == LONG_MAX


def _check_intact(path: str, entry: _Staged, body: bytes) -> None:
    """A staged batch's size, magic and CRC, checked before anything is appended: a byte damaged since
    its task checked it would otherwise be found only by its own append, after the batches before it."""
    try:
        RecordBatch(body).ensure_valid()
    except CorruptRecordError as exc:
        raise CorruptRecordError(f"the batch staged for {entry.topic}-{entry.partition} at position "
                                 f"{entry.position} of {path} is damaged: {exc}") from None
