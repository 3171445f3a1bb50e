"""Distributed log compaction: Kafka's cleaning round, with the offset map built by a Spark shuffle.

The local cleaner maps keys into a fixed buffer; when the dirty section holds more keys than fit, it
cleans up to the last mapped offset and leaves the rest for another round, rereading the whole log each
time. Here the map is a ``groupBy`` over the dirty section, so one pass covers any number of keys:

1. Plan (driver): the eligible logs by the cleaner's own rules (``cleaner.selection``), each marked
   in progress in the cleaner manager so no cleaner thread touches them; their dirty sections
   ``[first_dirty, first_uncleanable)`` and segment groups (``cleaner.grouping``).
2. Map (executors + shuffle): keyed records of the dirty sections -> per (partition, key) the chosen
   offset: the highest, or for a versioned ``compaction.strategy`` the highest (version, offset).
3. Join (shuffle): the keyed records of each segment group meet the chosen offset of their key.
4. Rewrite (executors): each group's segments are filtered by ``cleaner.survival.filter_batches`` -- the
   very function the local cleaner calls -- and written into ``<base>.log.cleaned`` in the job's
   staging directory (:mod:`.staging`).
5. Swap (driver): each cleaned segment is moved beside its log and replaces its sources with the log's
   crash-safe ``replace_segments``, then the ``cleaner-offset-checkpoint`` advances to
   ``first_uncleanable``. The staging directory goes, whatever happened.

Only closed segments below ``first_uncleanable`` are read or replaced, so appends go on meanwhile.
Keys are grouped by their bytes, not by the local map's 128-bit hash (see docs/cleaner.md).
"""

from __future__ import annotations

import time as _time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa

from ..cleaner.cleaner import READ_BUFFER_BYTES, CleanerStats
from ..cleaner.survival import chunk_versions, filter_batches
from ..cleaner.grouping import SegmentSize, group_segments_by_size
from ..cleaner.log_cleaner import CleanResult
from ..errors import CompactLogError
from ..records import kernels
from ..records.columns import Chunk, chunks
from ..storage.segment import SegmentParams
from ..storage.staging import JobStaging
from .progress import spark_progress

MAP_CHUNK_BYTES = 4 << 20
SUPERSEDED = 2**63 - 1  # a mapped offset above every record's: another record of the key is kept
STAT_FIELDS = ("bytes_read", "bytes_written", "messages_read", "messages_written", "invalid_messages")


class CompactionJobError(CompactLogError):
    """The Spark compaction job failed; nothing was swapped for the partitions it names."""


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


@dataclass
class PartitionPlan:
    topic: str
    partition: int
    first_dirty: int
    first_uncleanable: int
    strategy: str
    groups: list[GroupTask] = field(default_factory=list)


def scan_keys(task: ScanTask, versioned: bool) -> list[pa.RecordBatch]:
    """Executor side: (pid, gid, key, offset[, version]) of the keyed records of ``task``'s range."""
    from ..storage.snapshot import PartitionSnapshot
    from .arrow import _binary

    out = []
    with PartitionSnapshot.open(task.path, task.topic, task.partition) as snap:
        for group in chunks(snap.batches(task.lo, task.hi), MAP_CHUNK_BYTES):
            chunk = Chunk.scan(group, verify=True)
            offs = chunk.offsets
            sel = (chunk.cols[:, kernels.C_KEY_LEN] >= 0) & (offs >= task.lo) & (offs < task.hi)
            rows = np.flatnonzero(sel)
            if not len(rows):
                continue
            n = len(rows)
            arrays = [pa.array(np.full(n, task.pid, dtype=np.int32)), pa.array(np.full(n, task.gid, dtype=np.int32)),
                      _binary(chunk, kernels.C_KEY_POS, kernels.C_KEY_LEN, rows), pa.array(offs[rows])]
            names = ["pid", "gid", "key", "offset"]
            if versioned:
                arrays.append(pa.array(chunk_versions(task.strategy, chunk)[rows]))
                names.append("version")
            out.append(pa.RecordBatch.from_arrays(arrays, names=names))
    return out


