"""``__consumer_offsets`` for the coordinator: appends of group and offset records, and the replay at start.

Kafka's ``GroupMetadataManager`` has the same job. The topic is an ordinary compacted topic of the data
directory, created the first time something must be stored, with Kafka's settings for it:
``offsets.topic.num.partitions`` partitions, ``cleanup.policy=compact``, ``segment.bytes`` from
``offsets.topic.segment.bytes`` and ``compression.type=producer``. Records are written uncompressed,
Kafka's default (``offsets.topic.compression.codec=none``): they are small and few. The log cleaner
that runs in the background of ``serve`` compacts it like any other topic, so only the latest record of
each key (and tombstones, for ``delete.retention.ms``) survive.

Every write is one batch (atomic: all the offsets of one commit, or none) appended through the embedded
API's ``Partition.append`` in a worker thread. Appends to one partition are serialised, and the coordinator's
in-memory view is updated (``apply``) under the same lock right after the append returns, so the memory
and the log see the writes in the same order. Only then is the client answered: a commit is
acknowledged once it is in the log (one node: Kafka's acks=all).

Transactions (TxnOffsetCommit) write their offsets as a transactional batch of the producer (its id and
epoch, the transactional bit); the transaction's end is a COMMIT or ABORT marker that the transaction
coordinator has written here (``write_marker``, through ``Partition.write_txn_marker``). The replay
keeps a transaction's offsets aside until its marker: applied at COMMIT (unless a later record of the
partition committed another offset), dropped at ABORT, still pending when no marker has come yet.
Kafka's coordinator numbers its transactional batches with base sequence 0 and skips the producer's
sequence checks for its own appends; here they continue the producer's sequence in this partition, so
that the one append path checks them like any idempotent batch (``_sequence``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ...errors import CompactLogError, OutOfOrderSequenceError
from ...partition import Partition
from ...reading import READ_UNCOMMITTED, loadable_batches
from ...records.batch import BatchInfo, build_batch
from ...records.control import read_control_record
from ..coordinator_topic import CoordinatorTopic
from ..server_config import ServerConfig
from .codes import (
    COORDINATOR_NOT_AVAILABLE,
    INVALID_COMMIT_OFFSET_SIZE,
    KAFKA_STORAGE_ERROR,
    MESSAGE_TOO_LARGE,
    NOT_COORDINATOR,
    NOT_ENOUGH_REPLICAS,
    RECORD_LIST_TOO_LARGE,
    UNKNOWN_TOPIC_OR_PARTITION,
)
from .group import GroupMetadata, PendingTxnOffset, TopicPartition
from ...group_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_group_metadata,
    decode_key,
    decode_offset_commit,
    encode_group_metadata,
    encode_key,
    encode_offset_commit,
    partition_for,
)

log = logging.getLogger(__name__)

TOPIC = "__consumer_offsets"
Record = tuple[bytes, bytes | None]  # key, value (None: tombstone)
SEQUENCES = 1 << 31  # a producer's sequence numbers wrap from 2^31 - 1 to 0
# Kafka's codes without a typed error here (no fetch sizes, leaders or replicas to lack on one node)
INVALID_FETCH_SIZE, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS_AFTER_APPEND = 4, 6, 20


@dataclass
class LoadedGroup:
    """What a replay of ``__consumer_offsets`` found for one group."""

    metadata: GroupMetadataValue | None = None  # the last group metadata record, unless deleted since
    offsets: dict[TopicPartition, OffsetCommitValue] = field(default_factory=dict)
    positions: dict[TopicPartition, int] = field(default_factory=dict)  # each offset's record in the log
    pending: dict[int, dict[TopicPartition, PendingTxnOffset]] = field(default_factory=dict)  # by producer id


class GroupMetadataManager(CoordinatorTopic):
    """The group coordinator's ``__consumer_offsets``: made at the first group's need (Kafka makes it at the
    first FindCoordinator; the coordinator makes it in the background at a group's first JoinGroup or
    OffsetCommit, so that the first SyncGroup does not wait for 50 partitions to be made)."""

    TOPIC = TOPIC
    PARTITIONS_SETTING = "offsets.topic.num.partitions"
    SEGMENT_BYTES_SETTING = "offsets.topic.segment.bytes"
    COMPRESSION_TYPE = "producer"

    def __init__(self, cl, config: ServerConfig, on_append: Callable[[], None] = lambda: None) -> None:
        super().__init__(cl, config)
        self.on_append = on_append  # wakes parked fetches (someone may read the topic)
        self._locks: dict[int, asyncio.Lock] = {}
        # (partition, producer id) -> (epoch, next sequence) of the transactional batches written here
        self._sequences: dict[tuple[int, int], tuple[int, int]] = {}

    # where ---------------------------------------------------------------------------------------
    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.partitions())

    # writing ------------------------------------------------------------------------------------
    def _append(self, partition: int, records: list[Record], producer: tuple[int, int] | None = None) -> int:
        """Append one batch; ``producer`` (id, epoch) makes it a transactional batch of that producer.
        Returns the offset of its first record."""
        self.ensure_topic()
        now = self.cl.time.milliseconds()
        keys = [k for k, _ in records]
        values = [v for _, v in records]
        part = self.cl.partition(TOPIC, partition)
        if producer is None:
            return part.append(build_batch(keys, values, [now] * len(records))).first_offset
        pid, epoch = producer
        for attempt in (1, 2):
            info = BatchInfo(producer_id=pid, producer_epoch=epoch, base_sequence=self._sequence(part, partition, pid, epoch),
                             is_transactional=True)
            try:
                result = part.append(build_batch(keys, values, [now] * len(records), info=info))
            except OutOfOrderSequenceError:
                self._sequences.pop((partition, pid), None)  # someone else wrote for it: ask the log again
                if attempt == 2:
                    raise
                continue
            if result.duplicate:  # the log took it for a retry of an earlier batch: nothing was written
                self._sequences.pop((partition, pid), None)
                if attempt == 2:
                    raise OutOfOrderSequenceError(f"the transactional offsets of producer {pid} could not be "
                                                  f"numbered after its last batch in {TOPIC}-{partition}")
                continue
            self._sequences[(partition, pid)] = (epoch, (info.base_sequence + len(records)) % SEQUENCES)
            return result.first_offset
        raise AssertionError("unreachable")

    def _sequence(self, part: Partition, partition: int, pid: int, epoch: int) -> int:
        """The base sequence of the producer's next batch here: after its last one in the same epoch, 0
        in a new epoch (or for a producer this partition does not know)."""
        known = self._sequences.get((partition, pid))
        if known is None:  # the partition's producer state knows (it survives restarts)
            known = next(((p.producer_epoch, (p.last_sequence + 1) % SEQUENCES) for p in part.producers()
                          if p.producer_id == pid), (-1, 0))
        stored_epoch, next_seq = known
        return next_seq if stored_epoch == epoch else 0

    async def append(self, group_id: str, records: list[Record], apply: Callable[[int], None] | None = None,
                     producer: tuple[int, int] | None = None) -> None:
        """Append ``records`` to the group's partition as one batch, then ``apply`` its first offset (in
        log order). ``producer`` (id, epoch): a transaction's batch. Raises the storage layer's error if the
        append fails (``apply`` is then not called)."""
        if not records:
            if apply is not None:
                apply(-1)
            return
        partition = self.partition_for(group_id)
        lock = self._locks.setdefault(partition, asyncio.Lock())
        async with lock:
            position = await asyncio.to_thread(self._append, partition, records, producer)
            if apply is not None:
                apply(position)
        self.on_append()

    async def write_marker(self, partition: int, producer_id: int, producer_epoch: int, commit: bool,
                           coordinator_epoch: int, apply: Callable[[int], None]) -> int:
        """Append the end of a producer's transaction to ``partition`` (``Partition.write_txn_marker``),
        then ``apply`` its offset, in log order with every other write here. Returns the marker's offset."""
        lock = self._locks.setdefault(partition, asyncio.Lock())

        def write() -> int:
            self.ensure_topic()
            return self.cl.partition(TOPIC, partition).write_txn_marker(producer_id, producer_epoch, commit,
                                                                         coordinator_epoch)
        async with lock:
            offset = await asyncio.to_thread(write)
            apply(offset)
        self.on_append()
        return offset

    async def store_group(self, group: GroupMetadata, assignment: dict[str, bytes]) -> None:
        """Store the group's current generation with ``assignment`` (member id -> bytes)."""
        value = group.to_record(assignment, self.cl.time.milliseconds())
        await self.append(group.group_id, [(encode_key(GroupMetadataKey(group.group_id)), encode_group_metadata(value))])

    async def store_offsets(self, group_id: str, offsets: dict[TopicPartition, OffsetCommitValue],
                            apply: Callable[[int], None], producer: tuple[int, int] | None = None) -> None:
        """``apply`` gets the offset of the batch's first record; ``producer`` (id, epoch) for a
        transaction's offsets."""
        records = [(encode_key(OffsetCommitKey(group_id, t, p)), encode_offset_commit(v))
                   for (t, p), v in offsets.items()]
        await self.append(group_id, records, apply, producer)

    async def tombstones(self, group_id: str, offsets: Iterable[TopicPartition], group_too: bool) -> None:
        """Null values for deleted offsets (and the group's metadata record when ``group_too``)."""
        records: list[Record] = [(encode_key(OffsetCommitKey(group_id, t, p)), None) for t, p in offsets]
        if group_too:
            records.append((encode_key(GroupMetadataKey(group_id)), None))
        await self.append(group_id, records)

    # loading ------------------------------------------------------------------------------------
    def load(self) -> dict[str, LoadedGroup]:
        """Replay every partition of the topic (blocking: run it in a thread). Later records win and
        tombstones remove, so the result is what compaction would keep; a transaction's offsets count
        from its COMMIT marker on (see the module's docstring). A batch whose CRC fails and a record that
        cannot be read are skipped with a warning, and a partition whose structure is damaged is read up
        to the damage: one bad byte must not make every group unreachable."""
        groups: dict[str, LoadedGroup] = {}
        cl = self.cl
        if not cl.has_topic(TOPIC):
            return groups
        records = 0
        for p in range(cl.partitions_for(TOPIC)):
            found = self._latest(cl.partition(TOPIC, p), p)
            records += len(found.latest)
            for key, value in found.latest.items():  # one partition holds all of a group's records, in order
                try:
                    self._replay(groups, key, value, found.offsets[key])
                except CompactLogError as exc:
                    log.warning("skipping the record at offset %d of %s-%d: %s", found.offsets[key], TOPIC, p, exc)
            for pid, pending in found.pending.items():
                for key, (value, position) in pending.items():
                    try:
                        self._replay_pending(groups, pid, key, value, position)
                    except CompactLogError as exc:
                        log.warning("skipping the record at offset %d of %s-%d: %s", position, TOPIC, p, exc)
        log.info("loaded %d groups from %d keys of %s", len(groups), records, TOPIC)
        return {g: v for g, v in groups.items() if v.metadata is not None or v.offsets or v.pending}

    @staticmethod
    def _latest(part: Partition, p: int) -> _Replayed:
        """The last value of each key in one partition (and its offset), as raw bytes: only what survives
        is decoded, however many commits the log still holds. Transactional offset commits wait, by
        producer, for their marker: a COMMIT makes them the latest values (unless a later record of the
        key already is), an ABORT drops them; those without a marker are returned apart."""
        found = _Replayed()
        latest, offsets, pending = found.latest, found.offsets, found.pending
        # every batch up to the log end: open transactions' offsets and the markers that end them
        for batch, records in loadable_batches(part.batches(isolation=READ_UNCOMMITTED, check_crcs=False), TOPIC, p,
                                               "its commits are lost"):
            if batch.is_control:
                try:
                    marker = read_control_record(batch)
                except CompactLogError as exc:
                    log.warning("skipping the control batch at offset %d of %s-%d: %s", batch.base_offset, TOPIC, p, exc)
                    continue
                if marker is None or not marker.is_end_txn_marker:
                    continue
                ended = pending.pop(batch.producer_id, {})
                if marker.is_commit:
                    for key, (value, position) in ended.items():
                        if latest.get(key) is None or offsets[key] < position:  # Kafka's olderThan
                            latest.pop(key, None)
                            latest[key] = value
                            offsets[key] = position
                continue
            transactional = batch.is_transactional
            for rec in records:
                if rec.key is None:
                    continue
                if transactional and _is_offset_key(rec.key):
                    mine = pending.setdefault(batch.producer_id, {})
                    if rec.value is None:
                        mine.pop(rec.key, None)
                    else:
                        mine[rec.key] = (rec.value, rec.offset)
                    continue
                latest.pop(rec.key, None)  # keep the dict in the order of each key's last record
                latest[rec.key] = rec.value
                offsets[rec.key] = rec.offset
        return found

    @staticmethod
    def _replay(groups: dict[str, LoadedGroup], key_bytes: bytes | None, value: bytes | None, position: int) -> None:
        if key_bytes is None:
            return
        key = decode_key(key_bytes)
        if isinstance(key, OffsetCommitKey):
            loaded = groups.setdefault(key.group, LoadedGroup())
            tp = (key.topic, key.partition)
            if value is None:
                loaded.offsets.pop(tp, None)
                loaded.positions.pop(tp, None)
            else:
                loaded.offsets[tp] = decode_offset_commit(value)
                loaded.positions[tp] = position
        elif isinstance(key, GroupMetadataKey):
            loaded = groups.setdefault(key.group, LoadedGroup())
            loaded.metadata = None if value is None else decode_group_metadata(value)

    @staticmethod
    def _replay_pending(groups: dict[str, LoadedGroup], producer_id: int, key_bytes: bytes, value: bytes,
                        position: int) -> None:
        """An offset of a transaction whose marker is not in the log yet: pending in its group."""
        key = decode_key(key_bytes)
        if isinstance(key, OffsetCommitKey):
            loaded = groups.setdefault(key.group, LoadedGroup())
            loaded.pending.setdefault(producer_id, {})[(key.topic, key.partition)] = PendingTxnOffset(
                decode_offset_commit(value), position)


