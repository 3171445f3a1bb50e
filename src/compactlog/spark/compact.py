"""Distributed log compaction: Kafka's cleaning round, with the offset map built by a Spark shuffle.

The local cleaner maps keys into a fixed buffer; when the dirty section holds more keys than fit, it
cleans up to the last mapped offset and leaves the rest for another round, rereading the whole log each
time. Here the map is a ``groupBy`` over the dirty section, so one pass covers any number of keys. The
steps that touch the storage are ``compactlog.cleaning_round``'s; this module is the Spark job between
them:

1. Plan (driver): ``plan_round`` claims the eligible logs and cuts their segments into groups.
2. Map, where the keys fit (executors): for Kafka's offset strategy, one task per partition builds the
   local cleaner's own offset map of the dirty section in the cleaner's budget (``map_dirty_keys``) and
   stores it for the rewrite tasks. A partition whose keys do not fit goes to step 3 (the map stops
   where it fills, so the dirty section is read less than once more), as do versioned strategies.
3. Map by shuffle (executors + shuffle): keyed records of the dirty sections (``scan_keys``) -> per
   (partition, key) the chosen offset: the highest, or for a versioned ``compaction.strategy`` the
   highest (version, offset); the keyed records of each segment group meet the chosen offset of their key.
4. Rewrite (executors): ``rewrite_group`` filters each group by the cleaner's survival rule into a
   ``.cleaned`` segment in the job's staging directory, the groups in parallel.
5. Swap (driver): ``CleaningRound.adopt`` swaps them in (crash-safe) and advances the cleaner's
   checkpoints; closing the round removes the staging directory, whatever happened.

Where the keys fit, step 2 does what the local cleaner's map phase does, and step 4 spreads its
rewrite over the executors; the shuffle, which costs several times the cleaner's round on one machine,
is for the partitions whose keys the cleaner could only map over several rounds.

Only closed segments below ``first_uncleanable`` are read or replaced, so appends go on meanwhile.
Keys are grouped by their bytes, not by the local map's 128-bit hash (see docs/cleaner.md).
"""

from __future__ import annotations

import time as _time
from typing import Callable

import numpy as np
import pyarrow as pa

from ..cleaning_round import (
    STAT_FIELDS,
    SUPERSEDED,
    CleaningRound,
    CleanResult,
    CompactionJobError,
    PartitionPlan,
    ScanTask,
    map_dirty_keys,
    plan_round,
    rewrite_group,
    scan_keys,
)
from ..records import kernels
from .progress import spark_progress

__all__ = ["CompactionJobError", "compact"]


def scan_arrow(task: ScanTask, versioned: bool) -> list[pa.RecordBatch]:
    """Executor side: (pid, gid, key, offset[, version]) of the keyed records of ``task``'s range."""
    from .arrow import _binary

    out = []
    for found in scan_keys(task, versioned):
        chunk, rows = found.chunk, found.rows
        n = len(rows)
        arrays = [pa.array(np.full(n, task.pid, dtype=np.int32)), pa.array(np.full(n, task.gid, dtype=np.int32)),
                  _binary(chunk, kernels.C_KEY_POS, kernels.C_KEY_LEN, rows), pa.array(chunk.offsets[rows])]
        names = ["pid", "gid", "key", "offset"]
        if versioned:
            arrays.append(pa.array(found.versions))
            names.append("version")
        out.append(pa.RecordBatch.from_arrays(arrays, names=names))
    return out


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
                                          lo, hi, plan.strategy, plan.aborted_in(lo, hi)))
    return tasks


def _scan_frame(spark, tasks: list[ScanTask], versioned: bool):
    """A DataFrame of the keyed records of ``tasks``, one Spark task per ScanTask."""
    schema = "pid int, gid int, key binary, offset long" + (", version long" if versioned else "")

    def run(batches):
        for b in batches:
            for i in b.column("id").to_pylist():
                yield from scan_arrow(tasks[i], versioned)

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


def maps_in_tasks(spark, plans: list[PartitionPlan], path: str, staging) -> dict[int, str]:
    """Step 2: plan id -> the file of its offset map, for each offset-strategy plan whose dirty keys fit
    the local cleaner's budget; one Spark task per partition."""
    pids = [i for i, p in enumerate(plans) if p.strategy == "offset"]
    if not pids:
        return {}

    def run(batches):
        for b in batches:
            ids = b.column("id").to_pylist()
            files = [map_dirty_keys(plans[pids[i]], path, staging) for i in ids]
            yield pa.RecordBatch.from_arrays([pa.array([pids[i] for i in ids], pa.int32()), pa.array(files, pa.string())],
                                             names=["pid", "file"])

    rows = spark.range(0, len(pids), 1, len(pids)).mapInArrow(run, "pid int, file string").collect()
    return {r["pid"]: r["file"] for r in rows if r["file"] is not None}


