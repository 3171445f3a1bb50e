"""The embedded Python API: open a data directory, administer topics, produce and consume.

::

    import compactlog

    with compactlog.open("data") as cl:
        cl.create_topic("latest-product-price", config={"cleanup.policy": "compact"})
        cl.produce("latest-product-price", b"10", key=b"p3")
        cl.produce_batch("latest-product-price", [(b"p5", b"7"), (b"p3", b"11")], compression="zstd")
        for rec in cl.consume("latest-product-price", from_beginning=True):
            print(rec.offset, rec.key, rec.value)

Each method is one call into the storage layer; the CLI commands are thin shells over these methods.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator, Mapping, Sequence

from .clock import SYSTEM, Time
from .compaction.state import remove_unpublished
from .errors import InvalidRecordError, InvalidRequestError, UnknownTopicOrPartitionError, shown
from .reading import COMPACTED, LIVE, READ_COMMITTED, READ_UNCOMMITTED, check_read, earliest_offset, read_records
from .records import kernels
from .records.batch import NO_TIMESTAMP, Record, build_batch
from .storage.broker_config import BrokerConfig
from .storage.log_config import LogConfig
from .storage.log import Log
from .storage.manager import LogManager
from .storage.topics import PartitionInfo, TopicDescription
from .storage.validator import ValidatedAppend
from .partition import Partition

if TYPE_CHECKING:
    import numpy as np

    from .cleaner.cleaner import IoObserver
    from .cleaner.log_cleaner import CleanResult, LogCleaner
    from .compaction.service import CompactionService, CompactionStatus
    from .compaction.state import CompactionState
    from .producer import BuiltInPartitioner, ProducerPlan

Headers = Sequence[tuple[str, bytes | None]]

# Kafka's batch.size default, compactlog.producer.DEFAULT_BATCH_BYTES (a test holds the two equal): written
# out here because the producer (numpy, the codecs) is imported only when something is produced, so that
# opening a directory to read does not load it.
DEFAULT_BATCH_BYTES = 16384


@dataclass(frozen=True)
class RecordMetadata:
    """Where a produced record (or the first record of a produced run) was stored."""

    topic: str
    partition: int
    offset: int
    timestamp: int


@dataclass(frozen=True)
class CleanReport:
    """What ``clean`` did: segments deleted by retention per partition, each compaction round, and the
    partitions whose cleaning failed, with why (they stay uncleanable until reopened, as in KIP-346)."""

    deleted_segments: dict[tuple[str, int], int]
    compactions: list[CleanResult]
    failed: dict[tuple[str, int], str] = field(default_factory=dict)


@dataclass(frozen=True)
class AppendResult:
    """What one ``produce_batch`` stored in one partition."""

    partition: int
    first_offset: int
    last_offset: int
    batches: int


def open(data_dir: str | os.PathLike[str], config: Mapping[str, str] | str | os.PathLike[str] | None = None,
         *, time: Time = SYSTEM, background: bool = False) -> "CompactLog":  # noqa: A001 - mirrors sqlite3.connect
    """Open (creating if needed, recovering if it crashed) a data directory."""
    return CompactLog(data_dir, config, time=time, background=background)


class CompactLog:
    """A data directory with its topics. Use as a context manager, or call :meth:`close`."""

    def __init__(self, data_dir: str | os.PathLike[str],
                 config: BrokerConfig | Mapping[str, str] | str | os.PathLike[str] | None = None,
                 *, time: Time = SYSTEM, background: bool = False) -> None:
        if isinstance(config, BrokerConfig):
            broker = config
        elif isinstance(config, (str, os.PathLike)):
            broker = BrokerConfig.from_file(Path(config))
        else:
            broker = BrokerConfig(dict(config or {}))
        self.time = time
        self.manager = LogManager(data_dir, broker, time)
        self._cleaner: LogCleaner | None = None
        self._compaction: CompactionService | None = None
        for lg in list(self.manager.logs.values()):  # side logs a killed compaction left unpublished
            remove_unpublished(lg.dir)
        self._partitioners: dict[str, BuiltInPartitioner] = {}
        self._plans: dict[tuple, ProducerPlan] = {}
        self._names_by_id: dict[str, str] = {}
        if background:
            self.manager.start_background()
            self.cleaner.start()
            self.compaction.start()

    # The cleaner and the compaction service are built on first use: a process that only reads or writes
    # (a CLI command, a consumer) does not pay for importing and setting them up.
    @property
    def cleaner(self) -> "LogCleaner":
        if self._cleaner is None:
            from .cleaner.log_cleaner import LogCleaner

            self._cleaner = LogCleaner(self.manager, self.time)
        return self._cleaner

    @property
    def compaction(self) -> "CompactionService":
        if self._compaction is None:
            from .compaction.service import CompactionService

            self._compaction = CompactionService(self.manager, self.time)
        return self._compaction

    # admin --------------------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int | None = None, config: Mapping[str, str] | None = None) -> TopicDescription:
        return self.manager.create_topic(name, partitions, {k: str(v) for k, v in (config or {}).items()})

    def check_new_topic(self, name: str, partitions: int | None = None, config: Mapping[str, str] | None = None) -> int:
        """Every check :meth:`create_topic` makes, creating nothing (CreateTopics' validate_only); returns
        the partition count the topic would get."""
        return self.manager.check_new_topic(name, partitions, {k: str(v) for k, v in (config or {}).items()})[0]

    def create_partitions(self, name: str, count: int, validate_only: bool = False) -> TopicDescription | None:
        """Grow a topic to ``count`` partitions (Kafka's createPartitions; only growth). ``validate_only``
        checks and changes nothing (returns None)."""
        return self.manager.add_partitions(name, count, validate_only)

    def delete_records(self, topic: str, partition: int, offset: int, checkpoint: bool = True) -> int:
        """Kafka's deleteRecords: records before ``offset`` (-1: the high watermark) are gone for readers;
        returns the partition's new log start offset (its low watermark). ``checkpoint=False`` leaves the
        checkpoint that makes the move survive a crash to the caller (one :meth:`checkpoint` after many)."""
        return self.manager.delete_records(topic, partition, offset, checkpoint=checkpoint)

    def checkpoint(self) -> None:
        """Write every partition's recovery point and log start offset now (Kafka's checkpoint files)."""
        self.manager.checkpoint()

    def check_name_free(self, name: str) -> None:
        """A legal topic name that no topic has, nor one differing only by '.' against '_'
        (``InvalidTopicError``, ``TopicAlreadyExistsError``): CreateTopics checks it before anything else."""
        self.manager.check_name_free(name)

    def delete_topic(self, name: str) -> None:
        self.manager.delete_topic(name)

    def list_topics(self) -> list[str]:
        return self.manager.list_topics()

    def describe_topic(self, name: str) -> TopicDescription:
        return self.manager.describe_topic(name)

    def alter_topic_config(self, name: str, set: Mapping[str, str] | None = None,  # noqa: A002 - kafka-configs' words
                           delete: Sequence[str] | None = None, validate_only: bool = False) -> LogConfig:
        """Set and remove topic overrides; the logs and the cleaner use the new config at once.
        ``validate_only``: the config it would be, with nothing changed."""
        return self.manager.alter_topic_config(name, {k: str(v) for k, v in (set or {}).items()}, list(delete or []),
                                               validate_only)

    def truncate(self, topic: str, partition: int, offset: int) -> bool:
        """Remove every record at or after ``offset`` from one partition (cleaning pauses meanwhile)."""
        return self.manager.truncate(topic, partition, offset)

    def log(self, topic: str, partition: int = 0) -> Log:
        """The partition's Log, for lower-level work (raw reads, appends of built batches)."""
        return self.manager.get_log(topic, partition)

    # the seam the broker, the console, the CLI and Spark use ----------------------------------------
    def partition(self, topic: str, partition: int) -> Partition:
        """One partition (see :mod:`compactlog.partition`); ``UnknownTopicOrPartitionError`` when there is none."""
        return Partition(topic, partition, self.manager.get_log(topic, partition))

    def find_partition(self, topic: str, partition: int) -> Partition | None:
        """One partition, or None when this data directory has none by that name (the broker's hot path:
        no exception for a client asking about a partition that is not there)."""
        lg = self.manager.logs.get((topic, partition))
        return None if lg is None else Partition(topic, partition, lg)

    def partitions(self) -> list[Partition]:
        """Every partition held open, in no promised order."""
        return [Partition(t, p, lg) for (t, p), lg in list(self.manager.logs.items())]

    def partitions_for(self, topic: str) -> int:
        """The topic's partition count; ``UnknownTopicOrPartitionError`` when there is no such topic."""
        return self.manager.partitions_for(topic)

    def has_topic(self, topic: str) -> bool:
        return topic in self.manager.topics

    def topic_id(self, topic: str) -> str | None:
        """The id in the topic's ``partition.metadata`` (Kafka's text of a UUID); None for no such topic."""
        meta = self.manager.topics.get(topic)
        return None if meta is None else meta["topic_id"]

    def topic_with_id(self, topic_id: str) -> str | None:
        """The name of the topic whose id is ``topic_id`` (Fetch v13+ names topics by id, every fetch), or
        None. A remembered name is checked against the live topics, so a deleted topic is never named."""
        name = self._names_by_id.get(topic_id)
        if name is None or (self.manager.topics.get(name) or {}).get("topic_id") != topic_id:
            self._names_by_id = {m["topic_id"]: n for n, m in list(self.manager.topics.items())}
            name = self._names_by_id.get(topic_id)
        return name

    def topic_config(self, topic: str) -> LogConfig:
        """The topic's effective config (its overrides over the broker's defaults)."""
        return self.manager.log_config(topic)

    @property
    def data_dir(self) -> Path:
        return self.manager.dir

    @property
    def admin_lock(self):
        """Held while topics are created, deleted or altered: a caller that must see no such change
        between two steps (a check, then a write) holds it across both."""
        return self.manager.lock

    # produce ------------------------------------------------------------------------------------
    def partition_for(self, topic: str, key: bytes | None) -> int:
        """Kafka's default partitioner: murmur2 of the key; a keyless record goes to the topic's sticky
        partition (KIP-794: chosen at random, changed once batch.size bytes went to it)."""
        if key is None:
            return self._partitioner(topic).sticky_partition()
        return kernels.partition_for_keys([key], self.manager.partitions_for(topic))[0]

    def _partitioner(self, topic: str) -> BuiltInPartitioner:
        """The topic's partitioner, kept from call to call as a long-lived producer keeps it."""
        n = self.manager.partitions_for(topic)
        part = self._partitioners.get(topic)
        if part is None or part.partitions != n:
            from .producer import BuiltInPartitioner  # on first use: a reader never loads the producer

            part = self._partitioners[topic] = BuiltInPartitioner(n)
        return part

    def _plan(self, topic: str, compression: str, level: int | None, batch_bytes: int) -> ProducerPlan:
        """The producer plan for these settings, kept while the topic's config and partitions stay (a
        per-record ``produce`` would otherwise rebuild it every time)."""
        part = self._partitioner(topic)
        config = self.manager.get_log(topic, 0).config
        key = (topic, compression, level, batch_bytes)
        held = self._plans.get(key)
        if held is None or held.config is not config or held.partitioner is not part:
            from .producer import ProducerPlan

            held = self._plans[key] = ProducerPlan.of(topic, config, part, compression, level, batch_bytes)
        return held

    def _check_partition(self, topic: str, partition: int) -> None:
        n = self.manager.partitions_for(topic)
        if not _is_int(partition):
            raise InvalidRequestError(f"partition must be an int, got {type(partition).__name__}")
        if not 0 <= partition < n:
            raise UnknownTopicOrPartitionError(f"Partition {partition} of topic {shown(topic)} does not exist (the topic has {n}).")

    def produce(self, topic: str, value: bytes | None, key: bytes | None = None, *, partition: int | None = None,
                timestamp: int | None = None, headers: Headers | None = None, compression: str = "none",
                level: int | None = None) -> RecordMetadata:
        """Append one record (one batch of one record, as a producer with linger.ms=0 sends it).

        The batch is built in the codec the topic stores (see :mod:`compactlog.producer`); a record
        that cannot fit the topic's ``max.message.bytes`` or ``segment.bytes`` raises
        ``RecordTooLargeError`` or ``RecordBatchTooLargeError``."""
        from .producer import check_record

        check_record(key, value, headers, timestamp)
        if partition is not None:
            self._check_partition(topic, partition)
        plan = self._plan(topic, compression, level, DEFAULT_BATCH_BYTES)
        ts = self.time.milliseconds() if timestamp is None else timestamp
        batch = build_batch([key], [value], [ts], headers=[headers] if headers else None, codec=plan.codec,
                            level=plan.level)
        if partition is None:  # only a keyless record's size matters (the sticky partition counts bytes)
            if key is not None:
                size = 0
            else:
                from .producer import one_record_size  # loaded by _plan above

                size = one_record_size(key, value, headers)
            p = plan.partitioner.partition_one(key, size, plan.batch_bytes)
        else:
            p = partition
        v = self.manager.get_log(topic, p).append(plan.single(p, batch))
        return RecordMetadata(topic, p, v.first_offset, v.max_timestamp if v.log_append_time >= 0 else ts)

    def produce_batch(self, topic: str, records: Iterable[tuple], *, partition: int | None = None,
                      compression: str = "none", level: int | None = None, timestamp: int | None = None,
                      batch_bytes: int = DEFAULT_BATCH_BYTES) -> list[AppendResult]:
        """Append many records, split by partition and into batches of up to ``batch_bytes``.

        ``records`` holds (key, value) or (key, value, headers) tuples. Keys pick partitions with
        murmur2 unless ``partition`` is given; keyless records go to the sticky partition. No batch is
        larger than the topic's ``max.message.bytes`` or ``segment.bytes``; every batch is built
        before any is appended, so a record too large for them (``RecordTooLargeError``,
        ``RecordBatchTooLargeError``) leaves the topic as it was. Returns one result per partition
        written.
        """
        rows = list(records)
        if not rows:
            return []
        from .producer import check_record, naming_bad_record, record_sizes_of

        if timestamp is not None:
            check_record(None, None, None, timestamp)
        if not _is_int(batch_bytes) or batch_bytes < 0:
            raise InvalidRequestError(f"batch_bytes must be an int >= 0, got {batch_bytes!r}")
        for i, r in enumerate(rows):
            if not isinstance(r, (tuple, list)) or not 2 <= len(r) <= 3:
                raise InvalidRecordError(f"record {i} must be a (key, value) or (key, value, headers) tuple, got {r!r:.80}")
        if partition is not None:
            self._check_partition(topic, partition)
        plan = self._plan(topic, compression, level, batch_bytes)
        import numpy as np  # here, not at the top: a process that only reads need not load it

        keys = [r[0] for r in rows]
        values = [r[1] for r in rows]
        headers = [r[2] if len(r) > 2 else () for r in rows] if any(len(r) > 2 and r[2] for r in rows) else None
        ts = self.time.milliseconds() if timestamp is None else timestamp
        with naming_bad_record(rows):
            sizes = record_sizes_of(keys, values, headers)
            if partition is not None:
                parts = np.full(len(rows), partition, dtype=np.int64)
            else:
                parts = plan.partition(keys, sizes)
            planned = []  # every batch built before the first is appended
            whole = len(np.unique(parts)) == 1
            for p in np.unique(parts).tolist():
                idx = np.arange(len(rows)) if whole else np.flatnonzero(parts == p)
                ks, vs = (keys, values) if whole else (_pick(keys, idx), _pick(values, idx))
                hs = None if headers is None else headers if whole else _pick(headers, idx)

                def build(s: int, e: int, ks=ks, vs=vs, hs=hs) -> bytes:
                    return build_batch(ks[s:e], vs[s:e], [ts] * (e - s), headers=None if hs is None else hs[s:e],
                                       codec=plan.codec, level=plan.level)

                planned.append((p, list(plan.batches(p, sizes[idx], build, idx.tolist()))))
        results = []
        for p, batches in planned:
            lg = self.manager.get_log(topic, p)
            first = last = -1
            for batch in batches:
                v = lg.append(batch)
                first = v.first_offset if first < 0 else first
                last = v.last_offset
            results.append(AppendResult(p, first, last, len(batches)))
        return results

    def append_batch(self, topic: str, partition: int, batch: bytes) -> ValidatedAppend:
        """Append a batch the caller built (offsets assigned here); the fastest way in."""
        if not isinstance(batch, (bytes, bytearray, memoryview)):
            raise InvalidRecordError(f"batch must be bytes (a v2 record batch), got {type(batch).__name__}")
        self._check_partition(topic, partition)
        return self.manager.get_log(topic, partition).append(batch)

    # consume ------------------------------------------------------------------------------------
    def consume(self, topic: str, partition: int | None = None, *, from_beginning: bool = False,
                offset: int | None = None, timestamp: int | None = None, max_records: int | None = None,
                read_compacted: bool = False, check_crcs: bool = True,
                isolation_level: str = READ_UNCOMMITTED) -> Iterator[Record]:
        """Records up to the current end of the log, partition by partition.

        Start position: ``offset`` (one partition), the first record at or after ``timestamp``, the
        beginning, or (default, as a new Kafka consumer with auto.offset.reset=latest) the end.
        ``read_compacted``: the compacted view (see :meth:`compact_topic`): below its horizon the latest
        record per key, from the horizon on the live log; ``from_beginning`` starts at offset 0 then,
        since the compacted view outlives the live log's retention. ``check_crcs`` (Kafka's consumer
        setting, on by default): every batch read is verified, and a corrupt one raises
        ``CorruptRecordError`` naming the partition, offset, file and position. ``isolation_level``:
        Kafka's consumer setting; what each level sees is ``compactlog.reading``'s rule.
        """
        n = self.manager.partitions_for(topic)
        if partition is not None:
            self._check_partition(topic, partition)
        for name, v in (("offset", offset), ("timestamp", timestamp), ("max_records", max_records)):
            if v is not None and not _is_int(v):
                raise InvalidRequestError(f"{name} must be an int, got {type(v).__name__}")
        if max_records is not None and max_records < 1:
            raise InvalidRequestError(f"max_records must be at least 1, got {max_records}")
        parts = range(n) if partition is None else [partition]
        if offset is not None and partition is None and n > 1:
            raise InvalidRequestError("an explicit offset needs a partition")
        view = COMPACTED if read_compacted else LIVE
        check_read(isolation_level, view)
        return self._consume(topic, parts, from_beginning, offset, timestamp, max_records, view, check_crcs,
                             isolation_level)

    def _consume(self, topic: str, parts: Iterable[int], from_beginning: bool, offset: int | None,
                 timestamp: int | None, left: int | None, view: str, check_crcs: bool,
                 isolation_level: str) -> Iterator[Record]:
        for p in parts:
            lg = self.manager.get_log(topic, p)
            if view == COMPACTED and offset is not None and 0 <= offset < lg.log_start_offset:
                start = offset  # the compacted view still holds offsets retention removed from the live log
            else:
                start = self._start_offset(lg, from_beginning, offset, timestamp, view)
            for rec in read_records(lg, topic, p, start, lg.log_end_offset, isolation=isolation_level, view=view,
                                    check_crcs=check_crcs):
                yield rec
                if left is not None:
                    left -= 1
                    if left <= 0:
                        return

    def _start_offset(self, lg: Log, from_beginning: bool, offset: int | None, timestamp: int | None,
                      view: str = LIVE) -> int:
        if offset is not None:
            if not lg.log_start_offset <= offset <= lg.log_end_offset:
                from .errors import OffsetOutOfRangeError

                raise OffsetOutOfRangeError(
                    f"offset {offset} is out of range for {lg.name} ({lg.log_start_offset}..{lg.log_end_offset})"
                )
            return offset
        if timestamp is not None:
            found = lg.offset_for_timestamp(timestamp)
            return lg.log_end_offset if found is None else found[1]
        return earliest_offset(lg.log_start_offset, view) if from_beginning else lg.log_end_offset

    def beginning_offsets(self, topic: str) -> dict[int, int]:
        return {p: self.manager.get_log(topic, p).log_start_offset for p in range(self.manager.partitions_for(topic))}

    def end_offsets(self, topic: str, isolation_level: str = READ_UNCOMMITTED) -> dict[int, int]:
        """Per partition, where a consumer of ``isolation_level`` reads up to (Kafka's ``endOffsets``): the
        log end offset, or for read_committed the last stable offset."""
        check_read(isolation_level, LIVE)
        n = self.manager.partitions_for(topic)
        if isolation_level == READ_COMMITTED:
            return {p: self.partition(topic, p).last_stable_offset for p in range(n)}
        return {p: self.manager.get_log(topic, p).log_end_offset for p in range(n)}

    # housekeeping -------------------------------------------------------------------------------
    def clean(self, topic: str | None = None, on_io: IoObserver | None = None) -> CleanReport:
        """Housekeeping now: retention for every log, then log compaction of every compacted log
        that is eligible (dirty ratio above ``min.cleanable.dirty.ratio`` or forced by
        ``max.compaction.lag.ms``), round after round until none is. ``on_io(log, phase, bytes)``
        hears how far the cleaning has got."""
        if topic is not None:
            self.manager.partitions_for(topic)
        deleted = self.manager.run_retention(topic)
        cleaned = self.cleaner.clean_now(topic, on_io=on_io)
        if cleaned:
            self.manager.checkpoint()
        failed = {tp: why for tp, why in self.cleaner.manager.uncleanable.items() if topic is None or tp[0] == topic}
        return CleanReport(deleted, cleaned, failed)

    # Pulsar-style compaction ----------------------------------------------------------------------
    def compact_topic(self, topic: str, partition: int | None = None,
                      on_io: IoObserver | None = None) -> dict[int, CompactionState | None]:
        """Build the compacted view now (two-phase, beside the untouched log); per partition the
        published state, or None when nothing was appended since the last run. ``on_io(log, phase,
        bytes)`` hears how far each run has got."""
        n = self.manager.partitions_for(topic)
        parts = range(n) if partition is None else [partition]
        for p in parts:
            self._check_partition(topic, p)
        outcomes = self.compaction.compact_many([(topic, p) for p in parts], on_io)
        for outcome in outcomes.values():  # every partition had its run; the first failure is reported
            if isinstance(outcome, BaseException):
                raise outcome
        return {p: outcomes[(topic, p)] for p in parts}

    def compaction_status(self, topic: str) -> list[CompactionStatus]:
        """Per partition: NOT_RUN / RUNNING / SUCCESS / ERROR, and the published horizon and figures."""
        return [self.compaction.status(topic, p) for p in range(self.manager.partitions_for(topic))]

    def flush(self) -> None:
        self.manager.flush()

    def close(self) -> None:
        if self._compaction is not None:
            self._compaction.shutdown()
        if self._cleaner is not None:
            self._cleaner.shutdown()
        self.manager.close()

    def __enter__(self) -> "CompactLog":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _pick(items: list, idx: np.ndarray) -> list:
    return [items[i] for i in idx.tolist()]


__all__ = ["AppendResult", "CleanReport", "CompactLog", "RecordMetadata", "open", "NO_TIMESTAMP",
           "PartitionInfo", "TopicDescription"]  # the results describe_topic and Partition.describe give