def rewrite_group(task: GroupTask, offsets: np.ndarray, mapped: np.ndarray, staging: JobStaging) -> dict:
    """Executor side: the group's segments filtered into one ``.cleaned`` segment, written in a
    directory of the task's own under the job's staging directory.

    ``offsets``/``mapped`` (sorted by offset) answer the map lookup for the records they list. With a
    versioned strategy they list every keyed record whose key is mapped, the rest being unmapped (-1);
    with the offset strategy they list the latest records and the superseded clean ones, and a dirty
    keyed record not listed is superseded.
    """
    from ..storage.rewrite import write_cleaned
    from ..storage.snapshot import PartitionSnapshot

    stats = CleanerStats()
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
                    m = np.full(len(offs), -1, dtype=np.int64)
                    if not task.exact:  # only latest offsets are listed: the other dirty keyed records lose
                        m[(chunk.cols[:, kernels.C_KEY_LEN] >= 0) & (offs >= task.first_dirty)
                          & (offs <= task.latest_mapped)] = SUPERSEDED
                    if len(offsets) and len(offs):
                        at = np.minimum(np.searchsorted(offsets, offs), len(offsets) - 1)
                        hit = offsets[at] == offs
                        m[hit] = mapped[at[hit]]
                    yield filter_batches(chunk, m, task.exact, task.latest_mapped, task.upper_bound, task.now,
                                         task.delete_retention_ms, stats)

        out = staging.new_dir()
        dest, written = write_cleaned(out, task.bases[0], task.params, filtered(), sources[-1].last_modified_ms)
        dest.close_handlers()
    stats.bytes_written = written
    return {"gid": task.gid, "dir": str(out), **{k: getattr(stats, k) for k in STAT_FIELDS}}


def plan_compaction(cl, topic: str | None) -> list[PartitionPlan]:
    """Every eligible compacted log (of ``topic``), marked in progress in the cleaner manager."""
    logs = dict(cl.manager.logs)
    now = cl.time.milliseconds()
    plans = []
    gid = 0
    for c in sorted(cl.cleaner.claim_eligible(topic), key=lambda c: c.key):
        lg = logs[c.key]
        cfg = lg.config
        plan = PartitionPlan(c.key[0], c.key[1], c.first_dirty_offset, c.first_uncleanable_offset, cfg.compaction_strategy)
        segs = [s for s in lg.segments if s.base_offset < c.first_uncleanable_offset and s is not lg.active_segment]
        facts = [SegmentSize(s.base_offset, s.size, s.offset_index.size_in_bytes, s.time_index.size_in_bytes) for s in segs]
        for group in group_segments_by_size(facts, cfg.segment_bytes, cfg.segment_index_bytes, c.first_uncleanable_offset):
            plan.groups.append(GroupTask(
                str(cl.manager.dir), plan.topic, plan.partition, gid, tuple(segs[i].base_offset for i in group),
                tuple(segs[i].size for i in group), lg.segment_params(), c.first_uncleanable_offset,
                c.first_uncleanable_offset - 1, now, cfg.delete_retention_ms, plan.strategy != "offset",
                c.first_dirty_offset))
            gid += 1
        plans.append(plan)
    return plans


def _scan_tasks(plans: list[PartitionPlan], path: str, part: str, pids: list[int]) -> list[ScanTask]:
    """One task per planned segment of the plans ``pids``: its ``dirty`` part (the map side, untagged),
    its ``clean`` part or ``all`` of it, tagged with its group."""
    tasks = []
    for pid in pids:
        plan = plans[pid]
        for i, g in enumerate(plan.groups):
            group_end = plan.groups[i + 1].bases[0] if i + 1 < len(plan.groups) else plan.first_uncleanable
            for lo, hi in zip(g.bases, [*g.bases[1:], group_end]):
                if part == "dirty":
                    lo = max(lo, plan.first_dirty)
                elif part == "clean":
                    hi = min(hi, plan.first_dirty)
                if lo < hi:
                    tasks.append(ScanTask(path, plan.topic, plan.partition, pid, -1 if part == "dirty" else g.gid,
                                          lo, hi, plan.strategy))
    return tasks


def _scan_frame(spark, tasks: list[ScanTask], versioned: bool):
    """A DataFrame of the keyed records of ``tasks``, one Spark task per ScanTask."""
    schema = "pid int, gid int, key binary, offset long" + (", version long" if versioned else "")

    def run(batches):
        for b in batches:
            for i in b.column("id").to_pylist():
                yield from scan_keys(tasks[i], versioned)

    return spark.range(0, len(tasks), 1, max(1, len(tasks))).mapInArrow(run, schema)


