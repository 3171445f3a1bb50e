"""The ``compactlog`` PySpark data source: batch and streaming reads, batch and streaming appends.

Reads never take the data directory's lock: each task opens its partition read-only, so Spark can read
while a compactlog process writes and cleans. Appends are staged by the tasks (batches built and
compressed on the executors) and appended by the driver at commit, in task order, through the normal
validated append path (``compactlog.staged_appends``); an aborted job leaves nothing behind.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from ..reading import READ_UNCOMMITTED, open_snapshot
from .arrow import KAFKA_COLUMNS, kafka_columns, kafka_schema_ddl, read_partition
from .options import OptionError, SourceOptions


MIN_PIECE_BYTES = 4 << 20  # the smallest piece a read is cut into by default (see plan_ranges)


@dataclass
class PartitionRange(InputPartition):
    """One Spark partition: offsets [start, end) of one topic-partition."""

    path: str
    topic: str
    partition: int
    start: int
    end: int
    include_headers: bool
    read_compacted: bool
    check_crcs: bool
    isolation: str
    columns: tuple[str, ...] | None

    def __init__(self, path, topic, partition, start, end, include_headers, read_compacted=False,  # InputPartition takes a value
                 check_crcs=True, isolation=READ_UNCOMMITTED, columns=None):
        super().__init__((topic, partition, start, end))
        self.path, self.topic, self.partition = path, topic, partition
        self.start, self.end, self.include_headers = start, end, include_headers
        self.read_compacted, self.check_crcs, self.isolation = read_compacted, check_crcs, isolation
        self.columns = columns

    def read(self) -> Iterator[pa.RecordBatch]:
        return read_partition(self.path, self.topic, self.partition, self.start, self.end, self.include_headers,
                              read_compacted=self.read_compacted, check_crcs=self.check_crcs,
                              isolation=self.isolation, columns=self.columns)


def read_range(partition: PartitionRange | InputPartition) -> Iterator[pa.RecordBatch]:
    """A planned range's rows. A read with nothing to read (an empty topic, a range that ends where it
    starts) was planned as no range, for which Spark hands the reader one empty ``InputPartition``."""
    if isinstance(partition, PartitionRange):
        yield from partition.read()


def columns_of(schema: StructType | None, include_headers: bool) -> tuple[str, ...] | None:
    """The columns asked for, in their order (None: all of them): a caller's ``.schema(...)``, or the
    columns a query reads when the format's columnar reader (``java/ColumnarSource.java``) pruned them.
    Each must be one of the Kafka source's columns with its type."""
    full = kafka_columns(include_headers)
    if schema is None:
        return None
    names = [f.name for f in schema.fields]
    if names == full:
        return None
    for f in schema.fields:
        if f.name not in full or f.dataType.simpleString() != KAFKA_COLUMNS[f.name][1]:
            wanted = ", ".join(f"{n} {KAFKA_COLUMNS[n][1]}" for n in full)
            raise OptionError(f"a schema given to the compactlog source may name only its columns, with their "
                              f"types ({wanted}); {f.name!r} {f.dataType.simpleString()} is not one of them")
    if len(set(names)) != len(names):
        raise OptionError(f"a schema given to the compactlog source names a column twice: {', '.join(names)}")
    return tuple(names)


