"""Kafka's transaction index: the ``.txnindex`` file beside a segment, listing its aborted transactions.

Who uses it: each segment holds one (``LogSegment.txn_index``, opened when first used). The log appends
an entry when it writes an ABORT marker that completes a transaction, and recovery rebuilds the entries
of the segments it recovers from their markers; read_committed readers (the Fetch path and
``reading.py``) ask which aborted transactions overlap the range they return; the cleaner carries
entries into cleaned segments. Readers in other processes open it read-only (``read_only``): they
never create the file, and see the entries the owner appends after they opened it.

On disk (Kafka's ``TransactionIndex`` and ``AbortedTxn``), byte for byte: a segment with base offset B
has ``<B, 20 digits>.txnindex``, created only when its first entry is written. It is a plain sequence
of 34-byte big-endian entries, one per transaction whose ABORT marker is in that segment, in marker
order (so last offsets go up)::

    version             int16   0
    producer id         int64
    first offset        int64   the transaction's first batch
    last offset         int64   its ABORT marker
    last stable offset  int64   the partition's LSO once the abort completed

A read_committed fetch of [start, upper bound) needs every aborted transaction that overlaps the range:
last offset >= start and first offset < upper bound. Walking the segments' indexes from the one holding
``start``, the search can stop at the first entry whose last stable offset reaches the upper bound:
every transaction that ends later began at or after that LSO, so past the range
(:meth:`TransactionIndex.collect_aborted_txns` says whether it stopped there: ``complete``).

Where we differ from Kafka, stricter: an entry whose version is not 0 is refused wherever it is read
(Kafka reads only the version's first byte and refuses only a version above 0); the rule that last
offsets go up holds across a reopen (Kafka forgets the last offset when the file is reopened); the
sanity check also reports a torn tail (a size that is not a multiple of 34), which reads skip as
Kafka's do, and the next append writes over it (Kafka appends after it, out of step with the entries).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, NamedTuple

from . import files
from .index import CorruptIndexError

ENTRY = struct.Struct(">hqqqq")  # version, producer id, first offset, last offset, last stable offset
ENTRY_SIZE = ENTRY.size  # 34
CURRENT_VERSION = 0  # Kafka's AbortedTxn.CURRENT_VERSION
_READ_ENTRIES = 2048  # entries read per pread: a long index is walked in bounded memory


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One entry: an aborted transaction of ``producer_id`` spanning [first_offset, last_offset] (the
    last offset is its ABORT marker's), and the partition's last stable offset once it completed."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def to_bytes(self) -> bytes:
        """The entry's 34 bytes, as Kafka writes them."""
        return ENTRY.pack(CURRENT_VERSION, self.producer_id, self.first_offset, self.last_offset,
                          self.last_stable_offset)


class TxnIndexSearchResult(NamedTuple):
    """What one segment's index gave a fetch range: the overlapping aborted transactions, and whether
    the search may stop here (``complete``) or must go on into the next segment's index."""

    aborted: list[AbortedTxn]
    complete: bool


def transaction_index_file(directory: Path, base_offset: int) -> Path:
    """The transaction index of the segment at ``base_offset``: ``<base offset, 20 digits>.txnindex``."""
    return files.segment_file(directory, base_offset, files.TXN_INDEX_SUFFIX)