def latest_offsets(spark, plans: list[PartitionPlan], path: str, pids: list[int]):
    """(pid, key, offset): Kafka's offset strategy keeps the highest offset of each key's dirty records."""
    from pyspark.sql import functions as F

    dirty = _scan_frame(spark, _scan_tasks(plans, path, "dirty", pids), False)
    return dirty.groupBy("pid", "key").agg(F.max("offset").alias("offset"))


def chosen_versions(spark, plans: list[PartitionPlan], path: str, pids: list[int]):
    """(pid, key, mapped) for a versioned strategy: the highest (version, offset) of the dirty section,
    unless a record of the clean section has a strictly higher version: then that one stays (the local
    cleaner's rule; the lowest such offset on ties)."""
    from pyspark.sql import functions as F

    dirty = _scan_frame(spark, _scan_tasks(plans, path, "dirty", pids), True)
    best = (dirty.groupBy("pid", "key").agg(F.max(F.struct("version", "offset")).alias("b"))
            .select("pid", "key", F.col("b.version").alias("mv"), F.col("b.offset").alias("mapped")))
    clean_tasks = _scan_tasks(plans, path, "clean", pids)
    if not clean_tasks:
        return best.select("pid", "key", "mapped")
    clean = _scan_frame(spark, clean_tasks, True)
    winners = (clean.join(best.hint("merge"), ["pid", "key"]).where(F.col("version") > F.col("mv"))
               .groupBy("pid", "key").agg(F.min(F.struct((-F.col("version")).alias("nv"), "offset")).alias("w"))
               .select("pid", "key", F.col("w.offset").alias("won")))
    return (best.join(winners.hint("merge"), ["pid", "key"], "left")
            .select("pid", "key", F.coalesce("won", "mapped").alias("mapped")))


def _offset_rule_rows(spark, plans: list[PartitionPlan], path: str, pids: list[int]):
    """(gid, offset, mapped) rows for Kafka's offset strategy, without joining every record.

    Under that rule a dirty record survives iff it is its key's latest, and a clean one iff its key has
    no dirty record. So each group needs only the latest offsets falling in it (routed by offset range)
    and its clean records whose key reappears (a semi-join over the clean section, which a previous
    round left at one record per key); every other dirty keyed record is marked superseded in the task.
    """
    from pyspark.sql import functions as F

    latest = latest_offsets(spark, plans, path, pids)
    starts = {pid: np.asarray([g.bases[0] for g in plans[pid].groups], dtype=np.int64) for pid in pids}
    gids = {pid: np.asarray([g.gid for g in plans[pid].groups], dtype=np.int32) for pid in pids}

    def to_group(batches):
        for b in batches:
            pid, off = b.column("pid").to_numpy(), b.column("offset").to_numpy()
            gid = np.empty(len(off), dtype=np.int32)
            for p in np.unique(pid).tolist():
                sel = pid == p
                gid[sel] = gids[p][np.searchsorted(starts[p], off[sel], side="right") - 1]
            yield pa.RecordBatch.from_arrays([pa.array(gid), pa.array(off), pa.array(off)], names=["gid", "offset", "mapped"])

    frames = [latest.select("pid", "offset").mapInArrow(to_group, "gid int, offset long, mapped long")]
    clean_tasks = _scan_tasks(plans, path, "clean", pids)
    if clean_tasks:
        clean = _scan_frame(spark, clean_tasks, False)
        frames.append(clean.join(latest.select("pid", "key").hint("merge"), ["pid", "key"], "left_semi")
                      .select("gid", "offset", F.lit(SUPERSEDED).alias("mapped")))
    return frames


