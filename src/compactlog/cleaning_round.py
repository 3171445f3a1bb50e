"""The distributed cleaning round: Kafka's cleaning round cut into pieces that other processes clean.

The local cleaner (``cleaner.cleaner``) maps keys into a fixed buffer and rewrites a log's segments in
one thread. A round done elsewhere (the Spark job, ``compactlog.spark.compact``) keeps the same rules and
the same bytes but splits the work; this module holds every step of it that touches the storage, so the
job itself only moves rows between them:

1. Plan (the side that holds the data directory): :func:`plan_round` claims the eligible logs by the
   cleaner's own rules (``cleaner.selection``), so no cleaner thread touches them, and cuts each one's
   closed segments below ``first_uncleanable`` into groups (``cleaner.grouping``), one
   :class:`GroupTask` each.
2. Read (tasks, read-only, in any process): :func:`scan_keys` hands out the keyed records of a range of
   one partition, for whoever maps each key to its surviving offset (Spark does it with a shuffle).
3. Clean (tasks): :func:`rewrite_group` filters one group's segments with ``cleaner.survival`` -- the
   very function the local cleaner calls -- given the map's answer for the group's records, and writes
   ``<base>.log.cleaned`` in the job's staging directory (``storage.staging``).
4. Adopt (the holder again): :meth:`CleaningRound.adopt` swaps each cleaned segment in with the log's
   crash-safe ``adopt_cleaned``, then advances the ``cleaner-offset-checkpoint`` to ``first_uncleanable``
   for each partition whose groups were all swapped. Closing the round removes the staging directory
   and releases every claim, whatever happened.

Only closed segments below ``first_uncleanable`` are read or replaced, so appends go on meanwhile.
"""

from __future__ import annotations

import time as _time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

import numpy as np

from .cleaner.cleaner import READ_BUFFER_BYTES, CleanerStats
from .cleaner.grouping import SegmentSize, group_segments_by_size
from .cleaner.log_cleaner import CleanResult
from .cleaner.survival import chunk_versions, filter_batches, without_batches
from .cleaner.transactions import AbortedRanges, CleanedTransactions, carried_states, last_records
from .errors import CompactLogError
from .records import kernels
from .records.layout import SLOT
from .records.columns import Chunk, chunks
from .storage.segment import SegmentParams
from .storage.staging import JobStaging
from .storage.transaction_index import AbortedTxn

if TYPE_CHECKING:
    from .api import CompactLog

MAP_CHUNK_BYTES = 4 << 20
SUPERSEDED = 2**63 - 1  # a mapped offset above every record's: another record of the key is kept
STAT_FIELDS = ("bytes_read", "bytes_written", "messages_read", "messages_written", "invalid_messages")


class CompactionJobError(CompactLogError):
    """The distributed compaction job failed; nothing was swapped for the partitions it names."""


@dataclass(frozen=True)
class ScanTask:
    """Keyed records of one partition in ``[lo, hi)``, tagged with the partition's plan id and a group."""

    path: str
    topic: str
    partition: int
    pid: int
    gid: int
    lo: int
    hi: int
    strategy: str
    aborted: tuple[AbortedTxn, ...] = ()  # the aborted transactions overlapping [lo, hi): never mapped


@dataclass(frozen=True)
class GroupTask:
    """One group of consecutive segments rewritten into one cleaned segment."""

    path: str
    topic: str
    partition: int
    gid: int
    bases: tuple[int, ...]
    sizes: tuple[int, ...]
    params: SegmentParams
    upper_bound: int
    latest_mapped: int
    now: int
    delete_retention_ms: int
    exact: bool  # a versioned strategy: only the mapped record itself survives
    first_dirty: int
    # the round's walk over transactions as it reaches this group (``transactions.carried_states``)
    txn: CleanedTransactions | None = None


