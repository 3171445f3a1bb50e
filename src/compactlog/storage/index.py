"""Sparse segment indexes: ``.index`` (offset -> file position) and ``.timeindex`` (timestamp -> offset).

On-disk contract (big-endian, no header, fixed-size entries):

* ``.index``: 8-byte entries, int32 offset relative to the segment base + int32 byte position in the
  ``.log``; offsets strictly increasing.
* ``.timeindex``: 12-byte entries, int64 timestamp + int32 relative offset; timestamps strictly
  increasing, offsets non-decreasing.

Kafka preallocates index files to ``segment.index.bytes`` and trims them when a segment becomes
inactive. We keep files exactly ``entries * entry_size`` long at all times instead: the bytes on disk of
an inactive segment are the same as Kafka's, the active segment needs no resize on open, and a torn
tail shows up as a length that is not a multiple of the entry size. ``max_entries`` still follows
``segment.index.bytes`` so segments roll when an index is full, as in Kafka. Indexes are derived data:
recovery rebuilds them from the log whenever they fail the sanity check.

Entries live in a numpy structured array (looked up with ``searchsorted``) mirrored by appends to the
file. An index without entries (a new or small segment's) has no array: numpy is imported with the first
entry loaded or appended, so opening an empty log does not load it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import CorruptRecordError
from . import files
from .handles import POOL

if TYPE_CHECKING:
    import numpy

# numpy, bound by _numpy() before the first array is made: methods that reach an index's entries use it
# as a plain global (a lookup costs what it did), since entries exist only once it is bound.
np: Any = None


def _numpy() -> Any:
    global np
    if np is None:
        import numpy

        np = numpy
    return np


class _EntryDtype:
    """An index's numpy entry dtype, made on first use (reading it, as ``OffsetIndex.dtype`` does,
    imports numpy; ``entry_size`` is the same number without it)."""

    def __init__(self, fields: list[tuple[str, str]]) -> None:
        self.fields = fields
        self.dtype = None

    def __get__(self, obj: object, owner: type | None = None) -> numpy.dtype:
        if self.dtype is None:
            self.dtype = _numpy().dtype(self.fields)
        return self.dtype


def __getattr__(name: str) -> Any:
    """``OFFSET_ENTRY`` and ``TIME_ENTRY``, the two entry dtypes, made on first use (PEP 562)."""
    if name == "OFFSET_ENTRY":
        return OffsetIndex.dtype
    if name == "TIME_ENTRY":
        return TimeIndex.dtype
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class CorruptIndexError(CorruptRecordError):
    """An index file fails its sanity check; the caller rebuilds it from the log."""


class AbstractIndex:
    """Shared storage, search and truncation for both index kinds; subclasses pick the entry dtype.

    Each new entry is written to the file at once (one ``pwrite``, no user-space buffer), so other
    processes reading the directory see it, and a failed write is seen by the append that caused it.
    """

    dtype: numpy.dtype  # an _EntryDtype: the structured dtype of one entry
    entry_size: int  # bytes per entry on disk: dtype.itemsize
    key: str  # the field searched by lookups
    # the descriptor pool's bookkeeping (handles.py)
    _borrows = 0
    _close_pending = False
    _pooled = True

    def __init__(self, path: Path, base_offset: int, max_index_size: int, read_only: bool = False) -> None:
        self.path = Path(path)
        self.base_offset = base_offset
        self.max_entries = max_index_size // self.entry_size
        self.read_only = read_only
        self._entries: numpy.ndarray | None = None  # made (and numpy imported) with the first entry
        self._n = 0
        self._handle = -1
        self._dirty = False  # entries written since the last fsync
        try:
            size = os.stat(self.path).st_size
        except FileNotFoundError:
            if not read_only:
                self.path.touch()  # Kafka creates both index files with the segment
            return
        if size:  # else nothing to load (the file may grow meanwhile: then it is read as it was at the stat)
            numpy_ = _numpy()
            raw = numpy_.fromfile(self.path, dtype=numpy_.uint8)
            if len(raw) % self.entry_size:
                raise CorruptIndexError(
                    f"index file {self.path.name} has size {len(raw)}, not a multiple of the entry size {self.entry_size}"
                )
            loaded = raw.view(self.dtype)
            self._reserve(len(loaded))
            self._entries[: len(loaded)] = loaded
            self._n = len(loaded)

    # storage ----------------------------------------------------------------------------------
    def _reserve(self, n: int) -> None:
        if self._entries is None:
            self._entries = _numpy().empty(max(n, 16), dtype=self.dtype)
        elif n > len(self._entries):
            grown = np.empty(max(n, 2 * len(self._entries)), dtype=self.dtype)
            grown[: self._n] = self._entries[: self._n]
            self._entries = grown

    def _open_handle(self) -> int:
        return os.open(self.path, os.O_WRONLY)

    def _append_entry(self, entry: tuple) -> None:
        self._reserve(self._n + 1)
        self._entries[self._n] = entry
        data = self._entries[self._n : self._n + 1].tobytes()
        fd = POOL.acquire(self)
        try:
            files.write_fully(fd, [data], self._n * self.entry_size)  # a short write raises the OS's reason
        finally:
            POOL.release(self)
        self._n += 1
        self._dirty = True

    @property
    def entries(self) -> int:
        return self._n

    @property
    def is_full(self) -> bool:
        return self._n >= self.max_entries

    @property
    def size_in_bytes(self) -> int:
        return self._n * self.entry_size

    def view(self) -> numpy.ndarray:
        if self._entries is None:
            return _numpy().empty(0, dtype=self.dtype)
        return self._entries[: self._n]

    def flush(self) -> None:
        if self._dirty:
            with POOL.use(self) as fd:
                os.fsync(fd)
            self._dirty = False

    def close(self) -> None:
        POOL.close(self)

    def reset(self) -> None:
        """Drop every entry (before a rebuild)."""
        self._truncate_entries(0)

    def _truncate_entries(self, n: int) -> None:
        self._keys_n = min(self._keys_n, n)
        os.truncate(self.path, n * self.entry_size)
        self._n = n
        self._dirty = True

    def release_memory(self) -> None:
        """Drop the in-memory entries of a segment on its way out; lookups then scan from the start."""
        self.close()
        self._entries = None
        self._n = 0

    def rename(self, path: Path) -> None:
        def move() -> None:
            if self.path.exists():
                os.replace(self.path, path)
            self.path = Path(path)

        POOL.rename(move)

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)

    def _slot_for(self, value: int) -> int:
        """Index of the last entry whose key is <= value, or -1."""
        if not self._n:
            return -1
        return int(np.searchsorted(self._search_keys(), self._key_value(value), side="right")) - 1

    # The entries are big-endian, as on disk, and numpy's search converts the column whole on every call
    # when its byte order or type differs from the value's (70-120 µs for a 200 k-entry index, on every
    # fetch). So the key column is kept in native order, each entry converted once, and the value searched
    # for is given the column's own type (clamped to its range: a search for the largest offset is usual).
    def _key_value(self, value: int) -> Any:
        kind = self._keys.dtype
        info = np.iinfo(kind)
        return kind.type(min(max(value, info.min), info.max))

    _keys: Any = None
    _keys_n = 0

    def _search_keys(self) -> numpy.ndarray:
        """The key column of the entries in native byte order (for ``searchsorted``)."""
        n = self._n
        if self._keys is None or len(self._keys) < n:
            grown = np.empty(max(n, 16, 2 * (0 if self._keys is None else len(self._keys))),
                             dtype=self._entries.dtype[self.key].newbyteorder("="))
            grown[: self._keys_n] = self._keys[: self._keys_n] if self._keys_n else grown[:0]
            self._keys = grown
        if self._keys_n < n:
            self._keys[self._keys_n : n] = self._entries[self.key][self._keys_n : n]
            self._keys_n = n
        return self._keys[:n]


class OffsetIndex(AbstractIndex):
    """Maps offsets to file positions for the batches that start an indexed chunk of the log."""

    dtype = _EntryDtype([("offset", ">i4"), ("position", ">i4")])
    entry_size = 8
    key = "offset"

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        if self._n and rel <= int(self._entries[self._n - 1]["offset"]):
            raise CorruptIndexError(
                f"offset {offset} is not larger than the last offset index entry in {self.path.name}"
            )
        self._append_entry((rel, position))

    def last_offset(self) -> int:
        return self.base_offset + (int(self._entries[self._n - 1]["offset"]) if self._n else 0)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the largest entry at or below ``offset``; (base, 0) when none."""
        slot = self._slot_for(offset - self.base_offset)
        if slot < 0:
            return self.base_offset, 0
        e = self._entries[slot]
        return self.base_offset + int(e["offset"]), int(e["position"])

    def lookup_with_previous(self, offset: int) -> tuple[int, tuple[int, int] | None]:
        """Where a checked walk towards ``offset`` starts: the position of the entry before the largest
        entry at or below ``offset`` (0 when there is none), and that largest entry as (offset,
        position), or None. Starting one entry early gives the batch the walk hands out a checked
        predecessor, and lets the walk hold the entry it skipped to against the log."""
        slot = self._slot_for(offset - self.base_offset)
        if slot < 0:
            return 0, None
        e = self._entries[slot]
        start = int(self._entries[slot - 1]["position"]) if slot > 0 else 0
        return start, (self.base_offset + int(e["offset"]), int(e["position"]))

    def truncate_to(self, offset: int) -> None:
        """Remove entries for offsets >= ``offset``."""
        if not self._n:
            self._truncate_entries(0)
            return
        keys = self._search_keys()
        self._truncate_entries(int(np.searchsorted(keys, self._key_value(offset - self.base_offset), side="left")))

    def sanity_check(self, log_size: int) -> None:
        """Kafka's check, made strict enough for hand-edited files: offsets and positions both rise,
        and every position lies inside the log."""
        if not self._n:
            return
        v = self.view()
        offs, pos = v["offset"].astype(np.int64), v["position"].astype(np.int64)
        if offs[0] < 0 or pos[0] < 0 or int(pos[-1]) >= max(log_size, 1) or np.any(np.diff(offs) <= 0) or np.any(np.diff(pos) <= 0):
            raise CorruptIndexError(f"corrupt offset index {self.path.name}")


