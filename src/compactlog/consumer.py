"""A consumer for a data directory that another process may own: read-only snapshots, polled.

``compactlog.open`` takes the data directory's lock, so one process appends, cleans and compacts. A
reader that follows a topic as it grows (the console consumer with ``--timeout-ms``, a script tailing
a topic) must not take that lock. :meth:`SnapshotConsumer.poll` reads each assigned partition through a
read-only snapshot, kept while the position is short of the end it saw and replaced by a fresh one
after, so a reader catching up does not reopen segments per poll, and segments the owner deletes or
swaps are held only until the reader has passed them.

With ``isolation_level="read_committed"`` it reads as a Kafka consumer of that level: up to the last
stable offset (the first offset of a transaction still open), without the records of aborted
transactions (``compactlog.reading``'s rule, the one every reader follows). ``"latest"`` is then the last
stable offset, as ListOffsets answers such a consumer; a transaction that commits later is read by a
later poll, from where the last one stopped.
"""

from __future__ import annotations

import os
from typing import Iterator

from .errors import CorruptRecordError, InvalidRequestError, OffsetOutOfRangeError, UnknownTopicOrPartitionError, shown
from .reading import COMPACTED, LIVE, READ_COMMITTED, READ_UNCOMMITTED, check_read, earliest_offset, read_batches, records_of
from .records.batch import Record
from .storage import files
from .storage.topics import read_topics
from .storage.snapshot import PartitionSnapshot

# A batch that will not decode at the same position for this many polls in a row is corruption, not a
# batch the owner is still writing.
TORN_TAIL_POLLS = 20


class SnapshotConsumer:
    """Follows one topic (or one of its partitions) from a start position, record by record.

    ``start`` is ``"earliest"``, ``"latest"`` (a new Kafka consumer's default) or an offset of the one
    assigned partition. A position that retention has passed moves to the log start offset, as a Kafka
    consumer with ``auto.offset.reset=earliest`` does. Offsets always advance past gaps that cleaning or
    compaction left, so a reader reaches the end.
    """

    def __init__(self, data_dir: str | os.PathLike[str], topic: str, partition: int | None = None, *,
                 start: str | int = "latest", read_compacted: bool = False, max_poll_records: int = 500,
                 check_crcs: bool = True, isolation_level: str = READ_UNCOMMITTED) -> None:
        files.validate_topic_name(topic)
        check_read(isolation_level, COMPACTED if read_compacted else LIVE)
        meta = read_topics(data_dir).get(topic)
        if meta is None:
            raise UnknownTopicOrPartitionError(f"Topic {shown(topic)} does not exist in {data_dir}.")
        n = meta["partitions"]
        if partition is not None and not 0 <= partition < n:
            raise UnknownTopicOrPartitionError(f"Partition {partition} of topic {shown(topic)} does not exist (the topic has {n}).")
        if isinstance(start, int) and partition is None and n > 1:
            raise InvalidRequestError("an explicit offset needs a partition")
        self.data_dir, self.topic, self.read_compacted = data_dir, topic, read_compacted
        self.view = COMPACTED if read_compacted else LIVE
        self.max_poll_records = max_poll_records
        self.check_crcs = check_crcs
        self.isolation_level = isolation_level
        self.partitions = list(range(n)) if partition is None else [partition]
        self.positions: dict[int, int] = {}
        self._failures: dict[int, int] = {}
        self._first = -1  # index in self.partitions the last poll started with
        self._open: dict[int, tuple[PartitionSnapshot, int]] = {}  # partition -> (snapshot, its end offset)
        for p in self.partitions:
            with self._snapshot(p) as snap:
                if start == "earliest":
                    self.positions[p] = earliest_offset(snap.log_start_offset, self.view)
                elif start == "latest":
                    self.positions[p] = self._end_of(snap)
                else:
                    lo, hi = earliest_offset(snap.log_start_offset, self.view), snap.log_end_offset
                    if not lo <= int(start) <= hi:
                        raise OffsetOutOfRangeError(
                            f"offset {start} is out of range for {topic}-{p} ({snap.log_start_offset}..{hi})")
                    self.positions[p] = int(start)

    def _snapshot(self, p: int) -> PartitionSnapshot:
        return PartitionSnapshot.open(self.data_dir, self.topic, p)

    def _end_of(self, snap: PartitionSnapshot) -> int:
        """Where this reader's view of ``snap`` ends: its last stable offset for read_committed (nothing at
        or above it may be read yet), else its log end offset."""
        return snap.last_stable_offset if self.isolation_level == READ_COMMITTED else snap.log_end_offset

    def _current(self, p: int) -> tuple[PartitionSnapshot, int]:
        """The partition's snapshot, reopened once the position has reached the end it saw (for
        read_committed the LSO it saw, so a marker written since is found by the fresh one)."""
        held = self._open.get(p)
        if held is not None and self.positions[p] < held[1]:
            return held
        if held is not None:
            held[0].close()
        snap = self._snapshot(p)
        self._open[p] = (snap, self._end_of(snap))
        return self._open[p]

    def close(self) -> None:
        for snap, _ in self._open.values():
            snap.close()
        self._open.clear()

    def __enter__(self) -> "SnapshotConsumer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def poll(self) -> list[Record]:
        """The records appended after the current positions (at most ``max_poll_records``), partition
        by partition, each in offset order; an empty list when there is nothing new yet."""
        out: list[Record] = []
        # Start after the partition the last poll began with, so a busy partition that fills whole polls
        # does not keep the others waiting (Kafka's fetcher rotates partitions the same way).
        k = self._first = (self._first + 1) % len(self.partitions)
        for p in self.partitions[k:] + self.partitions[:k]:
            if len(out) >= self.max_poll_records:
                break
            snap, end = self._current(p)
            try:
                for rec in self._records(snap, end, p, self.max_poll_records - len(out)):
                    out.append(rec)
                self._failures.pop(p, None)
            except CorruptRecordError:
                # Most likely the owner's batch is still being written: read it on a later poll.
                self._open.pop(p)[0].close()
                self._failures[p] = self._failures.get(p, 0) + 1
                if self._failures[p] >= TORN_TAIL_POLLS:
                    raise
        return out

    def _records(self, snap: PartitionSnapshot, end: int, p: int, limit: int) -> Iterator[Record]:
        pos = self.positions[p]
        if not self.read_compacted:
            pos = max(pos, snap.log_start_offset)
        batches = read_batches(snap, pos, end, isolation=self.isolation_level, view=self.view,
                               check_crcs=self.check_crcs)
        # The reader checks each batch's CRC: one the owner is still writing fails it rather than
        # decoding as garbage, and is read again on a later poll.
        for batch in batches:
            for rec in records_of((batch,), self.topic, p, pos):  # batch by batch: positions pass markers too
                if limit <= 0:
                    return
                self.positions[p] = rec.offset + 1
                limit -= 1
                yield rec
            pos = self.positions[p] = max(pos, self.positions[p], batch.last_offset + 1)
        self.positions[p] = max(self.positions[p], pos)
        if self.isolation_level == READ_COMMITTED:
            # all of [pos, end) was read: an aborted transaction's batches at its end, which the rule drops,
            # are passed too (as a Kafka consumer's position passes them), so the next poll looks anew
            self.positions[p] = max(self.positions[p], end)
