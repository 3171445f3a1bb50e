"""Segment files read on their own, as Kafka's ``DumpLogSegments`` (``kafka-dump-log``) reads them.

The command line's ``dump-log`` (``cli/dumplog.py``) prints what this module hands out; the files are
read here, read-only and without any lock, so it works on a data directory another process owns or on
files copied from anywhere:

* :func:`check_segment_file` refuses, before a byte is read, what cannot be a segment file, and names
  the kind of the rest (``.log``, ``.index``, ``.timeindex`` or ``.txnindex``);
* :func:`open_log_file` gives a ``.log``'s batches with their positions (a file whose first batch cannot
  be one is no segment, whatever its name says) and what follows the last whole batch;
* :func:`offset_index_entries` and :func:`time_index_entries` give an index's entries, each checked
  against the ``.log`` beside it when there is one, what the checks find going into :class:`DumpFindings`
  in Kafka's words (an index entry whose offset is not the last offset of the batch at its position,
  Kafka's three time-index findings, and offsets that leave gaps);
* :func:`txn_index_entries` gives a ``.txnindex``'s aborted transactions, read by the storage's
  ``TransactionIndex``, and the bytes of a torn entry after the last whole one;
* :func:`index_sanity_check` makes Kafka's own check of an index (the one a broker makes at start to
  decide whether to rebuild it), with Kafka's words.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, NamedTuple

from .errors import CompactLogError, CorruptRecordError
from .storage import files

if TYPE_CHECKING:
    from .records.batch import RecordBatch
    from .storage.index import OffsetIndex
    from .storage.segment import LogSegment

# The record format, the segment and the indexes (numpy under them) are imported by the functions that
# read files, so that listing the commands (compactlog --help) does not load them.

NO_TIMESTAMP = -1
LOG, INDEX, TIME_INDEX, TXN_INDEX = "log", "index", "timeindex", "txnindex"


class RecordParseError(CompactLogError):
    """A record a ``dump-log`` decoder cannot read where Kafka's tool stops (a coordinator's record
    without a key)."""


class NotASegmentFileError(CompactLogError):
    """A path given as a segment file cannot be one (missing, a directory, a name or size no segment
    file has)."""


@dataclass
class DumpFindings:
    """What the checks found, printed on standard error after every file, in Kafka's order and words.
    Keys are the files' absolute paths; the pairs are (index or earlier, log or later) values."""

    index_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_out_of_order: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_not_found: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    non_consecutive: dict[str, list[tuple[int, int]]] = field(default_factory=dict)

    @staticmethod
    def add(found: dict[str, list[tuple[int, int]]], path: Path, pair: tuple[int, int]) -> None:
        found.setdefault(str(path.absolute()), []).append(pair)

    def lines(self) -> list[str]:
        out = []
        for name, pairs in self.index_mismatches.items():
            out.append(f"Mismatches in :{name}")
            out += [f"  Index offset: {i}, log offset: {lg}" for i, lg in reversed(pairs)]
        for name, pairs in self.time_mismatches.items():
            out.append(f"Found timestamp mismatch in :{name}")
            out += [f"  Index timestamp: {i}, log timestamp: {lg}" for i, lg in pairs]
        for name, pairs in self.time_out_of_order.items():
            out.append(f"Found out of order timestamp in :{name}")
            out += [f"  Index timestamp: {i}, Previously indexed timestamp: {p}" for i, p in pairs]
        for pairs in self.time_not_found.values():
            out.append("The following indexed offsets are not found in the log.")
            out += [f"Indexed offset: {i}, found log offset: {lg}" for i, lg in pairs]
        for name, pairs in self.non_consecutive.items():
            out.append(f"Non-consecutive offsets in {name}")
            out += [f"  {a} is followed by {b}" for a, b in reversed(pairs)]
        return out