@dataclass
class PartitionPlan:
    topic: str
    partition: int
    first_dirty: int
    first_uncleanable: int
    strategy: str
    groups: list[GroupTask] = field(default_factory=list)
    aborted: tuple[AbortedTxn, ...] = ()  # the aborted transactions of the cleaned range
    map_memory: int = 0  # the local cleaner's map budget (a thread's share of the dedupe buffer)
    load_factor: float = 0.9

    def aborted_in(self, lo: int, hi: int) -> tuple[AbortedTxn, ...]:
        return tuple(t for t in self.aborted if t.last_offset >= lo and t.first_offset < hi)


@dataclass(frozen=True)
class KeyedRows:
    """The keyed records of one chunk that a :class:`ScanTask` covers: ``rows`` of ``chunk`` (its key
    columns say where each key lies), and with a versioned strategy each row's version."""

    chunk: Chunk
    rows: np.ndarray
    versions: np.ndarray | None


def scan_keys(task: ScanTask, versioned: bool) -> Iterator[KeyedRows]:
    """Task side: the keyed records of ``task``'s range, read from a read-only snapshot."""
    from .storage.snapshot import PartitionSnapshot

    aborted = AbortedRanges(task.aborted)
    with PartitionSnapshot.open(task.path, task.topic, task.partition) as snap:
        for group in chunks(snap.batches(task.lo, task.hi), MAP_CHUNK_BYTES):
            chunk = Chunk.scan(group, verify=True)
            offs = chunk.offsets
            sel = (chunk.cols[:, kernels.C_KEY_LEN] >= 0) & (offs >= task.lo) & (offs < task.hi)
            gone = aborted.aborted(group) if aborted else None
            if gone:  # an aborted transaction's records never enter the map
                sel[without_batches(chunk, gone)] = False
            rows = np.flatnonzero(sel)
            if not len(rows):
                continue
            yield KeyedRows(chunk, rows, chunk_versions(task.strategy, chunk)[rows] if versioned else None)


def map_dirty_keys(plan: PartitionPlan, path: str, staging: JobStaging) -> str | None:
    """Task side: the offset map of the partition's dirty section, built as the local cleaner builds it
    (``survival.map_keys``: the same budget, load factor and kernel, aborted transactions' records left
    out) and stored in a file of the task's own for the rewrite tasks to look keys up in (mapped from
    the page cache, not copied). The file's path, or None, with nothing stored, when the keys do not
    fit the budget: the job then maps them with a shuffle instead, still in one pass."""
    from .cleaner.offset_map import OffsetMap
    from .cleaner.survival import map_keys
    from .storage.snapshot import PartitionSnapshot

    try:
        m = OffsetMap(plan.map_memory, plan.load_factor)
    except ValueError:  # a budget too small for a single key (the local cleaner's rounds could not clean)
        return None
    aborted = AbortedRanges(plan.aborted_in(plan.first_dirty, plan.first_uncleanable))
    with PartitionSnapshot.open(path, plan.topic, plan.partition) as snap:
        if not map_keys(m, snap.batches(plan.first_dirty, plan.first_uncleanable), plan.first_dirty, "offset",
                        aborted=aborted):
            return None
    out = staging.new_file(".npy")
    np.save(out, m.table[: m.active * SLOT])
    return str(out)