@dataclass
class _Replayed:
    """One partition replayed: the last value of each key and its record's offset, and by producer id
    the transactional offset commits (value, offset) still waiting for their marker."""

    latest: dict[bytes, bytes | None] = field(default_factory=dict)
    offsets: dict[bytes, int] = field(default_factory=dict)
    pending: dict[int, dict[bytes, tuple[bytes, int]]] = field(default_factory=dict)


def _is_offset_key(key: bytes) -> bool:
    """An offset commit's key (versions 0 and 1), the only records a transaction holds back."""
    return len(key) >= 2 and key[0] == 0 and key[1] in (0, 1)


def store_error(exc: BaseException) -> int:
    """The error a client gets when its group or offsets could not be stored (``commit_error`` of the
    storage layer's code; -1, UNKNOWN_SERVER_ERROR, for anything that is not a compactlog error)."""
    return commit_error(exc.code if isinstance(exc, CompactLogError) else -1)


def commit_error(code: int) -> int:
    """Kafka's conversion of an error met while storing offsets (``maybeConvertOffsetCommitError``):
    too large -> INVALID_COMMIT_OFFSET_SIZE, a failed disk or a lost leadership -> NOT_COORDINATOR, a
    missing partition or too few replicas -> COORDINATOR_NOT_AVAILABLE (all but the first are
    retriable), anything else unchanged."""
    if code in (MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, INVALID_FETCH_SIZE):
        return INVALID_COMMIT_OFFSET_SIZE
    if code in (KAFKA_STORAGE_ERROR, NOT_LEADER_OR_FOLLOWER):
        return NOT_COORDINATOR
    if code in (UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS, NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        return COORDINATOR_NOT_AVAILABLE
    return code
