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
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ...errors import CompactLogError, TopicAlreadyExistsError, UnknownTopicOrPartitionError
from ...partition import Partition
from ...records.batch import build_batch
from ..server_config import ServerConfig
from .codes import (
    COORDINATOR_NOT_AVAILABLE,
    INVALID_COMMIT_OFFSET_SIZE,
    KAFKA_STORAGE_ERROR,
    MESSAGE_TOO_LARGE,
    NOT_COORDINATOR,
    RECORD_LIST_TOO_LARGE,
    UNKNOWN_TOPIC_OR_PARTITION,
)
from .group import GroupMetadata, TopicPartition
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


@dataclass
class LoadedGroup:
    """What a replay of ``__consumer_offsets`` found for one group."""

    metadata: GroupMetadataValue | None = None  # the last group metadata record, unless deleted since
    offsets: dict[TopicPartition, OffsetCommitValue] = field(default_factory=dict)


class GroupMetadataManager:
    def __init__(self, cl, config: ServerConfig, on_append: Callable[[], None] = lambda: None) -> None:
        self.cl = cl  # the broker's CompactLog: it holds the topic
        self.config = config
        self.on_append = on_append  # wakes parked fetches (someone may read the topic)
        self._locks: dict[int, asyncio.Lock] = {}
        self._creating = threading.Lock()  # one creator; appenders wait until every partition exists

    # where ---------------------------------------------------------------------------------------
    def partitions(self) -> int:
        """The topic's partition count once it exists (it wins over a changed config, as in Kafka, since
        moving groups between partitions would lose them), else ``offsets.topic.num.partitions``."""
        if self.cl.has_topic(TOPIC):
            return self.cl.partitions_for(TOPIC)
        return self.config.get("offsets.topic.num.partitions")

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.partitions())

    def has_topic(self) -> bool:
        """The topic exists with every partition (its creation registers it before making them)."""
        cl = self.cl
        if not cl.has_topic(TOPIC):
            return False
        try:
            count = cl.partitions_for(TOPIC)
        except UnknownTopicOrPartitionError:  # deleted meanwhile
            return False
        return all(cl.find_partition(TOPIC, p) is not None for p in range(count))

    def ensure_topic(self) -> None:
        """Create the topic unless it exists (blocking). Kafka creates it at the first FindCoordinator;
        the coordinator calls this in the background at a group's first JoinGroup or OffsetCommit, so
        that the first SyncGroup does not wait for 50 partitions to be made."""
        if self.has_topic():
            return
        with self._creating:
            if not self.cl.has_topic(TOPIC):
                self._create()
        with self.cl.admin_lock:  # whoever else is creating it holds this until every partition exists
            pass

    def _create(self) -> None:
        try:
            self.cl.create_topic(TOPIC, self.config.get("offsets.topic.num.partitions"), {
                "cleanup.policy": "compact",
                "segment.bytes": str(self.config.get("offsets.topic.segment.bytes")),
                "compression.type": "producer",
            })
            log.info("created %s with %d partitions", TOPIC, self.cl.partitions_for(TOPIC))
        except TopicAlreadyExistsError:
            pass

    # writing ------------------------------------------------------------------------------------
    def _append(self, partition: int, records: list[Record]) -> None:
        self.ensure_topic()
        now = self.cl.time.milliseconds()
        keys = [k for k, _ in records]
        values = [v for _, v in records]
        batch = build_batch(keys, values, [now] * len(records))
        self.cl.partition(TOPIC, partition).append(batch)

    async def append(self, group_id: str, records: list[Record], apply: Callable[[], None] | None = None) -> None:
        """Append ``records`` to the group's partition as one batch, then ``apply`` (in log order).
        Raises the storage layer's error if the append fails (``apply`` is then not called)."""
        if not records:
            if apply is not None:
                apply()
            return
        partition = self.partition_for(group_id)
        lock = self._locks.setdefault(partition, asyncio.Lock())
        async with lock:
            await asyncio.to_thread(self._append, partition, records)
            if apply is not None:
                apply()
        self.on_append()

    async def store_group(self, group: GroupMetadata, assignment: dict[str, bytes]) -> None:
        """Store the group's current generation with ``assignment`` (member id -> bytes)."""
        value = group.to_record(assignment, self.cl.time.milliseconds())
        await self.append(group.group_id, [(encode_key(GroupMetadataKey(group.group_id)), encode_group_metadata(value))])

    async def store_offsets(self, group_id: str, offsets: dict[TopicPartition, OffsetCommitValue],
                            apply: Callable[[], None]) -> None:
        records = [(encode_key(OffsetCommitKey(group_id, t, p)), encode_offset_commit(v))
                   for (t, p), v in offsets.items()]
        await self.append(group_id, records, apply)

    async def tombstones(self, group_id: str, offsets: Iterable[TopicPartition], group_too: bool) -> None:
        """Null values for deleted offsets (and the group's metadata record when ``group_too``)."""
        records: list[Record] = [(encode_key(OffsetCommitKey(group_id, t, p)), None) for t, p in offsets]
        if group_too:
            records.append((encode_key(GroupMetadataKey(group_id)), None))
        await self.append(group_id, records)

    # loading ------------------------------------------------------------------------------------
    def load(self) -> dict[str, LoadedGroup]:
        """Replay every partition of the topic (blocking: run it in a thread). Later records win and
        tombstones remove, so the result is what compaction would keep. A batch whose CRC fails and a
        record that cannot be read are skipped with a warning, and a partition whose structure is
        damaged is read up to the damage: one bad byte must not make every group unreachable."""
        groups: dict[str, LoadedGroup] = {}
        cl = self.cl
        if not cl.has_topic(TOPIC):
            return groups
        records = 0
        for p in range(cl.partitions_for(TOPIC)):
            latest, offsets = self._latest(cl.partition(TOPIC, p), p)
            records += len(latest)
            for key, value in latest.items():  # one partition holds all of a group's records, in order
                try:
                    self._replay(groups, key, value)
                except CompactLogError as exc:
                    log.warning("skipping the record at offset %d of %s-%d: %s", offsets[key], TOPIC, p, exc)
        log.info("loaded %d groups from %d keys of %s", len(groups), records, TOPIC)
        return {g: v for g, v in groups.items() if v.metadata is not None or v.offsets}

    @staticmethod
    def _latest(part: Partition, p: int) -> tuple[dict[bytes, bytes | None], dict[bytes, int]]:
        """The last value of each key in one partition (and its offset), as raw bytes: only what survives
        is decoded, however many commits the log still holds."""
        latest: dict[bytes, bytes | None] = {}
        offsets: dict[bytes, int] = {}
        try:
            for batch in part.batches(check_crcs=False):
                if batch.is_control:
                    continue
                if not batch.is_valid():
                    log.error("skipping the corrupt batch at offset %d of %s-%d (CRC mismatch): its commits are lost",
                              batch.base_offset, TOPIC, p)
                    continue
                for rec in batch.records(TOPIC, p):
                    if rec.key is not None:
                        latest.pop(rec.key, None)  # keep the dict in the order of each key's last record
                        latest[rec.key] = rec.value
                        offsets[rec.key] = rec.offset
        except CompactLogError as exc:
            log.error("%s-%d is damaged; its groups are loaded from the records before the damage: %s", TOPIC, p, exc)
        return latest, offsets

    @staticmethod
    def _replay(groups: dict[str, LoadedGroup], key_bytes: bytes | None, value: bytes | None) -> None:
        if key_bytes is None:
            return
        key = decode_key(key_bytes)
        if isinstance(key, OffsetCommitKey):
            loaded = groups.setdefault(key.group, LoadedGroup())
            tp = (key.topic, key.partition)
            if value is None:
                loaded.offsets.pop(tp, None)
            else:
                loaded.offsets[tp] = decode_offset_commit(value)
        elif isinstance(key, GroupMetadataKey):
            loaded = groups.setdefault(key.group, LoadedGroup())
            loaded.metadata = None if value is None else decode_group_metadata(value)


def store_error(exc: BaseException) -> int:
    """The error a client gets when its group or offsets could not be stored (Kafka's mapping):
    too large -> INVALID_COMMIT_OFFSET_SIZE, a failed disk -> NOT_COORDINATOR, a missing partition ->
    COORDINATOR_NOT_AVAILABLE (all but the first are retriable), anything else its own code."""
    code = exc.code if isinstance(exc, CompactLogError) else -1
    if code in (MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE):
        return INVALID_COMMIT_OFFSET_SIZE
    if code == KAFKA_STORAGE_ERROR:
        return NOT_COORDINATOR
    if code == UNKNOWN_TOPIC_OR_PARTITION:
        return COORDINATOR_NOT_AVAILABLE
    return code