class TimeIndex(AbstractIndex):
    """Maps the running maximum timestamp of a segment to the offset where it was reached."""

    dtype = _EntryDtype([("timestamp", ">i8"), ("offset", ">i4")])
    entry_size = 12
    key = "timestamp"

    @property
    def is_full(self) -> bool:
        # Kafka keeps the last slot for the final entry written when the segment becomes inactive.
        return self._n >= self.max_entries - 1

    def last_entry(self) -> tuple[int, int]:
        if not self._n:
            return -1, self.base_offset
        e = self._entries[self._n - 1]
        return int(e["timestamp"]), self.base_offset + int(e["offset"])

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append only if ``timestamp`` is strictly larger than the last entry's."""
        if not skip_full_check and self.is_full:
            return
        last_ts, last_off = self.last_entry()
        if timestamp > last_ts:
            if offset < last_off:
                raise CorruptIndexError(f"time index offsets must not go down in {self.path.name}")
            self._append_entry((timestamp, offset - self.base_offset))

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the largest entry at or below ``timestamp``; (-1, base) when none."""
        slot = self._slot_for(timestamp)
        if slot < 0:
            return -1, self.base_offset
        e = self._entries[slot]
        return int(e["timestamp"]), self.base_offset + int(e["offset"])

    def truncate_to(self, offset: int) -> None:
        """Remove entries pointing at offsets >= ``offset``."""
        if not self._n:
            self._truncate_entries(0)
            return
        offs = self._entries["offset"][: self._n]
        self._truncate_entries(int(np.searchsorted(offs, offset - self.base_offset, side="left")))

    def sanity_check(self) -> None:
        if not self._n:
            return
        v = self.view()
        if len(v) and (int(v["offset"][0]) < 0 or int(v["timestamp"][0]) < -1 or np.any(np.diff(v["timestamp"]) <= 0)
                       or np.any(np.diff(v["offset"].astype(np.int64)) < 0)):
            raise CorruptIndexError(f"corrupt time index {self.path.name}")