def plan_ranges(opts: SourceOptions, ends: dict[tuple[str, int], int] | None = None,
                starts: dict[tuple[str, int], int] | None = None,
                columns: tuple[str, ...] | None = None) -> list[PartitionRange]:
    """One range per topic-partition, split at segment boundaries when it exceeds maxPartitionBytes;
    then, with ``minPartitions``, cut further into pieces as Spark's Kafka source cuts them. With
    neither option, the pieces are as many as the task slots, but none smaller than about
    ``MIN_PIECE_BYTES`` (Spark's file sources split no finer than their 4 MB open cost either)."""
    spans: list[tuple[str, int, int, int]] = []
    read_bytes = 0  # the stored bytes of the ranges, estimated from their share of each partition's offsets
    for topic in opts.topics:
        for p in range(opts.partitions[topic]):
            with open_snapshot(opts.path, topic, p) as snap:
                lo, hi = snap.log_start_offset, opts.end_of(snap)
                start = starts[(topic, p)] if starts else opts.start_for(topic, p, lo, hi)
                end = ends[(topic, p)] if ends else opts.end_for(topic, p, lo, hi)
                if start >= end:
                    continue
                cuts, acc, total = [start], 0, 0
                for base, size in snap.sizes():
                    if start < base < end and acc >= opts.max_partition_bytes and not opts.read_compacted:
                        cuts.append(base)
                        acc = 0
                    acc += size
                    total += size
                cuts.append(end)
                spans += [(topic, p, a, b) for a, b in zip(cuts, cuts[1:]) if a < b]
                read_bytes += total * (end - start) // max(hi - lo, end - start, 1)
    wanted = opts.min_partitions
    if wanted is None and opts.slots:
        wanted = min(opts.slots, max(1, read_bytes // MIN_PIECE_BYTES))
    if wanted and not opts.read_compacted:
        spans = min_partitions(spans, wanted)
    return [PartitionRange(opts.path, topic, p, a, b, opts.include_headers, opts.read_compacted, opts.check_crcs,
                           opts.isolation, columns) for topic, p, a, b in spans]


def min_partitions(spans: list[tuple[str, int, int, int]], wanted: int) -> list[tuple[str, int, int, int]]:
    """``spans`` (topic, partition, start, end) cut into about ``wanted`` pieces when there are fewer, as
    Spark's Kafka source does for minPartitions: each span into its share of the offsets times
    ``wanted`` pieces, rounded half up (at least one), each piece the offsets left divided by the pieces
    left. A cut may fall inside a batch: each task reads the batches holding its offsets and hands out
    only those."""
    total = sum(b - a for _, _, a, b in spans)
    if len(spans) >= wanted or total == 0:
        return spans
    out = []
    for topic, p, a, b in spans:
        parts = max(math.floor((b - a) / total * wanted + 0.5), 1)
        remaining, at = b - a, a
        for part in range(parts):
            size = remaining // (parts - part)
            remaining -= size
            if size:
                out.append((topic, p, at, at + size))
            at += size
    return out


class CompactLogReader(DataSourceReader):
    def __init__(self, options: dict[str, str], schema: StructType | None = None) -> None:
        self.opts = SourceOptions.parse(options)
        self.columns = columns_of(schema, self.opts.include_headers)

    def partitions(self) -> list[PartitionRange]:
        return plan_ranges(self.opts, columns=self.columns)

    def read(self, partition: PartitionRange) -> Iterator[pa.RecordBatch]:
        yield from read_range(partition)


class CompactLogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are JSON like Spark's Kafka source: {"topic": {"0": next offset, ...}}."""

    def __init__(self, options: dict[str, str], schema: StructType | None = None) -> None:
        self.opts = SourceOptions.parse(options, streaming=True)
        self.columns = columns_of(schema, self.opts.include_headers)
        self.target: dict[tuple[str, int], int] | None = None

    def prepareForTriggerAvailableNow(self) -> None:
        """availableNow: what exists now is the whole query; later appends wait for the next one."""
        self.target = self._ends()

    def _ends(self) -> dict[tuple[str, int], int]:
        if self.target is not None:
            return dict(self.target)
        out = {}
        for t in self.opts.topics:
            for p in range(self.opts.partitions[t]):
                with open_snapshot(self.opts.path, t, p) as snap:
                    out[(t, p)] = self.opts.end_of(snap)  # the LSO for read_committed
        return out

    def initialOffset(self) -> dict:
        out: dict[str, dict[str, int]] = {}
        for t in self.opts.topics:
            for p in range(self.opts.partitions[t]):
                with open_snapshot(self.opts.path, t, p) as snap:
                    out.setdefault(t, {})[str(p)] = self.opts.start_for(t, p, snap.log_start_offset, self.opts.end_of(snap))
        return out

    def getDefaultReadLimit(self):
        from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

        cap = self.opts.max_offsets_per_trigger
        return ReadMaxRows(cap) if cap else ReadAllAvailable()

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:
        """The end of the next micro-batch: everything available, or at most ``maxOffsetsPerTrigger``
        offsets spread over partitions by backlog, as the engine's read limit says."""
        from pyspark.sql.streaming.datasource import ReadMaxRows

        ends = self._ends()
        cap = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        if cap and start:
            # spread the cap over partitions in proportion to their backlog, as Spark's Kafka source does
            backlog = {k: max(0, e - int(start.get(k[0], {}).get(str(k[1]), e))) for k, e in ends.items()}
            total = sum(backlog.values())
            if total > cap:
                ends = {k: int(start[k[0]][str(k[1])]) + (backlog[k] * cap) // total for k in ends}
        out: dict[str, dict[str, int]] = {}
        for (t, p), e in ends.items():
            out.setdefault(t, {})[str(p)] = e
        return out

    def partitions(self, start: dict, end: dict) -> list[PartitionRange]:
        flat = lambda d: {(t, int(p)): int(o) for t, ps in d.items() for p, o in ps.items()}  # noqa: E731
        return plan_ranges(self.opts, ends=flat(end), starts=flat(start), columns=self.columns)

    def read(self, partition: PartitionRange) -> Iterator[pa.RecordBatch]:
        yield from read_range(partition)

    def commit(self, end: dict) -> None:
        pass


@dataclass
class StagedBatches(WriterCommitMessage):
    files: list[str]
    directory: str = ""  # the staging directory of the writer the task ran (see _remove_staging)


class _StagingWriter:
    """What batch and streaming writes share: options parsed on the driver (which creates the staging
    directory), tasks that build, validate and stage batches."""

    def __init__(self, options: dict[str, str], overwrite: bool) -> None:
        from .writer import WriteOptions

        self.wopts = WriteOptions.parse(options, overwrite, self._group(options))

    def _group(self, options: dict[str, str]) -> str | None:
        return None

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedBatches:
        from .writer import stage_batches

        return StagedBatches(stage_batches(self.wopts, iterator), self.wopts.staging.directory)

    def _remove_staging(self, messages: list[StagedBatches | None]) -> None:
        """Remove this writer's staging directory and those the tasks staged in. They differ for a
        stream: Spark makes a new writer for each micro-batch's tasks and another to commit or abort it,
        each with a directory of its own."""
        from ..staged_appends import discard

        theirs = {m.directory for m in messages if m is not None and m.directory}
        for directory in sorted(theirs - {self.wopts.staging.directory}):
            discard(directory)
        self.wopts.staging.remove()


class CompactLogWriter(_StagingWriter, DataSourceArrowWriter):
    """``df.write``: the job's tasks stage batches, the driver appends them all at commit or none."""

    def commit(self, messages: list[StagedBatches]) -> None:
        from .writer import append_staged

        try:
            append_staged(self.wopts, _files(messages))
        finally:
            self._remove_staging(messages)

    def abort(self, messages: list[StagedBatches]) -> None:
        self._remove_staging(messages)  # also the files of killed tasks, which send no message


class ProducedBatchesWriter(CompactLogWriter):
    """``df.write`` whose tasks' batches the format's JVM side built (``compactlog.spark.produced``): made
    on the driver with the plan the JVM asked for, its tasks validate and stage whole batches."""

    def __init__(self, options: dict[str, str], overwrite: bool, schema: StructType, plan: str) -> None:
        """``plan``: where the JVM side reads the plan from."""
        from .produced import check_schema, plan_text

        check_schema(schema)
        super().__init__(options, overwrite)
        try:
            with open(plan, "w", encoding="utf-8") as f:
                f.write(plan_text(self.wopts))
        except BaseException:
            self.wopts.staging.remove()
            raise

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedBatches:
        from .produced import stage_produced

        return StagedBatches(stage_produced(self.wopts, iterator), self.wopts.staging.directory)


class CompactLogStreamWriter(_StagingWriter, DataSourceStreamArrowWriter):
    """``df.writeStream``: each micro-batch is staged by its tasks and appended at its commit.

    Delivery is at least once, as with Spark's Kafka sink: a query restarted after a failure between
    a micro-batch's append and Spark's commit log entry appends that micro-batch again. Spark makes a
    writer for each micro-batch's tasks and another to commit or abort it; all of them stage in one
    group directory named after the query's checkpoint location, which the commit or abort removes
    whole, so a task whose commit message an abort never received leaves nothing behind either.
    """

    def _group(self, options: dict[str, str]) -> str | None:
        """The query's staging group, named after its checkpoint location (one active query a
        checkpoint): every writer Spark makes for the query stages in it."""
        import hashlib

        checkpoint = {k.lower(): v for k, v in options.items()}.get("checkpointlocation")
        if not checkpoint:
            return None
        return "stream-" + hashlib.sha256(os.path.abspath(checkpoint).encode()).hexdigest()[:24]

    def commit(self, messages: list[StagedBatches], batchId: int) -> None:
        from .writer import append_staged

        try:
            append_staged(self.wopts, _files(messages))
        finally:
            self._remove_all(messages)

    def abort(self, messages: list[StagedBatches], batchId: int) -> None:
        self._remove_all(messages)

    def _remove_all(self, messages: list[StagedBatches | None]) -> None:
        """After a micro-batch, what every writer of the query staged: its tasks have all ended (a commit
        comes after the last; an abort's late tasks then find no directory and stage nothing) and the
        next micro-batch's writer is made after this one ends."""
        group = self.wopts.staging.group()
        if group is None:  # no checkpoint location: the directories the messages name, and this one
            self._remove_staging(messages)
        else:
            group.remove()


def _files(messages: list[StagedBatches | None]) -> list[str]:
    return [f for m in messages if m is not None for f in m.files]


class CompactLogDataSource(DataSource):
    """``spark.read.format("compactlog").option("path", dir).option("subscribe", topics)``."""

    @classmethod
    def name(cls) -> str:
        return "compactlog"

    def schema(self) -> str:
        headers = self.options.get("includeHeaders", self.options.get("includeheaders", "false"))
        return kafka_schema_ddl(str(headers).lower() == "true")

    def reader(self, schema: StructType) -> CompactLogReader:
        return CompactLogReader(dict(self.options), schema)

    def streamReader(self, schema: StructType) -> CompactLogStreamReader:
        return CompactLogStreamReader(dict(self.options), schema)

    def writer(self, schema: StructType, overwrite: bool) -> CompactLogWriter:
        from .produced import PLAN_OPTION

        plan = {k.lower(): v for k, v in self.options.items()}.get(PLAN_OPTION)
        if plan is not None:  # the JVM side builds the batches
            return ProducedBatchesWriter(dict(self.options), overwrite, schema, plan)
        return CompactLogWriter(dict(self.options), overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> CompactLogStreamWriter:
        return CompactLogStreamWriter(dict(self.options), overwrite)