def check_segment_file(path: Path, whole_entries: bool = True) -> str:
    """The kind of segment file ``path`` is (:data:`LOG`, :data:`INDEX`, :data:`TIME_INDEX` or
    :data:`TXN_INDEX`); ``NotASegmentFileError`` naming why for what cannot be one, before a byte of it
    is read. ``whole_entries=False`` leaves an index of a torn size to :func:`index_sanity_check`."""
    if not path.exists():
        raise NotASegmentFileError(f"{path} does not exist")
    if path.is_dir():
        raise NotASegmentFileError(f"{path} is a directory; --files takes .log, .index, .timeindex and .txnindex files")
    is_index = path.name.endswith((files.INDEX_SUFFIX, files.TIME_INDEX_SUFFIX))
    is_txn_index = path.name.endswith(files.TXN_INDEX_SUFFIX)
    if files.LOG_SUFFIX not in path.name and not is_index and not is_txn_index:
        raise NotASegmentFileError(f"{path.name} is not a .log, .index, .timeindex or .txnindex file")
    if not re.fullmatch(r"[0-9]+", path.name.split(".", 1)[0]):
        raise NotASegmentFileError(f"{path}: a segment file's name starts with its base offset "
                                   f"(as in 00000000000000000000{path.name[path.name.index('.'):]})")
    if is_index and whole_entries:
        from .storage.index import OffsetIndex, TimeIndex

        entry = (TimeIndex if path.name.endswith(files.TIME_INDEX_SUFFIX) else OffsetIndex).dtype.itemsize
        size = path.stat().st_size
        if size % entry:
            raise NotASegmentFileError(f"{path}: {size} bytes is not a whole number of {entry}-byte index entries "
                                       "(a torn index; the log rebuilds it when the partition is opened)")
    if is_txn_index:  # a torn tail is left to the reader, which skips it as Kafka's does
        return TXN_INDEX
    if files.LOG_SUFFIX in path.name:
        return LOG
    return TIME_INDEX if path.name.endswith(files.TIME_INDEX_SUFFIX) else INDEX


class LogFile:
    """One ``.log`` file, read-only (from :func:`open_log_file`)."""

    def __init__(self, segment: "LogSegment") -> None:
        self._seg = segment

    @property
    def base_offset(self) -> int:
        return self._seg.base_offset

    @property
    def size(self) -> int:
        return self._seg.size

    def batches(self) -> Iterator[tuple[int, "RecordBatch"]]:
        """(position, batch) of each whole batch; a first one that cannot be a batch means the file is
        not a segment (``CorruptRecordError``)."""
        from .records.batch import MAGIC

        seg = self._seg
        head = seg.read_bytes(0, 17)
        length = int.from_bytes(head[8:12], "big", signed=True) if len(head) == 17 else -1
        whole = 49 <= length and 12 + length <= seg.size  # a batch that could be one, but for its magic
        if whole and head[16] != MAGIC:  # before the walk, which would only call it damage
            raise _not_a_segment(f"magic byte {head[16]}, and Kafka's record batches have {MAGIC}")
        it = seg.batches(0)
        try:
            first = next(it, None)
        except CorruptRecordError as exc:
            raise _not_a_segment(str(exc).split(": ", 1)[-1]) from None  # (the file is named already)
        if first is None:
            return
        if first[1].magic != MAGIC:
            raise _not_a_segment(f"magic byte {first[1].magic}, and Kafka's record batches have {MAGIC}")
        yield first
        yield from it

    def invalid_bytes_after(self, end: int) -> int:
        """How many bytes follow the last whole batch, which ends at ``end``; a file with bytes but not one
        whole batch is no segment, whatever its name says (``CorruptRecordError``)."""
        if end < self.size and end == 0:
            raise CorruptRecordError(f"no whole record batch: {self._short_first_batch()} "
                                     "(not a log segment, or one torn inside its first batch)")
        return self.size - end

    def _short_first_batch(self) -> str:
        from .records.batch import HEADER_SIZE_UP_TO_MAGIC, LOG_OVERHEAD, batch_size_at

        seg = self._seg
        if seg.size < HEADER_SIZE_UP_TO_MAGIC:
            return f"the file's {seg.size} bytes are fewer than a batch header's {HEADER_SIZE_UP_TO_MAGIC}"
        claimed = batch_size_at(seg.read_bytes(0, LOG_OVERHEAD))
        return f"the first claims {claimed} bytes, the file has {seg.size}"


