"""One partition as the adapters see it: the seam between them and the storage.

The broker, the console, the CLI and the Spark jobs use a partition through this object (from
``CompactLog.partition``) and never the log, its segments or its indexes: appending stored bytes, the
stored bytes of a range (Fetch forwards them undecoded), records through the one read path
(``compactlog.reading``), offsets and watermarks, producer state and a description. A rule about what a
reader may see therefore lives below this line, once.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from .reading import LIVE, READ_UNCOMMITTED, read_batches, read_records, records_below
from .records.batch import Record, RecordBatch
from .storage.producer_state import OpenTransaction, ProducerInfo
from .storage.validator import LEADER_EPOCH  # noqa: F401 - the epoch every stored batch carries (one node: never a new leader)

if TYPE_CHECKING:
    from .segment_summaries import SegmentSummary
    from .storage.log import Log
    from .storage.log_config import LogConfig
    from .storage.topics import PartitionInfo
    from .storage.validator import ValidatedAppend


@dataclass(frozen=True)
class StoredRange:
    """Whole, checked batches as they are stored: ``size`` bytes at ``position`` of one segment file.

    ``read`` copies them; ``open_handle`` gives a descriptor of the file's own (for sendfile), which stays
    readable when the cleaner swaps the segment out or retention deletes it before the bytes go out. The
    caller closes it.
    """

    _segment: object
    position: int
    size: int

    def __len__(self) -> int:
        return self.size

    def read(self) -> bytes:
        return self._segment.read_bytes(self.position, self.size)

    def open_handle(self) -> int:
        return self._segment.duplicate_handle()


# Counts of records below the log start, by the files holding them: the bytes below the log start never
# change (appends go after it, cleaning writes a new file), and counting them reads up to a segment.
BELOW_START_ENTRIES = 4096
_BELOW_START: OrderedDict[tuple, int] = OrderedDict()
_BELOW_START_LOCK = threading.Lock()


def _below_start_key(segments, start: int) -> tuple | None:
    """The files below ``start`` by path and inode, closed ones by size and mtime too; None if one went."""
    key: list = [start]
    try:
        for i, seg in enumerate(segments):
            if seg.base_offset >= start:
                break
            st = os.stat(seg.log_path)
            active = i == len(segments) - 1
            key.append((str(seg.log_path), st.st_ino) + (() if active else (st.st_size, st.st_mtime_ns)))
    except OSError:
        return None
    return tuple(key)


class Partition:
    """A partition of a topic held open by this process (see the module docstring)."""

    __slots__ = ("topic", "index", "_log")

    def __init__(self, topic: str, index: int, log: "Log") -> None:
        self.topic, self.index, self._log = topic, index, log

    def __repr__(self) -> str:
        return f"Partition({self.topic!r}, {self.index})"

    @property
    def name(self) -> str:
        """Kafka's name for it, ``topic-partition``, as errors and logs say it."""
        return self._log.name

    # offsets and watermarks ---------------------------------------------------------------------
    @property
    def log_start_offset(self) -> int:
        return self._log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log.log_end_offset

    @property
    def high_watermark(self) -> int:
        return self._log.high_watermark

    @property
    def last_stable_offset(self) -> int:
        """Below it every transaction is decided: the first offset of the oldest open transaction (not below
        the log start), else the high watermark. read_committed readers stop here."""
        return self._log.last_stable_offset

    def aborted_transactions(self, start: int, end: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of each aborted transaction overlapping [start, end), in order, from
        the ``.txnindex`` files: what Fetch v4+ answers for read_committed."""
        return self._log.aborted_transactions(start, end)

    def open_transactions(self) -> list[OpenTransaction]:
        """The transactions open in this partition, by first offset."""
        return self._log.open_transactions()

    def producers(self) -> list[ProducerInfo]:
        """The producers this partition's state knows (loading it if needed), by producer id: what
        DescribeProducers answers."""
        return self._log.producers()

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record at or after ``timestamp`` (Kafka's ListOffsets)."""
        return self._log.offset_for_timestamp(timestamp)

    def max_timestamp(self) -> tuple[int, int] | None:
        """(timestamp, offset) of the record with the largest timestamp from the log start on, the first of
        them when several share it (ListOffsets' max-timestamp spec, KIP-734); None when no record has one.

        Each segment knows the largest timestamp written to it and the batch that first reached it (what
        its time index ends with). Segments are tried by that bound, highest first, and the walk stops at
        the first that cannot beat what was found; in each, the batch it names is read first, and the whole
        segment only when that batch is gone or below the log start (cleaned away, deleted records)."""
        segs = list(self._log.segments)
        start, end = self.log_start_offset, self.log_end_offset
        spans = [(seg, seg.base_offset, segs[i + 1].base_offset if i + 1 < len(segs) else end)
                 for i, seg in enumerate(segs)]
        best: tuple[int, int] | None = None
        # by bound, highest first; on equal bounds the older segment first (it holds the earlier offsets)
        for seg, first, last in sorted(spans, key=lambda s: (-s[0].max_timestamp_so_far, s[1])):
            bound = seg.max_timestamp_so_far
            if last <= start or bound < 0:
                continue
            if best is not None and bound < best[0]:
                break
            found = self._first_at(bound, seg.offset_of_max_timestamp, start) if first <= seg.offset_of_max_timestamp < last \
                else None
            if found is None:
                found = self._largest_in(max(first, start), last)
            if found is not None and (best is None or found[0] > best[0] or found[0] == best[0] and found[1] < best[1]):
                best = found
        return best

    def _first_at(self, timestamp: int, offset: int, start: int) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record stamped ``timestamp`` in the batch holding ``offset``,
        when that batch is there, at or above ``start``, and reaches ``timestamp``."""
        if offset < start:
            return None
        for batch in read_batches(self._log, offset, offset + 1):
            if batch.max_timestamp == timestamp and batch.base_offset >= start:
                return next(((r.timestamp, r.offset) for r in batch.records() if r.timestamp == timestamp), None)
            return None
        return None

    def _largest_in(self, first: int, last: int) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record with the largest timestamp in [first, last): batch
        headers find the batch, and only that batch's records are decoded (and those of a batch that
        starts below ``first``, whose header speaks for records not asked about)."""
        top, top_ts = None, -1
        for batch in read_batches(self._log, first, last):
            ts = batch.max_timestamp if batch.base_offset >= first else \
                max((r.timestamp for r in batch.records() if r.offset >= first), default=-1)
            if ts > top_ts:
                top, top_ts = batch, ts
        if top is None:
            return None
        return next((r.timestamp, r.offset) for r in top.records() if r.offset >= first and r.timestamp == top_ts)

    # writing ------------------------------------------------------------------------------------
    def append(self, batch: bytes, *, prechecked: bool = False) -> "ValidatedAppend":
        """Validate and append stored-format batches (offsets assigned here), as a leader does for Produce.
        A transactional batch of an idempotent producer opens (or joins) its transaction here.
        ``prechecked`` is for staged appends only: the batch passed validation under this partition's
        current config in the task that staged it (``staged_appends``), so its records are not walked
        again; its CRC and header are."""
        return self._log.append(batch, prechecked=prechecked)

    def write_txn_marker(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int) -> int:
        """Append the COMMIT (``commit``) or ABORT marker ending the producer's transaction here (the
        coordinator's write); its offset. ``InvalidProducerEpochError`` for an epoch older than the
        producer's, ``TransactionCoordinatorFencedError`` for an older coordinator epoch."""
        return self._log.write_txn_marker(producer_id, producer_epoch, commit, coordinator_epoch)

    @property
    def producer_state_loaded(self) -> bool:
        """Whether the producers' state is in memory (else the first idempotent or transactional append,
        marker, ``last_stable_offset``, ``open_transactions`` or ``producers`` loads it: a snapshot and
        the log after it, or the log's last two segments, which is not cheap)."""
        return self._log.producer_state.loaded

    # reading ------------------------------------------------------------------------------------
    def locate(self, offset: int, max_bytes: int = 1 << 20, min_one_message: bool = True,
               max_offset: int | None = None) -> StoredRange | None:
        """The stored bytes of the whole, checked batches from the one holding ``offset``, at most
        ``max_bytes`` (but the first batch whole when ``min_one_message``, KIP-74); None when there are none
        yet. Damage ends the range before it; a range starting at damage raises ``CorruptRecordError``.

        ``max_offset`` (a batch boundary: the last stable offset for read_committed) ends the range at the
        last whole batch below it, as Kafka bounds a read by that offset's position in its segment: nothing
        at or above it goes out, not even under ``min_one_message``."""
        if max_offset is not None and offset >= max_offset and self.log_start_offset <= offset <= self.log_end_offset:
            return None  # (an offset out of range is refused below, as a read at any level)
        found = self._log.locate(offset, max_bytes, min_one_message=min_one_message)
        if found is None:
            return None
        seg, position, size = found
        if max_offset is not None and max_offset < self._log.log_end_offset:
            bound = seg.translate_offset(max_offset)  # the batch at the bound, when this segment holds one
            if bound is not None:
                size = min(size, max(bound[0] - position, 0))
                if size == 0:
                    return None
        return StoredRange(seg, position, size)

    def fetch_upper_bound(self, found: StoredRange) -> int:
        """An offset above every offset of ``found`` and close to its end (Kafka's fetch upper bound): the
        first offset index entry at or past the range's end, else the next segment's base offset, else the
        log end offset. Fetch asks for the aborted transactions below it, so the list stays as short as
        the range and is not the whole log's."""
        seg, end = found._segment, found.position + found.size
        entries = seg.offset_index.view()
        # the first entry at or past ``end`` (positions grow with offsets), by bisection over the big-endian
        # column as it is: numpy's search would convert the whole column on every fetch
        positions, lo, hi = entries["position"], 0, len(entries)
        while lo < hi:
            mid = (lo + hi) // 2
            if int(positions[mid]) < end:
                lo = mid + 1
            else:
                hi = mid
        if lo < len(entries):
            return seg.base_offset + int(entries[lo]["offset"])
        segs = self._log.segments
        if segs[-1] is not seg:  # (a tailing reader's range ends in the active segment: no walk)
            for i, s in enumerate(segs[:-1]):
                if s is seg:
                    return segs[i + 1].base_offset
        return self._log.log_end_offset

    def batches(self, start: int | None = None, end: int | None = None, *, isolation: str = READ_UNCOMMITTED,
                view: str = LIVE, check_crcs: bool = True) -> Iterator[RecordBatch]:
        """Checked batches holding offsets in [start, end) (default: the whole log) through the one read path."""
        first = self.log_start_offset if start is None else start
        last = self.log_end_offset if end is None else end
        return read_batches(self._log, first, last, isolation=isolation, view=view, check_crcs=check_crcs)

    def records(self, start: int | None = None, end: int | None = None, *, isolation: str = READ_UNCOMMITTED,
                view: str = LIVE, check_crcs: bool = True) -> Iterator[Record]:
        """Records of [start, end) as a consumer sees them, through the one read path."""
        first = self.log_start_offset if start is None else start
        last = self.log_end_offset if end is None else end
        return read_records(self._log, self.topic, self.index, first, last, isolation=isolation, view=view,
                            check_crcs=check_crcs)

    def records_below_start(self) -> int:
        """Records still stored below the log start offset, which no reader sees (``reading.records_below``):
        what a count of the stored records subtracts to agree with consumers."""
        lg = self._log
        segs = lg.segments
        start, first = lg.log_start_offset, segs[0].base_offset
        if start <= first:
            return 0
        key = _below_start_key(segs, start)
        with _BELOW_START_LOCK:
            known = _BELOW_START.get(key) if key is not None else None
            if known is not None:
                _BELOW_START.move_to_end(key)
        if known is not None:
            return known
        n = records_below(lg.batches(first, start, check_crcs=False), self.topic, self.index, start)
        if key is not None:
            with _BELOW_START_LOCK:
                _BELOW_START[key] = n
                while len(_BELOW_START) > BELOW_START_ENTRIES:
                    _BELOW_START.popitem(last=False)
        return n

    # description --------------------------------------------------------------------------------
    @property
    def dir(self) -> Path:
        """The partition's folder (the compacted view and snapshots in other processes find it there)."""
        return self._log.dir

    @property
    def config(self) -> "LogConfig":
        return self._log.config

    @property
    def size_bytes(self) -> int:
        return self._log.size

    @property
    def active_segment_room(self) -> int:
        """Bytes the active segment takes before ``segment.bytes`` rolls it: a larger append rolls the
        log first, which fsyncs the segment it closes (not a thing for an event loop to wait on)."""
        return self._log.config.segment_bytes - self._log.active_segment.size

    def segment_sizes(self) -> list[tuple[int, int]]:
        """(base offset, bytes) of each segment, oldest first: what a picture of the log needs."""
        return [(s.base_offset, s.size) for s in self._log.segments]

    def segment_summaries(self) -> "list[SegmentSummary]":
        """What each segment holds (records, batches, codecs, time range), oldest first, read from batch
        headers: closed segments once, the active one on from the last look (:mod:`compactlog.segment_summaries`)."""
        from .segment_summaries import summaries

        lg = self._log
        return summaries(lg.segments, lg.log_end_offset)

    def describe(self) -> "PartitionInfo":
        from .storage.topics import PartitionInfo

        return PartitionInfo.of(self.index, self._log)