def rewrite_group(task: GroupTask, offsets: np.ndarray, mapped: np.ndarray, staging: JobStaging,
                  offset_map: str | None = None) -> dict:
    """Task side: the group's segments filtered into one ``.cleaned`` segment, written in a
    directory of the task's own under the job's staging directory.

    ``offset_map``, a file ``map_dirty_keys`` stored, answers the map lookup as the local cleaner's map
    answers it. Without one, ``offsets``/``mapped`` (sorted by offset) answer it for the records they
    list. With a versioned strategy they list every keyed record whose key is mapped, the rest being
    unmapped (-1); with the offset strategy they list the latest records and the superseded clean ones,
    and a dirty keyed record not listed is superseded.
    """
    from .storage.rewrite import write_cleaned
    from .storage.snapshot import PartitionSnapshot

    stats = CleanerStats()
    txn = task.txn if task.txn is not None else CleanedTransactions()
    table = None if offset_map is None else np.load(offset_map, mmap_mode="r")
    with PartitionSnapshot.open(task.path, task.topic, task.partition) as snap:
        sources = [snap.segment_at(b) for b in task.bases]
        if any(s is None or s.size != size for s, size in zip(sources, task.sizes)):
            raise CompactionJobError(f"segments {list(task.bases)} of {task.topic}-{task.partition} changed during the job")

        def filtered():
            for src in sources:
                for group in chunks((b for _, b in src.batches(0)), READ_BUFFER_BYTES):
                    chunk = Chunk.scan(group, verify=True)
                    stats.bytes_read += sum(b.size for b in group)
                    stats.messages_read += sum(b.record_count for b in group)
                    offs = chunk.offsets
                    if table is not None:
                        m = np.empty(len(offs), dtype=np.int64)
                        kernels.offset_map_get(table, len(table) // SLOT, chunk.data, chunk.cols, m)
                        yield filter_batches(chunk, m, False, task.latest_mapped, task.upper_bound, task.now,
                                             task.delete_retention_ms, stats, txn=txn)
                        continue
                    m = np.full(len(offs), -1, dtype=np.int64)
                    if not task.exact:  # only latest offsets are listed: the other dirty keyed records lose
                        m[(chunk.cols[:, kernels.C_KEY_LEN] >= 0) & (offs >= task.first_dirty)
                          & (offs <= task.latest_mapped)] = SUPERSEDED
                    if len(offsets) and len(offs):
                        at = np.minimum(np.searchsorted(offsets, offs), len(offsets) - 1)
                        hit = offsets[at] == offs
                        m[hit] = mapped[at[hit]]
                    yield filter_batches(chunk, m, task.exact, task.latest_mapped, task.upper_bound, task.now,
                                         task.delete_retention_ms, stats, txn=txn)

        out = staging.new_dir()
        dest, written = write_cleaned(out, task.bases[0], task.params, filtered(), sources[-1].last_modified_ms,
                                      txn_entries=txn.take_index_entries)
        dest.close_handlers()
    stats.bytes_written = written
    return {"gid": task.gid, "dir": str(out), **{k: getattr(stats, k) for k in STAT_FIELDS}}


def plan_round(cl: "CompactLog", topic: str | None) -> list[PartitionPlan]:
    """Every eligible compacted log (of ``topic``), marked in progress in the cleaner manager: the
    caller hands the plans to a :class:`CleaningRound`, which releases them."""
    logs = dict(cl.manager.logs)
    now = cl.time.milliseconds()
    plans = []
    gid = 0
    for c in sorted(cl.cleaner.claim_eligible(topic), key=lambda c: c.key):
        lg = logs[c.key]
        cfg = lg.config
        plan = PartitionPlan(c.key[0], c.key[1], c.first_dirty_offset, c.first_uncleanable_offset, cfg.compaction_strategy,
                             map_memory=cl.cleaner.memory_per_thread, load_factor=cl.cleaner.load_factor)
        segs = [s for s in lg.segments if s.base_offset < c.first_uncleanable_offset and s is not lg.active_segment]
        facts = [SegmentSize(s.base_offset, s.size, s.offset_index.size_in_bytes, s.time_index.size_in_bytes) for s in segs]
        groups = group_segments_by_size(facts, cfg.segment_bytes, cfg.segment_index_bytes, c.first_uncleanable_offset)
        if segs:
            plan.aborted = tuple(lg.aborted_txns(segs[0].base_offset, c.first_uncleanable_offset))
        states = _walk_states(lg, [[segs[i] for i in g] for g in groups], plan.aborted,
                              last_records(lg.last_records_of_active_producers()), c.first_uncleanable_offset)
        for group, state in zip(groups, states):
            plan.groups.append(GroupTask(
                str(cl.data_dir), plan.topic, plan.partition, gid, tuple(segs[i].base_offset for i in group),
                tuple(segs[i].size for i in group), lg.segment_params(), c.first_uncleanable_offset,
                c.first_uncleanable_offset - 1, now, cfg.delete_retention_ms, plan.strategy != "offset",
                c.first_dirty_offset, state))
            gid += 1
        plans.append(plan)
    return plans


def _walk_states(lg, groups: list[list], aborted: tuple[AbortedTxn, ...], lasts, end: int) -> list[CleanedTransactions]:
    """The round's walk over transactions as it reaches each group (Kafka's one walk, split for tasks
    that clean the groups apart): the batches before the last group are read here once, for their
    headers (and markers' records). With one group nothing is read."""
    state = CleanedTransactions(aborted, lasts)
    if len(groups) <= 1:
        return [state.for_range(end)] * len(groups)
    starts = [g[0].base_offset for g in groups]
    ends = [*starts[1:], end]

    def headers():
        for seg in (s for g in groups[:-1] for s in g):
            with seg.mapped():
                yield from (b for _, b in seg.batches(0))

    return list(carried_states(state, headers(), starts, ends))


class CleaningRound:
    """The holder's side of one round over ``plans`` (from :func:`plan_round`): the job's staging
    directory while it runs, the adoption of what its tasks wrote, and at close the staging directory
    removed and every claim not yet released let go (its checkpoint unmoved). Use as a context manager."""

    def __init__(self, cl: "CompactLog", plans: list[PartitionPlan]) -> None:
        self.cl, self.plans = cl, plans
        self.path = str(cl.data_dir)
        self._finished: set[tuple[str, int]] = set()
        try:
            self.staging = JobStaging.begin(self.path)
        except BaseException:
            self._release_unfinished()
            raise

    def __enter__(self) -> "CleaningRound":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def adopt(self, outputs: Mapping[int, Mapping[str, Any]], started: float, map_done: float,
              on_cleaned: Callable[[CleanResult], None] = lambda r: None) -> list[CleanResult]:
        """Swap in what the tasks wrote (``outputs``: per group id, :func:`rewrite_group`'s answer); a
        group whose segments changed since planning (retention, truncation) keeps the live ones, and a
        partition asked to stop meanwhile (deleted, truncated, paused) stops. Each partition's claim ends
        here, its checkpoint advanced only when every group was swapped; returns (and hands
        ``on_cleaned``) a CleanResult per such partition."""
        cleaner = self.cl.cleaner
        swapped: set[int] = set()
        results: list[CleanResult] = []
        for p in self.plans:
            tp = (p.topic, p.partition)
            lg = self.cl.log(p.topic, p.partition)
            stats = CleanerStats(start_size=lg.size, started=started, map_done=map_done)
            for g in p.groups:
                if cleaner.was_aborted(tp):
                    break
                if not lg.adopt_cleaned(g.bases[0], list(zip(g.bases, g.sizes)), Path(outputs[g.gid]["dir"])):
                    continue  # changed since planning (retention, truncation): the live ones stay
                swapped.add(g.gid)
                for k in STAT_FIELDS:
                    setattr(stats, k, getattr(stats, k) + outputs[g.gid][k])
            stats.end_size = lg.size
            stats.ended = _time.monotonic()
            complete = not cleaner.was_aborted(tp) and all(g.gid in swapped for g in p.groups)
            cleaner.release(tp, p.first_uncleanable if complete else None)
            self._finished.add(tp)
            lg.delete_expired_files()
            if complete:
                result = CleanResult(p.topic, p.partition, p.first_dirty, p.first_uncleanable, stats)
                results.append(result)
                on_cleaned(result)
        return results

    def close(self) -> None:
        try:
            self.staging.remove()  # what was not swapped, and what tasks killed with a failed job left
        finally:
            self._release_unfinished()

    def _release_unfinished(self) -> None:
        for p in self.plans:
            if (p.topic, p.partition) not in self._finished:
                self.cl.cleaner.release((p.topic, p.partition), None)
                self._finished.add((p.topic, p.partition))