@contextmanager
def open_log_file(path: Path) -> Iterator[LogFile]:
    """One ``.log`` (or a ``.log.cleaned``, ``.log.deleted``... beside a log) opened read-only."""
    from .storage.segment import LogSegment, SegmentParams

    seg = LogSegment(path.parent, files.base_offset_of(path), SegmentParams(),
                     temp_suffix=path.name.split(files.LOG_SUFFIX, 1)[1], read_only=True)
    try:
        yield LogFile(seg)
    finally:
        seg.close_handlers()


def _not_a_segment(why: str) -> CorruptRecordError:
    return CorruptRecordError(f"not a Kafka log segment: no record batch at position 0 ({why})")


@contextmanager
def _log_beside(path: Path, base: int) -> Iterator["LogSegment | None"]:
    """The ``.log`` an index belongs to, read-only; None when there is none (the entries are then
    handed out unchecked, where Kafka's tool fails)."""
    from .storage.segment import LogSegment, SegmentParams

    if not files.segment_file(path.parent, base, files.LOG_SUFFIX).is_file():
        yield None
        return
    seg = LogSegment(path.parent, base, SegmentParams(), read_only=True)
    try:
        yield seg
    finally:
        seg.close_handlers()


def _last_offset_at(seg: "LogSegment", position: int, max_message_size: int | None = None) -> int:
    """The last offset of the batch whose header starts at ``position``; -1 when there is none. A batch
    larger than ``max_message_size`` cannot be read within it (``CompactLogError``: Kafka's tool stops
    there too)."""
    from .records.batch import HEADER_SIZE, MAGIC, RecordBatch

    header = seg.read_bytes(position, HEADER_SIZE) if 0 <= position < seg.size else b""
    if len(header) < HEADER_SIZE:
        return -1
    batch = RecordBatch(header)
    if batch.magic != MAGIC:
        return -1
    if max_message_size is not None and batch.size > max_message_size:
        raise CompactLogError(f"the batch at position {position} of {seg.log_path.name} is {batch.size} bytes, "
                              f"more than the largest message size {max_message_size} (raise --max-message-size)")
    return batch.last_offset


def offset_index_entries(path: Path, findings: DumpFindings,
                         max_message_size: int | None = None) -> Iterator[tuple[int, int]]:
    """(offset, position) of each entry of an ``.index`` (none: it is empty), each checked against the
    batch at its position in the ``.log`` beside it, read within ``max_message_size`` bytes."""
    from .storage.index import OffsetIndex

    base = files.base_offset_of(path)
    with _log_beside(path, base) as seg:
        entries = OffsetIndex(path, base, 1 << 62, read_only=True).view()
        for i, e in enumerate(entries):
            offset, position = base + int(e["offset"]), int(e["position"])
            if i > 0 and offset == base:  # the zeros of a preallocated index that was never trimmed
                return
            if seg is not None:
                found = _last_offset_at(seg, position, max_message_size)
                if found != offset:
                    findings.add(findings.index_mismatches, path, (offset, found))
            yield offset, position


def time_index_entries(path: Path, findings: DumpFindings) -> Iterator[tuple[int, int]]:
    """(timestamp, offset) of each entry of a ``.timeindex``, each checked against the batch holding its
    offset in the ``.log`` beside it."""
    from .storage.index import TimeIndex

    base = files.base_offset_of(path)
    with _log_beside(path, base) as seg:
        entries = TimeIndex(path, base, 1 << 62, read_only=True).view()
        offsets = _offset_index_beside(path, base)
        previous = NO_TIMESTAMP
        for i, e in enumerate(entries):
            timestamp, offset = int(e["timestamp"]), base + int(e["offset"])
            if i > 0 and offset == base:
                return
            if seg is not None:
                _check_time_entry(path, seg, offsets, timestamp, offset, previous, findings)
            yield timestamp, offset
            previous = timestamp


def _offset_index_beside(path: Path, base: int) -> "OffsetIndex | None":
    from .storage.index import OffsetIndex

    index = files.segment_file(path.parent, base, files.INDEX_SUFFIX)
    try:
        return OffsetIndex(index, base, 1 << 62, read_only=True) if index.is_file() else None
    except CompactLogError:  # a torn index only loses the shortcut
        return None


