"""Read-only views of a partition for other processes (Spark executors, followers, dump tools).

A data directory is opened for writing by one process at a time (it holds ``.lock``). Readers in other
processes use this instead: it lists the live segment files and never creates, recovers or renames
anything. A segment is opened when a read first reaches it and stays open for the snapshot's life, so a
segment the cleaner swaps out while we read it stays readable through its descriptor. A segment that was
swapped away before we opened it makes the reader list the directory again and go on from the offset
it had reached (see ``reader.py``): opening every segment up front instead takes longer, with many
segments, than a busy cleaner leaves between two swaps.

Transactions, for read_committed readers: the last stable offset and the open transactions come from
the owner's producer state loaded read-only, once per snapshot (its newest ``.snapshot`` file at or
below the end seen, and the batches after it, as the owner loads it: ``producer_recovery.load_state``);
the aborted transactions from the segments' ``.txnindex`` files, opened read-only. A reader wanting a
newer LSO opens a new snapshot, as it does for a newer end. The state a snapshot loaded is remembered
per directory (a few hundred directories), with the header of the batch it ended at: a later snapshot
of the same directory whose log still holds that batch replays only what was appended since, so a
follower reopening at each end does not replay the active segment since its last roll every time.
"""

from __future__ import annotations

import bisect
import functools
import os
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Iterator

from ..errors import CompactLogError, UnknownTopicOrPartitionError
from ..records.batch import RecordBatch
from ..records.runs import BatchRun
from . import files
from .checkpoint import OffsetCheckpointFile
from .integrity import Bounds
from .producer_state import OpenTransaction, ProducerStateManager
from .reader import Listing, read_batches, read_runs
from .segment import LogSegment
from .transaction_index import AbortedTxn
from .transactions import collect_aborted

KNOWN_STATES = 256  # directories whose last loaded producer state is remembered (``_producers``)
# by directory: (the state as snapshot entries, the end it was loaded at, the mark of the batch ending there)
_KNOWN: OrderedDict[Path, tuple[list, int, tuple[int, int, int, int]]] = OrderedDict()
_KNOWN_LOCK = threading.Lock()
SWAP_WAIT_S = 1.0  # how long a listing waits for a swap in flight to finish before reading around it
MAX_OPEN_SEGMENTS = 32  # a read moving forward closes the segments it has left behind beyond these


def list_segments(d: Path) -> list[tuple[int, str]]:
    """(base offset, temp suffix) of the live ``.log`` files of ``d``, in offset order. While the owner
    swaps cleaned segments in, a listing can miss the range being replaced (its old files already
    ``.deleted``, the new ones still ``.swap``): list again until no ``.swap`` is left. One that stays (an
    owner that died mid-swap, to be finished by its next open) is read the way that open will finish
    it: it replaces the live segments in its range."""
    deadline = time.monotonic() + SWAP_WAIT_S
    delay = 0.0005
    while True:
        names = [n for n in os.listdir(d) if files.is_segment_file(n)]
        swaps = sorted(files.base_offset_of(n) for n in names if n.endswith(files.LOG_SUFFIX + files.SWAP_SUFFIX))
        live = sorted(files.base_offset_of(n) for n in names if n.endswith(files.LOG_SUFFIX))
        if not swaps:
            return [(b, "") for b in live]
        if time.monotonic() > deadline:
            break
        time.sleep(delay)
        delay = min(delay * 2, 0.05)
    replaced = set()
    for base in swaps:
        seg = LogSegment(d, base, temp_suffix=files.SWAP_SUFFIX, read_only=True)
        try:
            lo, hi = seg.base_offset, seg.read_next_offset()
        finally:
            seg.close_handlers()
        replaced |= {b for b in live if lo <= b < hi}
    return sorted([(b, "") for b in live if b not in replaced] + [(b, files.SWAP_SUFFIX) for b in swaps])


def _mark(listing: Listing, end: int) -> tuple[int, int, int, int] | None:
    """(segment base, position, base offset, CRC) of the batch ending at ``end`` (a log end), which a
    later listing must still hold for a state loaded at ``end`` to be carried on; None if there is none."""
    bases, segment_at = listing
    k = bisect.bisect_right(bases, end - 1) - 1
    if end <= 0 or k < 0:
        return None
    try:
        found = segment_at(k).translate_offset(end - 1)
    except CompactLogError:
        return None
    if found is None or found[1].last_offset != end - 1:
        return None
    return bases[k], found[0], found[1].base_offset, found[1].crc