class TransactionIndex:
    """The ``.txnindex`` of one segment (``start_offset`` is the segment's base offset).

    The file is created by the first :meth:`append`, not before (as Kafka's). Each entry is written at
    once with one ``pwrite``; :meth:`flush` makes it durable. Writes are not thread-safe: the log's lock
    guards them, as it guards the segment's other files. A descriptor is kept only once the index is
    written to (or :meth:`hold` is asked for one): a read opens the file for its walk and closes it, so
    that a log with many segments holding entries keeps no descriptor per segment (Kafka keeps one).
    """

    def __init__(self, path: Path, start_offset: int, read_only: bool = False) -> None:
        self.path = Path(path)
        self.start_offset = start_offset
        self.read_only = read_only
        self._fd = -1
        self._size = 0  # bytes in the file: whole entries, plus a torn tail if the file has one
        self._last_offset: int | None = None  # of the last entry appended or found on disk
        self._last_known = False  # until the file's last entry (or its absence) has been seen
        self._created = False  # this object created the file: the next flush also syncs the directory

    # the file ----------------------------------------------------------------------------------
    def _open(self, create: bool) -> int:
        if self._fd < 0:
            if self.read_only:
                self._fd = os.open(self.path, os.O_RDONLY)
                self._size = os.fstat(self._fd).st_size
                return self._fd
            existed = not create or self.path.exists()
            self._fd = os.open(self.path, os.O_RDWR | (os.O_CREAT if create else 0), 0o644)
            self._size = os.fstat(self._fd).st_size
            self._created = self._created or not existed
        return self._fd

    def hold(self) -> None:
        """Keep a descriptor of the file (if there is one) from now on: readers holding a segment that
        is renamed away and unlinked read on through it. It closes with :meth:`close` or the object."""
        try:
            self._open(create=False)
        except FileNotFoundError:
            pass

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> TransactionIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self, _close=os.close) -> None:  # bound now: at interpreter exit ``os`` may be gone
        if getattr(self, "_fd", -1) >= 0:
            try:
                _close(self._fd)
            except OSError:
                pass

    def flush(self) -> None:
        """fsync the file (and, the first time after creating it, its directory, so the name lasts)."""
        if self._fd < 0:
            return
        os.fsync(self._fd)
        if self._created:
            files.fsync_dir(self.path.parent)
            self._created = False

    def delete_if_exists(self) -> bool:
        """Close and remove the file; False if there was none."""
        self.close()
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        return True

    def rename_to(self, path: Path) -> None:
        """Move the file (if it exists yet) to ``path``; this index then names ``path`` in any case."""
        try:
            if self.path.exists():
                os.replace(self.path, path)
        finally:
            self.path = Path(path)

    # writing -----------------------------------------------------------------------------------
    def append(self, txn: AbortedTxn) -> None:
        """Add an aborted transaction. Its last offset (its ABORT marker's) must be above the last
        entry's: markers are appended in offset order, so a smaller one means a caller's mistake."""
        self._writable()
        fd = self._open(create=True)
        if not self._last_known:
            last = self._size - self._size % ENTRY_SIZE - ENTRY_SIZE
            self._last_offset = self._entry_at(last).last_offset if last >= 0 else None
            self._last_known = True
        if self._last_offset is not None and self._last_offset >= txn.last_offset:
            raise ValueError(
                f"The last offset of appended transactions must increase sequentially, but {txn.last_offset} "
                f"is not greater than current last offset {self._last_offset} of index {self.path.absolute()}"
            )
        data = txn.to_bytes()
        end = self._size - self._size % ENTRY_SIZE  # a torn tail left by a crash is written over
        files.write_fully(fd, [data], end)
        if end + ENTRY_SIZE < self._size:
            os.ftruncate(fd, end + ENTRY_SIZE)
        self._size = end + ENTRY_SIZE
        self._last_offset = txn.last_offset

    def _writable(self) -> None:
        if self.read_only:
            raise ValueError(f"transaction index {self.path} is open read-only")

    def reset(self) -> None:
        """Remove every entry (the file stays, empty)."""
        self._writable()
        if self._fd >= 0 or self.path.exists():
            os.ftruncate(self._open(create=False), 0)
        self._size = 0
        self._last_offset = None
        self._last_known = True

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose ABORT marker is at ``offset`` or later (the log is cut at ``offset``)."""
        self._writable()
        if self._fd < 0 and not self.path.exists():
            return
        self._open(create=False)
        kept_last: int | None = None
        for position, txn in self._entries():
            if txn.last_offset >= offset:
                os.ftruncate(self._fd, position)
                self._size = position
                self._last_offset = kept_last
                self._last_known = True
                return
            kept_last = txn.last_offset

    # reading -----------------------------------------------------------------------------------
    def _entry_at(self, position: int) -> AbortedTxn:
        return self._decode(os.pread(self._fd, ENTRY_SIZE, position), position)

    def _decode(self, raw: bytes | memoryview, position: int) -> AbortedTxn:
        version, pid, first, last, lso = ENTRY.unpack(raw)
        if version != CURRENT_VERSION:
            raise CorruptIndexError(
                f"Unexpected aborted transaction version {version} in transaction index {self.path} at "
                f"position {position}, current version is {CURRENT_VERSION}"
            )
        return AbortedTxn(pid, first, last, lso)

    def _entries(self) -> Iterator[tuple[int, AbortedTxn]]:
        """(position, entry) of each whole entry, read a bounded chunk at a time; a torn tail is skipped.
        Without a descriptor kept, the file is opened for the walk (it may have been created or grown by
        its owner since) and closed after it."""
        fd, own = self._fd, False
        if fd < 0:
            try:
                fd, own = os.open(self.path, os.O_RDONLY), True
            except FileNotFoundError:
                return
        try:
            size = self._size if self._fd >= 0 and not self.read_only else os.fstat(fd).st_size
            yield from self._walk(fd, size)
        finally:
            if own:
                os.close(fd)

    def _walk(self, fd: int, size: int) -> Iterator[tuple[int, AbortedTxn]]:
        whole = size - size % ENTRY_SIZE
        position = 0
        while position < whole:
            raw = os.pread(fd, min(whole - position, _READ_ENTRIES * ENTRY_SIZE), position)
            if not raw:  # the file shrank under us: what is gone is not there to read
                return
            view = memoryview(raw)
            for i in range(0, len(raw) - len(raw) % ENTRY_SIZE, ENTRY_SIZE):
                yield position + i, self._decode(view[i:i + ENTRY_SIZE], position + i)
            position += len(raw) - len(raw) % ENTRY_SIZE

    def all_aborted_txns(self) -> list[AbortedTxn]:
        return [txn for _, txn in self._entries()]

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """The aborted transactions overlapping [fetch_offset, upper_bound_offset), in index order, as
        Kafka's ``collectAbortedTxns``: the search stops (complete) after the first entry whose last
        stable offset is at or past the upper bound."""
        found: list[AbortedTxn] = []
        for _, txn in self._entries():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(found, True)
        return TxnIndexSearchResult(found, False)

    def sanity_check(self) -> None:
        """Raise CorruptIndexError, naming the file and the position, for a torn tail (a size that is
        not a multiple of 34), an entry of another version, an entry ending below the segment's base
        offset (Kafka's check), or one no marker can have written: its first offset above its last, its
        last stable offset above its last + 1, or its last offset not above the previous entry's. The
        caller rebuilds the index from the log."""
        if self._fd >= 0:
            self._size = os.fstat(self._fd).st_size
        else:
            try:
                self._size = self.path.stat().st_size
            except FileNotFoundError:
                self._size = 0
        torn = self._size % ENTRY_SIZE
        if torn:
            raise CorruptIndexError(
                f"transaction index {self.path} has size {self._size}, not a multiple of the entry size "
                f"{ENTRY_SIZE}: {torn} bytes of a torn entry at position {self._size - torn}"
            )
        previous: int | None = None
        for position, txn in self._entries():
            if txn.last_offset < self.start_offset:
                raise CorruptIndexError(
                    f"Last offset of aborted transaction {txn} in index {self.path} at position {position} "
                    f"is less than start offset {self.start_offset}"
                )
            # beyond Kafka's check: what no marker can have written (a flipped offset), which a
            # read_committed reader would otherwise follow, handing out aborted records or dropping others
            problem = None
            if txn.first_offset > txn.last_offset:
                problem = "its first offset is above its last"
            elif txn.last_stable_offset > txn.last_offset + 1:
                problem = "its last stable offset is above its last offset + 1"
            elif previous is not None and txn.last_offset <= previous:
                problem = f"its last offset does not follow the previous entry's {previous}"
            if problem is not None:
                raise CorruptIndexError(f"Aborted transaction {txn} in index {self.path} at position {position}: {problem}")
            previous = txn.last_offset