def _check_time_entry(path: Path, seg: "LogSegment", offsets: "OffsetIndex | None", timestamp: int, offset: int,
                      previous: int, findings: DumpFindings) -> None:
    """Kafka's checks of a time-index entry: the batch holding its offset ends there, its records'
    largest timestamp is the entry's, and entries' timestamps rise."""
    start = offsets.lookup(offset)[1] if offsets is not None else 0
    batch = next((b for _, b in seg.batches(start) if b.last_offset >= offset), None)
    if batch is None:
        findings.add(findings.time_not_found, path, (offset, -1))
        return
    if batch.last_offset != offset:
        findings.add(findings.time_not_found, path, (offset, batch.last_offset))
        return
    largest = max((r.timestamp for r in batch.records()), default=NO_TIMESTAMP)
    if largest != timestamp:
        findings.add(findings.time_mismatches, path, (timestamp, largest))
    if previous >= timestamp:
        findings.add(findings.time_out_of_order, path, (timestamp, previous))


class AbortedTxnEntry(NamedTuple):
    """One entry of a ``.txnindex``, with the fields Kafka's tool prints, in its order."""

    version: int
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def txn_index_entries(path: Path) -> tuple[list[AbortedTxnEntry], int]:
    """The aborted transactions a ``.txnindex`` lists, in file order, and how many bytes of a torn
    entry follow the last whole one (Kafka's reader skips them without a word). An entry of another
    version than 0 is refused (``CorruptRecordError`` naming the file and position)."""
    from .storage.transaction_index import CURRENT_VERSION, ENTRY_SIZE, TransactionIndex

    with TransactionIndex(path, files.base_offset_of(path), read_only=True) as index:
        txns = index.all_aborted_txns()
    entries = [AbortedTxnEntry(CURRENT_VERSION, t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset)
               for t in txns]
    return entries, path.stat().st_size % ENTRY_SIZE


def index_sanity_check(path: Path, kind: str) -> None:
    """Kafka's ``sanityCheck`` of an ``.index`` or ``.timeindex`` (``kind``), the check a broker makes at
    start to decide whether to rebuild it: the last entry's offset is not below the base offset, a time
    index's last timestamp not below its first, and the size a whole number of entries. A failure raises
    ``CorruptIndexFoundError`` with Kafka's message. Only the first and last entries are read."""
    entry = 8 if kind == INDEX else 12
    base = files.base_offset_of(path)
    size = path.stat().st_size
    entries = size // entry
    name = path.absolute()
    first = last = b""
    if entries:
        with path.open("rb") as f:
            first = f.read(entry)
            f.seek((entries - 1) * entry)
            last = f.read(entry)
    if kind == INDEX:
        if entries and base + int.from_bytes(last[:4], "big", signed=True) < base:
            last_offset = base + int.from_bytes(last[:4], "big", signed=True)
            raise CorruptIndexFoundError(f"Corrupt index found, index file {name} has non-zero size but the last "
                                         f"offset is {last_offset} which is less than the base offset {base}")
        if size % entry:
            raise CorruptIndexFoundError(f"Index file {name} is corrupt, found {size} bytes which is neither "
                                         f"positive nor a multiple of {entry}")
        return
    if entries:
        first_ts = int.from_bytes(first[:8], "big", signed=True)
        last_ts = int.from_bytes(last[:8], "big", signed=True)
        last_offset = base + int.from_bytes(last[8:12], "big", signed=True)
        if last_ts < first_ts:
            raise CorruptIndexFoundError(f"Corrupt time index found, time index file ({name}) has non-zero size but "
                                         f"the last timestamp is {last_ts} which is less than the first timestamp "
                                         f"{first_ts}")
        if last_offset < base:
            raise CorruptIndexFoundError(f"Corrupt time index found, time index file ({name}) has non-zero size but "
                                         f"the last offset is {last_offset} which is less than the first offset {base}")
    if size % entry:
        raise CorruptIndexFoundError(f"Time index file {name} is corrupt, found {size} bytes which is neither "
                                     f"positive nor a multiple of {entry}")


class CorruptIndexFoundError(CompactLogError):
    """An index fails Kafka's sanity check (the message is Kafka's)."""