class PartitionSnapshot:
    """The segments of one partition directory, as listed when it was opened, opened as reads reach them
    (at most ``MAX_OPEN_SEGMENTS`` at a time), or all at once with ``eager``, for a directory replaced
    whole, such as a compacted side log."""

    def __init__(self, directory: Path, listing: list[tuple[int, str]], eager: bool = False) -> None:
        self.directory = Path(directory)
        self._listing_ = listing
        self._open: dict[tuple[int, str], LogSegment] = {}
        self._eager = eager
        if eager:
            try:
                for i in range(len(listing)):
                    self.segment(i)
            except BaseException:
                self.close()
                raise

    @classmethod
    def open(cls, data_dir: str | os.PathLike[str], topic: str, partition: int) -> "PartitionSnapshot":
        files.validate_topic_name(topic)
        d = Path(data_dir) / files.partition_dir_name(topic, partition)
        if not d.is_dir():
            from .topics import read_topics

            meta = read_topics(data_dir).get(topic) if Path(data_dir).is_dir() else None
            if meta is not None and 0 <= partition < meta["partitions"]:
                return cls(d, [])  # a partition of a Kafka broker's directory held by another broker: empty
            raise UnknownTopicOrPartitionError(f"Partition {topic}-{partition} does not exist in {data_dir}.")
        return cls.of_directory(d)

    @classmethod
    def of_directory(cls, d: Path, eager: bool = False) -> "PartitionSnapshot":
        """The segments of any directory of segment files (a partition, or a compacted side log)."""
        return cls(d, list_segments(d), eager)

    # segments -----------------------------------------------------------------------------------
    @property
    def bases(self) -> list[int]:
        return [b for b, _ in self._listing_]

    def segment(self, i: int) -> LogSegment:
        """Segment ``i`` of the listing, opened read-only on first use (FileNotFoundError when the owner
        has swapped it away since the listing)."""
        key = self._listing_[i]
        seg = self._open.get(key)
        if seg is None:
            seg = self._open[key] = LogSegment(self.directory, key[0], temp_suffix=key[1], read_only=True)
            self._bound(i, seg)
            if len(self._open) > MAX_OPEN_SEGMENTS and not self._eager:
                for old in sorted(self._open)[: len(self._open) - MAX_OPEN_SEGMENTS]:
                    if old < key:
                        self._open.pop(old).close_handlers()
        return seg

    def sizes(self) -> list[tuple[int, int]]:
        """(base offset, bytes) of each listed segment, from the file system; a segment swapped away
        since the listing is left out (sizes only guide how a read is split)."""
        out = []
        for base, suffix in self._listing_:
            try:
                out.append((base, files.segment_file(self.directory, base, files.LOG_SUFFIX, suffix).stat().st_size))
            except FileNotFoundError:
                continue
        return out

    def segment_at(self, base_offset: int) -> LogSegment | None:
        """The listed segment starting at ``base_offset``, opened (jobs that rewrite segments by base
        offset), or None when the listing has none there."""
        i = bisect.bisect_left(self._listing_, (base_offset, ""))
        if i < len(self._listing_) and self._listing_[i][0] == base_offset:
            return self.segment(i)
        return None

    @property
    def gaps_below(self) -> int | None:
        """Below which offset batches may be missing (cleaned away), as far as a reader outside the
        owner can tell: anywhere in a side log; below the last listed segment of a topic that may be
        compacted (cleaning never touches the active segment, and the owner swaps before its checkpoint
        says so); in a topic whose override says ``delete``, below the cleaner's checkpoint (a topic
        compacted once), else nowhere. Readers also hold each batch against its neighbours and the next
        segment's base, so a flipped base offset is caught where gaps are allowed too."""
        if files.parse_partition_dir(self.directory.name) is None:
            return None
        if self._cleaned_below is None:
            return self.bases[-1] if self._listing_ else 0
        return self._cleaned_below

    @functools.cached_property
    def _cleaned_below(self) -> int | None:
        """None for a side log or a topic that may be compacted; else the cleaner's checkpoint (0 if none)."""
        parsed = files.parse_partition_dir(self.directory.name)
        if parsed is None:
            return None
        from .topics import read_topics

        try:  # the broker's default policy is not written in the directory: only an override says "delete"
            meta = read_topics(self.directory.parent).get(parsed[0]) or {}
            if "compact" in str((meta.get("config") or {}).get("cleanup.policy", "compact")):
                return None
        except (OSError, ValueError, CompactLogError):
            return None  # unknown: lenient rather than call cleaned gaps damage
        try:
            return OffsetCheckpointFile(self.directory.parent / files.CLEANER_OFFSET_CHECKPOINT).read().get(parsed) or 0
        except (OSError, CompactLogError):
            return 0

    def _listing(self) -> Listing:
        return self.bases, self.segment

    def _bound(self, i: int, seg: LogSegment) -> None:
        """What the listing says of segment ``i``'s offsets: below the next one's base, unless it is the
        last (which the owner may be appending to right now)."""
        last = i == len(self._listing_) - 1
        seg.bounds = Bounds(None if last else self._listing_[i + 1][0], self.gaps_below, last)

    def _relist(self) -> Listing:
        """List the directory again. A segment opened before whose file is gone or was replaced (the
        cleaner swaps a merged segment in under the first one's name) is dropped, so that it is opened
        afresh: read on, its old records would stop where the old file ended, and the walk would take
        the offsets after them, cleaned into the new file, for a gap cleaning left. It is dropped, not
        closed: a walk still holding it reads its old file on, whose descriptor goes with the last
        reference (a closed segment would open the new file by name under the old one's facts)."""
        self._listing_ = list_segments(self.directory)
        where = {key: i for i, key in enumerate(self._listing_)}
        for key, seg in list(self._open.items()):
            if key not in where or seg.replaced():
                del self._open[key]
            else:
                self._bound(where[key], seg)
        return self._listing()

    # offsets and batches -------------------------------------------------------------------------
    @property
    def log_end_offset(self) -> int:
        for _ in range(100):
            if not self._listing_:
                return 0
            try:
                return self.segment(len(self._listing_) - 1).read_next_offset()
            except FileNotFoundError:  # rolled or swapped since the listing
                self._relist()
        raise FileNotFoundError(f"the segments of {self.directory} keep changing")

    @property
    def dir(self) -> Path:
        return self.directory

    @property
    def log_start_offset(self) -> int:
        """The first segment's base offset, or the owner's checkpointed log start offset when it is
        beyond that (DeleteRecords or retention moved it inside a segment), as the owner's Log has it."""
        first = self._listing_[0][0] if self._listing_ else 0
        parsed = files.parse_partition_dir(self.directory.name)
        if parsed is None:  # a side log, not a partition
            return first
        try:
            checkpointed = OffsetCheckpointFile(self.directory.parent / files.LOG_START_OFFSET_CHECKPOINT).read().get(parsed)
        except (OSError, CompactLogError):
            return first
        if checkpointed is None or checkpointed <= first or checkpointed > self.log_end_offset:
            return first
        return checkpointed

    def batches(self, start: int = 0, end: int | None = None, *, check_crcs: bool = True) -> Iterator[RecordBatch]:
        """Whole batches holding offsets in [start, end), in order, each checked (see ``reader.py``)."""
        return read_batches(self._listing(), start, end, check_crcs=check_crcs, relist=self._relist)

    def runs(self, start: int = 0, end: int | None = None, *, check_crcs: bool = True) -> Iterator[BatchRun]:
        """The batches of :meth:`batches` as runs lying in one read buffer each (``reader.read_runs``)."""
        return read_runs(self._listing(), start, end, check_crcs=check_crcs, relist=self._relist)

    # transactions --------------------------------------------------------------------------------
    def _retrying(self, read):
        """``read(listing)``, listed again when a segment was swapped away before it could be opened."""
        for attempt in range(100):
            try:
                return read(self._listing())
            except FileNotFoundError:
                if attempt == 99:
                    raise
                self._relist()
        raise AssertionError("unreachable")

    @functools.cached_property
    def _producers(self) -> tuple[ProducerStateManager, int]:
        """The owner's producer state at the end seen now, loaded read-only, and that end."""
        end = self.log_end_offset
        return self._retrying(lambda listing: self._load_producers(listing, end)), end

    def _load_producers(self, listing: Listing, end: int) -> ProducerStateManager:
        from .producer_recovery import load_state, replay
        from .producer_snapshot import entries_from_state, state_from_entries

        with _KNOWN_LOCK:
            known = _KNOWN.get(self.directory)
        if known is not None and known[1] <= end and _mark(listing, known[1]) == known[2]:
            state = state_from_entries(known[0])
            replay(state, listing, known[1], end)
            state.loaded = True
        else:
            state = load_state(self.directory, listing, end)
        mark = _mark(listing, end)
        if mark is not None:
            with _KNOWN_LOCK:
                _KNOWN[self.directory] = (entries_from_state(state), end, mark)
                _KNOWN.move_to_end(self.directory)
                while len(_KNOWN) > KNOWN_STATES:
                    _KNOWN.popitem(last=False)
        return state

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the oldest transaction open at the end this snapshot saw (not below the log
        start), else that end."""
        state, end = self._producers
        return state.last_stable_offset(end, self.log_start_offset)

    def open_transactions(self) -> list[OpenTransaction]:
        return self._producers[0].open_transactions()

    def aborted_txns(self, start: int, end: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [start, end), from the ``.txnindex`` files."""
        return self._retrying(lambda listing: collect_aborted(listing, start, end))

    def aborted_transactions(self, start: int, end: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions overlapping [start, end)."""
        return [(t.producer_id, t.first_offset) for t in self.aborted_txns(start, end)]

    def close(self) -> None:
        for s in self._open.values():
            s.close_handlers()
        self._open.clear()

    def __enter__(self) -> "PartitionSnapshot":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
