"""Recompression of stored history to another codec, one closed segment at a time.

Kafka only compresses new data; this rewrites what is already stored. Each task reads one closed
segment read-only and writes ``<base>.log.cleaned`` in the job's staging directory
(``storage/staging.py``) with every batch recompressed (records, offsets, timestamps and header facts
unchanged). The side that holds the data directory checks that each segment is still the one planned,
moves the rewritten one beside it and swaps it in with the log's crash-safe ``replace_segments``. The
active segment is not touched, so appends go on meanwhile.

:func:`recompress` plans, hands the tasks to a runner and swaps; :func:`recompress_local` runs them one
after another in the calling thread (the web console's job, where the broker owns the data directory
and no Spark runs); ``compactlog.spark.recompress`` runs them as Spark tasks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .cleaner.cleaner import READ_BUFFER_BYTES
from .errors import CompactLogError
from .records.codecs import Codec, check_level, codec_from_name
from .storage.segment import SegmentParams
from .storage.staging import JobStaging


class RecompressionError(CompactLogError):
    """A recompression job failed; nothing was swapped for the segment it names."""


@dataclass(frozen=True)
class SegmentTask:
    path: str
    topic: str
    partition: int
    base_offset: int
    size: int
    codec: int
    level: int | None
    params: SegmentParams  # the topic's index settings (a read-only segment knows only defaults)


@dataclass(frozen=True)
class SegmentResult:
    topic: str
    partition: int
    base_offset: int
    bytes_before: int
    bytes_after: int
    batches: int
    dir: str  # the task's directory in the job's staging directory


def rewrite_segment(task: SegmentTask, staging: JobStaging) -> SegmentResult:
    """One task (on a Spark executor, or in this process): the segment at ``task.base_offset`` rewritten
    into a ``.cleaned`` file."""
    from .records.batch import RecordBatch, with_codec
    from .records.columns import chunks
    from .storage.rewrite import write_cleaned
    from .storage.snapshot import PartitionSnapshot

    codec = Codec(task.codec)
    with PartitionSnapshot.open(task.path, task.topic, task.partition) as snap:
        src = snap.segment_at(task.base_offset)
        if src is None:
            raise RecompressionError(f"segment {task.base_offset} of {task.topic}-{task.partition} was replaced "
                                     f"during the job")
        count = [0]

        def out():
            for group in chunks((b for _, b in src.batches(0)), READ_BUFFER_BYTES):
                rows = []
                for b in group:
                    b.ensure_valid()  # recompressing gives a fresh CRC: damage must stop here, not be sealed in
                    data = with_codec(b, codec, task.level)
                    rows.append((data, RecordBatch(data).max_timestamp, b.last_offset))
                count[0] += len(rows)
                yield rows

        where = staging.new_dir()
        # every batch stays, markers too: the segment's aborted transactions stay indexed as they were
        dest, written = write_cleaned(where, task.base_offset, task.params, out(), src.last_modified_ms,
                                      txn_entries=src.txn_index.all_aborted_txns)
        dest.close_handlers()
        return SegmentResult(task.topic, task.partition, task.base_offset, src.size, dest.size, count[0], str(where))


Runner = Callable[[list[SegmentTask], JobStaging], list[SegmentResult]]  # the tasks' results, in their order


def recompress_local(cl, topic: str, compression: str, level: int | None = None,
                     progress: Callable[[str], None] = print,
                     on_segment: Callable[[int, int], None] = lambda done, total: None) -> list[SegmentResult]:
    """The same rewrite one segment after another in the calling thread (the web console's job, where
    the broker owns the data directory and no Spark runs); ``on_segment(done, total)`` after each."""
    def here(tasks: list[SegmentTask], staging: JobStaging) -> list[SegmentResult]:
        results = []
        for t in tasks:
            results.append(rewrite_segment(t, staging))
            on_segment(len(results), len(tasks))
        return results

    return recompress(cl, topic, compression, level, here, "in this process", progress)


def recompress(cl, topic: str, compression: str, level: int | None, run: Runner, where: str,
               progress: Callable[[str], None]) -> list[SegmentResult]:
    """Plan one task per closed segment, ``run`` them (``where`` names where, for ``progress``), swap each
    result in (crash-safe) unless its segment changed meanwhile. A bad codec or level is refused before
    anything is planned."""
    codec = codec_from_name(compression)
    check_level(codec, level)
    n = cl.manager.partitions_for(topic)
    tasks = []
    for p in range(n):
        lg = cl.log(topic, p)
        for seg in lg.segments[:-1]:
            if seg.size:
                tasks.append(SegmentTask(str(cl.manager.dir), topic, p, seg.base_offset, seg.size, int(codec), level,
                                         lg.segment_params()))
    if not tasks:
        progress(f"{topic}: no closed segments to recompress")
        return []
    progress(f"{topic}: recompressing {len(tasks)} segment(s) to {codec.config_name} {where}")
    staging = JobStaging.begin(cl.manager.dir)
    try:
        with cl.cleaner.paused([(topic, p) for p in range(n)]):  # no cleaning round swaps these meanwhile
            results = run(tasks, staging)
            for r, t in zip(results, tasks):
                # a segment changed since planning (or now active) is kept as it is
                cl.log(topic, r.partition).adopt_cleaned(r.base_offset, [(t.base_offset, t.size)], Path(r.dir))
    finally:
        staging.remove()  # what was not swapped, and what tasks killed with a failed job left
    before = sum(r.bytes_before for r in results)
    after = sum(r.bytes_after for r in results)
    progress(f"{topic}: {before:,} bytes -> {after:,} bytes ({100 * (1 - after / max(before, 1)):.1f}% smaller)")
    return results
