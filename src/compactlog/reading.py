"""The one read path: what a reader of a partition may see, for an isolation level and a view.

Every reader of records goes through here: the embedded consumer (``CompactLog.consume``), the snapshot
follower (``SnapshotConsumer``), the CLI, the console and the Spark source. So the rules about what a
reader is handed live in one place:

- the *view*: ``live`` is the log as stored; ``compacted`` is Pulsar's compacted view, the latest record
  per key below the published horizon and the live log from it on (``compaction.reader``);
- the *isolation level*: ``read_uncommitted`` sees every record up to the end asked for.
  ``read_committed`` needs the transaction state that arrives with transactions; until then it is refused
  by name rather than served as if it were ``read_uncommitted``;
- control batches (transaction markers) are never records a consumer sees, as in Kafka;
- records below the start offset of the batch that holds it are skipped (a batch may start before it);
- every batch is checked (header, and CRC unless the caller opts out as ``check.crcs=false`` does) by the
  storage reader, which raises ``CorruptRecordError`` naming the partition, offset, file and position.

The broker's Fetch forwards stored bytes without decoding (``Partition.locate``); it does not come here.
"""

from __future__ import annotations

from typing import Iterator

from .errors import InvalidRequestError, shown
from .records.batch import Record, RecordBatch
from .storage.reader import PartitionView
from .storage.snapshot import PartitionSnapshot
from .storage.topics import read_topics

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
    if isolation == READ_COMMITTED:
        raise InvalidRequestError("isolation level read_committed needs transactions, which this data directory "
                                  "does not keep yet; read with read_uncommitted")
    if view not in VIEWS:
        raise InvalidRequestError(f"view must be one of {', '.join(VIEWS)}, got {shown(view)}")


def earliest_offset(log_start_offset: int, view: str) -> int:
    """Where a reader starting from the beginning starts, and the lowest offset it may ask for: offset 0
    for the compacted view, which outlives the live log's retention, else the live log start offset."""
    return 0 if view == COMPACTED else log_start_offset


def read_batches(part: PartitionView, start: int, end: int | None = None, *, isolation: str = READ_UNCOMMITTED,
                 view: str = LIVE, check_crcs: bool = True) -> Iterator[RecordBatch]:
    """Checked batches holding offsets in [start, end) of ``part`` (the owner's log or another process's
    snapshot), control batches included (a caller tracking positions steps over them)."""
    check_read(isolation, view)
    if view == COMPACTED:
        from .compaction.reader import compacted_batches

        return compacted_batches(part, start, end, check_crcs=check_crcs)
    return part.batches(max(start, part.log_start_offset), end, check_crcs=check_crcs)


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
