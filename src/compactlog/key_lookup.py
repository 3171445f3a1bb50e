"""The latest record of one key through the compacted view, found newest first, by columns, within a bound.

The compacted view of a partition (docs/compaction.md) is the side log below the published horizon H
plus the live log from H on. Which record of a key is "the latest" is the topic's
``compaction.strategy`` (docs/cleaner.md), decided as compaction decides it: the cleaner's versions
(``cleaner.survival.chunk_versions``) ranked by its own offset map, so the lookup cannot name a record
compaction would drop (a record of an aborted transaction is no candidate either). With ``offset`` (Kafka's rule) it is the last record in the live tail
``[H, end)`` if there is one, else the one record the side log keeps for the key (a side log holds each
key once and never a tombstone). With ``timestamp`` or ``header:<name>`` every record of the key in the
tail competes, and the side log's with them. Without a published compaction the view is the whole live log.

Each part is searched from its end backwards in windows of offsets, so a key written recently is found
after reading little. A window's batches are scanned into a column table (``records.columns.Chunk``)
and keys are matched with numpy over that table: no Python work per record. At most ``SCAN_BYTES`` of
stored batches are read per partition; a search that reaches the bound says how far back it got.

The key's partition is the one Kafka's default partitioner gives it (murmur2), searched first; but
librdkafka's default (``consistent_random``: CRC-32), kcat's, puts keys elsewhere, so the partition it
gives is searched next, and then every other, until one holds the key.

The rule lives here, under the embedded API, so that every adapter asking for "the latest value of a
key" (the console's lookup, the command line, a Spark job) gets the answer compaction would keep:
``find_latest(cl, topic, key)``.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from dataclasses import dataclass, replace

import numpy as np

from .cleaner.offset_map import OffsetMap
from .cleaner.survival import chunk_versions, without_batches
from .cleaner.transactions import AbortedRanges
from .compaction.reader import pinned_view
from .compaction.state import CompactionState
from .records import kernels
from .records.batch import Record, RecordBatch
from .records.columns import Chunk, chunks
from .records.layout import SLOT
from .storage.reader import PartitionView

SCAN_BYTES = 256 * 1024 * 1024  # stored bytes a lookup may read in each partition
CHUNK_BYTES = 4 * 1024 * 1024  # batches scanned into one column table
FIRST_WINDOW = 1024  # offsets in the first (newest) window; later windows grow while they are light
MATCH_CELLS = 1 << 22  # key bytes compared per numpy step (bounds the comparison's memory)
LIVE, COMPACTED = "live log", "compacted view"


@dataclass(frozen=True)
class Lookup:
    """What a lookup found in one partition, and what it read to find it."""

    partition: int
    record: Record | None  # the key's latest record (its value None: a tombstone), or None: not found
    source: str | None  # LIVE or COMPACTED: where the record was
    state: CompactionState | None  # the published compaction, or None: the live log was read
    scanned_bytes: int
    searched_from: int  # every offset of the view from here to the end was searched
    complete: bool  # False: the bound stopped the search before the start of the view
    live_start: int  # the live log's start offset (browsing reads the live log from here)
    strategy: str = "offset"  # the topic's compaction.strategy: what "latest" means
    partitions_searched: int = 1  # partitions searched before the key was found (all of them when it was not)

    @property
    def deleted(self) -> bool:
        return self.record is not None and self.record.value is None


class Budget:
    """Stored bytes a lookup may still read."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.spent = 0

    def take(self, n: int) -> bool:
        """Spend ``n`` bytes, unless that would pass the limit (the first read is always allowed)."""
        if self.spent and self.spent + n > self.limit:
            return False
        self.spent += n
        return True