def _rewrite_frame(spark, plans: list[PartitionPlan], path: str, staging: JobStaging):
    groups = {g.gid: g for p in plans for g in p.groups}
    by_offset = [i for i, p in enumerate(plans) if p.strategy == "offset"]
    versioned = [i for i, p in enumerate(plans) if p.strategy != "offset"]
    frames = [spark.createDataFrame([(gid, -1, -1) for gid in groups], "gid int, offset long, mapped long")]
    if by_offset:
        frames += _offset_rule_rows(spark, plans, path, by_offset)
    if versioned:
        records = _scan_frame(spark, _scan_tasks(plans, path, "all", versioned), False)
        # Sort-merge joins: Spark cannot size the scans' output, and a broadcast of a map with millions
        # of keys would not fit the driver.
        frames.append(records.join(chosen_versions(spark, plans, path, versioned).hint("merge"), ["pid", "key"])
                      .select("gid", "offset", "mapped"))
    rows = frames[0]
    for f in frames[1:]:
        rows = rows.unionByName(f)
    out_schema = "gid int, dir string, " + ", ".join(f"{k} long" for k in STAT_FIELDS)

    def run(table: pa.Table) -> pa.Table:
        gid = table.column("gid")[0].as_py()
        offs = table.column("offset").to_numpy()
        keep = offs >= 0
        order = np.argsort(offs[keep], kind="stable")
        r = rewrite_group(groups[gid], offs[keep][order], table.column("mapped").to_numpy()[keep][order], staging)
        return pa.table({"gid": pa.array([gid], pa.int32()), "dir": pa.array([r["dir"]]),
                         **{k: pa.array([r[k]], pa.int64()) for k in STAT_FIELDS}})

    return rows.groupBy("gid").applyInArrow(run, out_schema)


def compact(spark, cl, topic: str | None = None, progress: Callable[[str], None] = print) -> list[CleanResult]:
    """Clean every eligible log (of ``topic``) in one Spark job; returns a CleanResult per partition."""
    if topic is not None:
        cl.manager.partitions_for(topic)  # unknown topic -> UnknownTopicOrPartitionError
    started = _time.monotonic()
    plans = plan_compaction(cl, topic)
    cleaner = cl.cleaner
    if not plans:
        progress("nothing to compact: no log is above its min.cleanable.dirty.ratio")
        return []
    path = str(cl.manager.dir)
    ngroups = sum(len(p.groups) for p in plans)
    progress(f"compacting {len(plans)} partition(s), {ngroups} segment group(s) on {spark.sparkContext.master}")
    swapped: set[int] = set()
    finished: set[tuple[str, int]] = set()
    results: list[CleanResult] = []
    staging = JobStaging.begin(path)
    try:
        try:
            with spark_progress(spark, "compaction"):
                rows = _rewrite_frame(spark, plans, path, staging).collect()
        except Exception as exc:  # an executor failed: its message, without the JVM stack
            raise CompactionJobError(f"the compaction job failed: {_executor_message(exc)}") from None
        map_done = _time.monotonic()
        by_gid = {r["gid"]: r for r in rows}
        for p in plans:
            tp = (p.topic, p.partition)
            lg = cl.log(p.topic, p.partition)
            stats = CleanerStats(start_size=lg.size, started=started, map_done=map_done)
            for g in p.groups:
                if cleaner.was_aborted(tp):
                    break
                if not lg.adopt_cleaned(g.bases[0], list(zip(g.bases, g.sizes)), Path(by_gid[g.gid]["dir"])):
                    continue  # changed since planning (retention, truncation): the live ones stay
                swapped.add(g.gid)
                for k in STAT_FIELDS:
                    setattr(stats, k, getattr(stats, k) + by_gid[g.gid][k])
            stats.end_size = lg.size
            stats.ended = _time.monotonic()
            complete = not cleaner.was_aborted(tp) and all(g.gid in swapped for g in p.groups)
            cleaner.release(tp, p.first_uncleanable if complete else None)
            finished.add(tp)
            lg.delete_expired_files()
            if complete:
                results.append(CleanResult(p.topic, p.partition, p.first_dirty, p.first_uncleanable, stats))
                progress(f"compacted {p.topic}-{p.partition} (dirty section = [{p.first_dirty}, {p.first_uncleanable})) "
                         f"in {stats.elapsed:.1f} s: {stats.messages_read:,} -> {stats.messages_written:,} messages, "
                         f"{stats.bytes_read:,} -> {stats.bytes_written:,} bytes")
    finally:
        staging.remove()  # what was not swapped, and what tasks killed with a failed job left
        for p in plans:
            if (p.topic, p.partition) not in finished:
                cleaner.release((p.topic, p.partition), None)
    return results


def _executor_message(exc: Exception) -> str:
    """The Python error an executor raised, from a Spark exception's long text."""
    text = str(exc)
    for line in reversed(text.splitlines()):
        line = line.strip()
        if "Error:" in line or "Exception:" in line:
            if not line.startswith(("at ", "org.apache", "py4j")):
                return line
    return text.splitlines()[0] if text else type(exc).__name__
