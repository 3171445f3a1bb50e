"""The one read path: what a reader of a partition may see, for an isolation level and a view.

Every reader of records goes through here: the embedded consumer (``CompactLog.consume``), the snapshot
follower (``SnapshotConsumer``), the CLI, the console and the Spark source. So the rules about what a
reader is handed live in one place:

- the *view*: ``live`` is the log as stored; ``compacted`` is Pulsar's compacted view, the latest record
  per key below the published horizon and the live log from it on (``compaction.reader``);
- the *isolation level*: ``read_uncommitted`` sees every record up to the end asked for.
  ``read_committed`` sees what a Kafka consumer of that level sees: the read ends at the last stable
  offset (the first offset of the oldest open transaction), and the data batches of aborted
  transactions are dropped (a producer's batches from the first offset of an aborted transaction up to
  its ABORT marker, the ranges its ``.txnindex`` entries give). Batches of committed transactions and
  of no transaction pass; control batches stay in the stream (a caller tracking positions steps over
  them). The owner's log and another process's snapshot answer alike (``PartitionView``);
- control batches (transaction markers) are never records a consumer sees, as in Kafka;
- records below the start offset of the batch that holds it are skipped (a batch may start before it);
- every batch is checked (header, and CRC unless the caller opts out as ``check.crcs=false`` does) by the
  storage reader, which raises ``CorruptRecordError`` naming the partition, offset, file and position.

The broker's Fetch forwards stored bytes without decoding (``Partition.locate``); it does not come here.
"""

from __future__ import annotations

import logging
from typing import Iterator

from .errors import CompactLogError, InvalidRequestError, shown
from .records.batch import Record, RecordBatch
from .records.runs import BatchRun
from .storage.transaction_index import AbortedTxn
from .storage.reader import PartitionView
from .storage.snapshot import PartitionSnapshot
from .storage.topics import read_topics

_log = logging.getLogger(__name__)

READ_UNCOMMITTED = "read_uncommitted"
READ_COMMITTED = "read_committed"
ISOLATION_LEVELS = (READ_UNCOMMITTED, READ_COMMITTED)

LIVE = "live"
COMPACTED = "compacted"
VIEWS = (LIVE, COMPACTED)


def open_snapshot(data_dir, topic: str, partition: int) -> PartitionSnapshot:
    """A read-only view of a partition another process may own (its lock is not taken): the segments as
    listed now, opened as a read reaches them. Close it (or use it as a context manager) when done."""
    return PartitionSnapshot.open(data_dir, topic, partition)


def topic_metadata(data_dir) -> dict[str, dict]:
    """The topics of a data directory another process may own (its lock is not taken): per topic name,
    its ``partitions`` (count) and ``config`` (overrides). A missing directory is named, not made."""
    return read_topics(data_dir)


def check_read(isolation: str, view: str) -> None:
    """Refuse an isolation level or view this reader cannot honour, naming it (before any record is read)."""
    if isolation not in ISOLATION_LEVELS:
        raise InvalidRequestError(f"isolation level must be one of {', '.join(ISOLATION_LEVELS)}, got {shown(isolation)}")
    if view not in VIEWS:
        raise InvalidRequestError(f"view must be one of {', '.join(VIEWS)}, got {shown(view)}")


def earliest_offset(log_start_offset: int, view: str) -> int:
    """Where a reader starting from the beginning starts, and the lowest offset it may ask for: offset 0
    for the compacted view, which outlives the live log's retention, else the live log start offset."""
    return 0 if view == COMPACTED else log_start_offset


def read_batches(part: PartitionView, start: int, end: int | None = None, *, isolation: str = READ_UNCOMMITTED,
                 view: str = LIVE, check_crcs: bool = True) -> Iterator[RecordBatch]:
    """Checked batches holding offsets in [start, end) of ``part`` (the owner's log or another process's
    snapshot), control batches included (a caller tracking positions steps over them); for
    read_committed, ending at the last stable offset and without aborted transactions' data."""
    check_read(isolation, view)
    if isolation == READ_COMMITTED:
        lso = part.last_stable_offset
        end = lso if end is None else min(end, lso)
    if view == COMPACTED:
        from .compaction.reader import compacted_batches

        batches = compacted_batches(part, start, end, check_crcs=check_crcs)
    else:
        start = max(start, part.log_start_offset)
        batches = part.batches(start, end, check_crcs=check_crcs)
    if isolation == READ_COMMITTED:
        return committed(batches, part.aborted_txns(start, end) if start < end else [])
    return batches