def rows_with_key(data, cols: np.ndarray, key: bytes) -> np.ndarray:
    """Rows of a column table whose key is exactly ``key``, in row order: lengths first, then the
    bytes of the rows of that length, compared in blocks of at most ``MATCH_CELLS`` bytes."""
    n = len(key)
    rows = np.flatnonzero(cols[:, kernels.C_KEY_LEN] == n)
    if rows.size == 0 or n == 0:
        return rows
    buf = np.frombuffer(data, dtype=np.uint8)
    want = np.frombuffer(key, dtype=np.uint8)
    pos = cols[rows, kernels.C_KEY_POS]
    first = buf[pos] == want[0]  # one byte first: most rows of the right length go here
    rows, pos = rows[first], pos[first]
    if n == 1 or rows.size == 0:
        return rows
    step = max(1, MATCH_CELLS // n)
    span = np.arange(n, dtype=np.int64)
    keep = [rows[i : i + step][(buf[pos[i : i + step, None] + span] == want).all(axis=1)]
            for i in range(0, rows.size, step)]
    return np.concatenate(keep)


@dataclass(frozen=True)
class Hit:
    """One record of the key: its batch, offset and version (None under Kafka's offset rule)."""

    batch: RecordBatch
    offset: int
    version: int | None


def survivor(key: bytes, offsets: np.ndarray, versions: np.ndarray | None) -> int:
    """Which of records of ``key`` (at ``offsets``, ascending) compaction keeps, as an index: the cleaner's
    offset map decides, fed in offset order as the cleaner feeds it (the highest offset; with versions,
    the highest version, ties to the later offset). One key, so a map of a few slots."""
    m = OffsetMap((SLOT + 8) * 4, versioned=versions is not None)
    cols = np.zeros((len(offsets), kernels.NCOLS), dtype=np.int64)
    cols[:, kernels.C_KEY_LEN] = len(key)  # every row points at the one copy of the key at position 0
    cols[:, kernels.C_OFFSET_DELTA] = offsets
    m.put_batch(key, cols, 0, int(offsets.min()), None if versions is None else np.asarray(versions, dtype=np.int64))
    mapped, _ = m.get_batch(key, cols[:1])
    return int(np.flatnonzero(offsets == mapped[0])[-1])


def best_of(key: bytes, hits: list[Hit]) -> Hit:
    """The hit compaction keeps (``survivor``), whatever order the hits were found in."""
    hits = sorted(hits, key=lambda h: h.offset)
    versions = None if hits[0].version is None else np.asarray([h.version for h in hits], dtype=np.int64)
    return hits[survivor(key, np.asarray([h.offset for h in hits], dtype=np.int64), versions)]


def hits_in(batches: Iterable[RecordBatch], lo: int, hi: int, key: bytes, strategy: str,
            budget: Budget, aborted: AbortedRanges | None = None) -> tuple[list[Hit], bool, int]:
    """The winning record with ``key`` and an offset in [lo, hi) of each chunk of ``batches``: (those
    hits, whether the whole range was read, bytes read). Records of the ``aborted`` transactions are
    not candidates: compaction drops them."""
    hits = []
    read = 0
    for group in chunks(batches, CHUNK_BYTES):
        size = sum(b.size for b in group)
        if not budget.take(size):
            return hits, False, read
        read += size
        chunk = Chunk.scan(group)
        rows = rows_with_key(chunk.data, chunk.cols, key)
        gone = aborted.aborted(group) if aborted and rows.size else None
        if gone:
            rows = rows[~np.isin(rows, without_batches(chunk, gone))]
        if rows.size:
            offsets = chunk.offsets[rows]
            rows = rows[(offsets >= lo) & (offsets < hi)]  # a batch may straddle the window's edges
        if rows.size:
            versions = chunk_versions(strategy, chunk)
            versions = None if versions is None else versions[rows]
            w = survivor(key, chunk.offsets[rows], versions)
            r = int(rows[w])
            i = int(np.searchsorted(chunk.rows, r, side="right")) - 1
            hits.append(Hit(group[i], int(chunk.offsets[r]), None if versions is None else int(versions[w])))
    return hits, True, read


def newest(view: PartitionView, lo: int, hi: int, key: bytes, budget: Budget, strategy: str = "offset",
           once: bool = False, aborted: AbortedRanges | None = None) -> tuple[Hit | None, int, bool]:
    """The record compaction keeps of ``key`` in [lo, hi) of ``view``, searched from ``hi`` backwards:
    (the hit or None, the lowest offset searched, whether the search reached ``lo``).

    Under the offset rule the first window holding the key holds the answer; so does any window of a
    view holding each key ``once`` (a side log). Otherwise an older record may outrank a newer one,
    and every window down to ``lo`` is searched; a search the budget stops returns the best so far."""
    window = FIRST_WINDOW
    b = hi
    best: Hit | None = None
    while b > lo:
        a = max(lo, b - window)
        hits, whole, read = hits_in(view.batches(a, b), a, b, key, strategy, budget, aborted)
        if not whole:
            return best, b, False
        if hits:
            best = best_of(key, hits + ([best] if best else []))
            if strategy == "offset" or once:
                return best, a, True
        b = a
        if read < CHUNK_BYTES:  # a light window: the next may be larger (sparse or compacted offsets)
            window *= 4
        elif read > 4 * CHUNK_BYTES:
            window = max(FIRST_WINDOW, window // 2)
    return best, lo, True


def record_of(hit: Hit, topic: str, partition: int) -> Record:
    return next(r for r in hit.batch.records(topic, partition) if r.offset == hit.offset)


def search_partition(cl, topic: str, partition: int, key: bytes, scan_bytes: int = SCAN_BYTES) -> Lookup:
    """The latest record of ``key`` in one partition's compacted view, by the topic's compaction.strategy."""
    lg = cl.manager.get_log(topic, partition)
    strategy = lg.config.compaction_strategy
    end, start = lg.log_end_offset, lg.log_start_offset
    state, side = pinned_view(lg.dir)
    budget = Budget(scan_bytes)
    try:
        live_lo = start if state is None else min(max(state.horizon, start), end)
        aborted = AbortedRanges(lg.aborted_txns(live_lo, end))  # (a side log holds no aborted record)
        live, low, complete = newest(lg, live_lo, end, key, budget, strategy, aborted=aborted)
        compacted = None
        if complete and side is not None and (live is None or strategy != "offset"):
            hi = min(state.horizon, side.log_end_offset)
            compacted, low, complete = newest(side, side.log_start_offset, hi, key, budget, strategy, once=True)
        found = [h for h in (compacted, live) if h is not None]
        if not found:
            return Lookup(partition, None, None, state, budget.spent, low, complete, start, strategy)
        hit = best_of(key, found)
        source = LIVE if hit is live else COMPACTED
        return Lookup(partition, record_of(hit, topic, partition), source, state, budget.spent, low, complete, start,
                      strategy)
    finally:
        if side is not None:
            side.close()


def partitions_to_search(key: bytes, partitions: int) -> list[int]:
    """Every partition of the topic, in the order a key is likeliest to be in: the one Kafka's default
    partitioner gives it (murmur2, Java's and our producers), then librdkafka's default
    (``consistent_random``: CRC-32 of the key, kcat's and confluent-kafka's unless told otherwise), then
    the rest in order."""
    first = [int(kernels.partition_for_keys([key], partitions)[0]), zlib.crc32(key) % partitions]
    return list(dict.fromkeys([*first, *range(partitions)]))


def find_latest(cl, topic: str, key: bytes, scan_bytes: int = SCAN_BYTES) -> Lookup:
    """The latest record of ``key`` in ``topic``: each partition searched (within ``scan_bytes``) in the
    order of ``partitions_to_search`` until one holds the key. Not found, the answer is the first
    partition's, complete only if every partition's search was."""
    order = partitions_to_search(key, cl.partitions_for(topic))
    spent, complete, first = 0, True, None
    for n, partition in enumerate(order, 1):
        found = search_partition(cl, topic, partition, key, scan_bytes)
        spent += found.scanned_bytes
        if found.record is not None:
            return replace(found, scanned_bytes=spent, partitions_searched=n)
        complete = complete and found.complete
        first = first or found
    return replace(first, scanned_bytes=spent, complete=complete, partitions_searched=len(order))
