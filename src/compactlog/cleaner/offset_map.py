"""OffsetMap: key -> latest offset in a fixed memory budget (Kafka's SkimpyOffsetMap).

One flat table of 24-byte slots (16-byte key hash, int64 offset), allocated once with the thread's share
of ``log.cleaner.dedupe.buffer.size``. It holds at most ``floor(slots * load factor)`` keys; when that
many are in, it is *full*, and the cleaner cleans up to the last offset it mapped and leaves the rest
for the next round. Memory therefore never grows with the log. Bulk put/get run in the compiled kernel.

The keys live in the first ``active`` slots of the table, which start at ``INITIAL_SLOTS`` and double
(re-placed in place by ``offset_map_grow``) whenever a quarter of them is used, up to all of them; the
allocation is lazily zeroed, so a round over few keys touches a few MiB, not the whole buffer, and its
probes stay in cache. Where a key sits changes nothing a caller sees: fullness, ``utilization`` and
every lookup answer are those of the whole table.
"""

from __future__ import annotations

import numpy as np

from ..records import kernels
from ..records.layout import SLOT

INITIAL_SLOTS = 1 << 16  # slots in use at first (1.5 MiB)
GROW_AT = 0.25  # the share of the active slots filled before they double (few second probes)


class OffsetMap:
    """``versioned`` maps (compaction.strategy timestamp or header) keep an int64 version per slot too,
    so they hold a third fewer keys in the same memory."""

    def __init__(self, memory: int, load_factor: float = 0.9, versioned: bool = False) -> None:
        self.memory = memory
        self.load_factor = load_factor
        self.versioned = versioned
        self.slots = memory // (SLOT + 8 if versioned else SLOT)
        desired = self.slots * load_factor
        if desired <= 1:
            raise ValueError(
                f"the dedupe buffer of {memory} bytes holds {self.slots} slots at load factor {load_factor}: "
                "too small to map a single key (raise log.cleaner.dedupe.buffer.size)"
            )
        self.max_entries = int(desired)
        self.table = np.zeros(self.slots * SLOT, dtype=np.uint8)
        self.versions = np.zeros(self.slots, dtype=np.int64) if versioned else None
        self.active = min(self.slots, INITIAL_SLOTS)
        self.size = 0
        self.latest_offset = -1
        self.probes = 0
        self.lookups = 0

    def clear(self) -> None:
        if self.size:
            # A fresh zeroed allocation instead of writing zeros: untouched pages cost no memory, so
            # resident memory follows the keys actually mapped, up to the budget.
            self.table = np.zeros(self.slots * SLOT, dtype=np.uint8)
            if self.versioned:
                self.versions = np.zeros(self.slots, dtype=np.int64)
        self.active = min(self.slots, INITIAL_SLOTS)
        self.size = 0
        self.latest_offset = -1

    @property
    def full(self) -> bool:
        return self.size >= self.max_entries

    @property
    def utilization(self) -> float:
        return self.size / self.slots

    def put_batch(self, data, cols: np.ndarray, base_offset: int, min_offset: int,
                  row_versions: np.ndarray | None = None) -> bool:
        """Map the keyed records of one batch at or after ``min_offset``; False if the map filled first.

        On a full map the records before the stopping point are mapped and ``latest_offset`` is the last
        one put, as in Kafka, so a partial round still makes progress.
        """
        extra = (self.versions, row_versions) if self.versioned else ()
        row = 0
        while True:
            # while not every slot is in use, stop at the active slots' share and spread them out
            limit = self.max_entries if self.active == self.slots else min(self.max_entries, int(self.active * GROW_AT))
            size, row, full, probes, last_put, puts = kernels.offset_map_put(
                self.table, self.active, limit, self.size, data, cols, base_offset, row, min_offset, *extra)
            if puts:
                self.latest_offset = last_put
            self.size = size
            self.probes += probes
            self.lookups += puts
            if not full or limit == self.max_entries:
                break
            self._grow()
        self.stopped_row = row
        return not full

    def _grow(self) -> None:
        new = min(self.slots, self.active * 2)
        kernels.offset_map_grow(self.table, self.active, new, *((self.versions,) if self.versioned else ()))
        self.active = new

    def get_batch(self, data, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """The mapped offset of each record's key (-1 when absent or keyless), and for a versioned map
        the mapped version."""
        out = np.empty(len(cols), dtype=np.int64)
        if not self.versioned:
            kernels.offset_map_get(self.table, self.active, data, cols, out)
            return out, None
        vout = np.empty(len(cols), dtype=np.int64)
        kernels.offset_map_get(self.table, self.active, data, cols, out, self.versions, vout)
        return out, vout

    def set_rows(self, data, cols: np.ndarray, rows: np.ndarray, offsets: np.ndarray, versions: np.ndarray) -> None:
        """Point the (already mapped) keys of ``rows`` at these records instead."""
        kernels.offset_map_set(self.table, self.active, self.versions, data, cols, rows.astype(np.int64),
                               offsets.astype(np.int64), versions.astype(np.int64))