def read_runs(part: PartitionView, start: int, end: int | None = None, *, isolation: str = READ_UNCOMMITTED,
              view: str = LIVE, check_crcs: bool = True, run_bytes: int = 4 << 20) -> Iterator[BatchRun]:
    """The batches :func:`read_batches` hands out, as runs of batches lying in one buffer (``BatchRun``),
    for bulk readers that decode whole columns (the Spark source). The live log read uncommitted comes
    as the storage reader reads it, with no object per batch; any other view or level goes through
    :func:`read_batches`' rules, its batches copied together into runs of about ``run_bytes``."""
    if isolation == READ_UNCOMMITTED and view == LIVE:
        check_read(isolation, view)
        return part.runs(max(start, part.log_start_offset), end, check_crcs=check_crcs)
    return _as_runs(read_batches(part, start, end, isolation=isolation, view=view, check_crcs=check_crcs), run_bytes)


def _as_runs(batches: Iterator[RecordBatch], run_bytes: int) -> Iterator[BatchRun]:
    group: list[RecordBatch] = []
    size = 0
    try:
        for b in batches:
            group.append(b)
            size += b.size
            if size >= run_bytes:
                yield BatchRun.of(group)
                group, size = [], 0
    except CompactLogError:  # the batches before damage go out first, as read_batches hands them out
        if group:
            yield BatchRun.of(group)
        raise
    if group:
        yield BatchRun.of(group)


def committed(batches: Iterator[RecordBatch], aborted: list[AbortedTxn]) -> Iterator[RecordBatch]:
    """``batches`` less the data batches of the ``aborted`` transactions: a transactional batch of a
    producer whose aborted transaction began at or before it and whose ABORT marker follows it. As a
    Kafka consumer walks a read_committed fetch, with the markers' offsets (which the index holds) ending
    each range, so a committed transaction of the same producer after an abort always passes."""
    pending = sorted(aborted, key=lambda t: t.first_offset)
    i = 0
    open_aborts: dict[int, tuple[int, int]] = {}  # producer id -> (first, marker offset) of its aborted range
    for batch in batches:
        while i < len(pending) and pending[i].first_offset <= batch.last_offset:
            txn = pending[i]
            open_aborts[txn.producer_id] = (txn.first_offset, txn.last_offset)
            i += 1
        if batch.is_transactional and not batch.is_control:
            span = open_aborts.get(batch.producer_id)
            if span is not None:
                if span[0] <= batch.base_offset <= span[1]:
                    continue
                if batch.base_offset > span[1]:
                    del open_aborts[batch.producer_id]
        yield batch


def loadable_batches(batches: Iterator[RecordBatch], topic: str, partition: int,
                     lost: str) -> Iterator[tuple[RecordBatch, list[Record]]]:
    """Each batch of ``batches`` (read with ``check_crcs=False``) with its records, less the batches
    that fail their CRC or whose records do not decode, and up to any damage of the log's structure:
    each logged as an error naming the partition and saying what is ``lost``.

    The load rule of the coordinators' own topics (``__consumer_offsets``, ``__transaction_state``): each
    record there holds a key's whole value, so a later record replaces a damaged one, and a coordinator
    that refused to load over one flipped byte would answer every client COORDINATOR_LOAD_IN_PROGRESS
    for ever. Kafka's coordinators likewise keep what they read before the damage, and serve."""
    where = f"{topic}-{partition}"
    try:
        for batch in batches:
            try:
                if not batch.is_valid():
                    raise CompactLogError("CRC mismatch")
                records = list(batch.records(topic, partition))
            except CompactLogError as exc:
                _log.error("skipping the corrupt batch at offset %d of %s (%s): %s", batch.base_offset, where,
                           exc, lost)
                continue
            yield batch, records
    except CompactLogError as exc:
        _log.error("%s is damaged; loaded from the records before the damage (%s): %s", where, lost, exc)


def records_of(batches: Iterator[RecordBatch], topic: str, partition: int, start: int) -> Iterator[Record]:
    """The records a consumer sees in ``batches``: none from control batches, none below ``start``."""
    for batch in batches:
        if batch.is_control:
            continue
        for rec in batch.records(topic, partition):
            if rec.offset >= start:
                yield rec


def records_below(batches: Iterator[RecordBatch], topic: str, partition: int, start: int) -> int:
    """How many of the records stored in ``batches`` lie below ``start``, where ``records_of`` hides them.

    Retention and DeleteRecords move the log start offset inside a segment, even inside a batch, and
    the files keep what lies below it until the whole segment goes: a count of the stored records
    minus these is the count a consumer can read. Stored counts include control batches' records, so
    these do too. Only a batch holding ``start`` is decoded."""
    n = 0
    for batch in batches:
        if batch.last_offset < start:
            n += batch.record_count
        else:
            n += sum(1 for rec in batch.records(topic, partition) if rec.offset < start)
    return n


def read_records(part: PartitionView, topic: str, partition: int, start: int, end: int | None = None, *,
                 isolation: str = READ_UNCOMMITTED, view: str = LIVE, check_crcs: bool = True) -> Iterator[Record]:
    """Records of [start, end) as a consumer sees them (see the module's rules)."""
    return records_of(read_batches(part, start, end, isolation=isolation, view=view, check_crcs=check_crcs),
                      topic, partition, start)