_OUT_SCHEMA = "gid int, dir string, " + ", ".join(f"{k} long" for k in STAT_FIELDS)
_NONE = np.empty(0, dtype=np.int64)


def _written(gid: int, r: dict) -> pa.Table:
    """A rewrite task's answer: where its cleaned segment is, and its stats."""
    return pa.table({"gid": pa.array([gid], pa.int32()), "dir": pa.array([r["dir"]]),
                     **{k: pa.array([r[k]], pa.int64()) for k in STAT_FIELDS}})


def _rewrite_frame(spark, plans: list[PartitionPlan], path: str, staging, maps: dict[int, str]):
    """The rewrite tasks' answers: the groups of partitions mapped in tasks (``maps``) one task each,
    straight away; the others after the shuffle that brings each its map answers."""
    groups = {g.gid: g for p in plans for g in p.groups}
    map_of_group = {g.gid: maps[pid] for pid in maps for g in plans[pid].groups}
    out = []
    if map_of_group:
        mapped = sorted(map_of_group)

        def run_mapped(batches):
            for b in batches:
                for i in b.column("id").to_pylist():
                    gid = mapped[i]
                    yield from _written(gid, rewrite_group(groups[gid], _NONE, _NONE, staging, map_of_group[gid])).to_batches()

        out.append(spark.range(0, len(mapped), 1, len(mapped)).mapInArrow(run_mapped, _OUT_SCHEMA))
    by_offset = [i for i, p in enumerate(plans) if p.strategy == "offset" and i not in maps]
    versioned = [i for i, p in enumerate(plans) if p.strategy != "offset"]
    if not by_offset and not versioned:
        return out[0]
    frames = [spark.createDataFrame([(gid, -1, -1) for gid in groups if gid not in map_of_group],
                                    "gid int, offset long, mapped long")]
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

    def run(table: pa.Table) -> pa.Table:
        gid = table.column("gid")[0].as_py()
        offs = table.column("offset").to_numpy()
        keep = offs >= 0
        order = np.argsort(offs[keep], kind="stable")
        return _written(gid, rewrite_group(groups[gid], offs[keep][order], table.column("mapped").to_numpy()[keep][order],
                                           staging))

    shuffled = rows.groupBy("gid").applyInArrow(run, _OUT_SCHEMA)
    return shuffled if not out else out[0].unionByName(shuffled)


def compact(spark, cl, topic: str | None = None, progress: Callable[[str], None] = print,
            offset_map: str = "auto") -> list[CleanResult]:
    """Clean every eligible log (of ``topic``) in one Spark job; returns a CleanResult per partition.

    ``offset_map``: ``auto`` builds each partition's map in a task where its keys fit the local
    cleaner's budget (step 2), ``shuffle`` maps every partition by the shuffle (step 3). Both give the
    local cleaner's files."""
    if offset_map not in ("auto", "shuffle"):
        raise ValueError(f"offset_map must be auto or shuffle, not {offset_map!r}")
    if topic is not None:
        cl.partitions_for(topic)  # unknown topic -> UnknownTopicOrPartitionError
    started = _time.monotonic()
    plans = plan_round(cl, topic)
    if not plans:
        progress("nothing to compact: no log is above its min.cleanable.dirty.ratio")
        return []
    ngroups = sum(len(p.groups) for p in plans)
    progress(f"compacting {len(plans)} partition(s), {ngroups} segment group(s) on {spark.sparkContext.master}")

    def cleaned(r: CleanResult) -> None:
        s = r.stats
        progress(f"compacted {r.topic}-{r.partition} (dirty section = [{r.first_dirty}, {r.end_offset})) "
                 f"in {s.elapsed:.1f} s: {s.messages_read:,} -> {s.messages_written:,} messages, "
                 f"{s.bytes_read:,} -> {s.bytes_written:,} bytes")

    with CleaningRound(cl, plans) as job:
        try:
            with spark_progress(spark, "compaction"):
                maps = maps_in_tasks(spark, plans, job.path, job.staging) if offset_map == "auto" else {}
                if maps:
                    progress(f"mapped the keys of {len(maps)} partition(s) in tasks, as the local cleaner maps them")
                rows = _rewrite_frame(spark, plans, job.path, job.staging, maps).collect()
        except Exception as exc:  # an executor failed: its message, without the JVM stack
            raise CompactionJobError(f"the compaction job failed: {_executor_message(exc)}") from None
        map_done = _time.monotonic()
        return job.adopt({r["gid"]: r for r in rows}, started, map_done, cleaned)


def _executor_message(exc: Exception) -> str:
    """The Python error an executor raised, from a Spark exception's long text."""
    text = str(exc)
    for line in reversed(text.splitlines()):
        line = line.strip()
        if "Error:" in line or "Exception:" in line:
            if not line.startswith(("at ", "org.apache", "py4j")):
                return line
    return text.splitlines()[0] if text else type(exc).__name__
