"""Offsets committed inside transactions: TxnOffsetCommit, and the markers that end them.

Kafka's classic coordinator (``GroupCoordinator.handleTxnCommitOffsets`` and the transactional half of
``GroupMetadataManager``) in our words. A transactional producer that consumed from a group sends the
group's offsets with TxnOffsetCommit; they are written to ``__consumer_offsets`` at once, as a
transactional batch of that producer, but held *pending* in the group, per producer id: OffsetFetch
does not return them, and answers UNSTABLE_OFFSET_COMMIT where the client asks for stable offsets. When
the transaction ends, the transaction coordinator writes a COMMIT or ABORT marker into the group's
``__consumer_offsets`` partition through ``write_txn_marker``, which then makes the producer's offsets
in that partition's groups the committed ones (each unless a later record committed another offset
for the partition) or drops them. ``manager.py`` replays the same rules at start.

The request is checked in Kafka's order: the coordinator's state (``check``), then that the group's
offsets partition is in the producer's transaction (the transaction coordinator's
``verify_offsets_in_transaction``; a broker without one accepts, having nothing to check against), then
the member: a producer that names its consumer's member id, generation or instance id (v3, KIP-447) is
fenced as an OffsetCommit would be, so that a zombie that lost its partitions cannot commit for them.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Mapping
from typing import Any

from ...errors import CompactLogError, InvalidProducerEpochError, ProducerFencedError
from .codes import (
    COORDINATOR_NOT_AVAILABLE,
    FENCED_INSTANCE_ID,
    ILLEGAL_GENERATION,
    NONE,
    OFFSET_METADATA_TOO_LARGE,
    UNKNOWN_MEMBER_ID,
)
from .group import GroupMetadata, TopicPartition
from .manager import commit_error, store_error
from .offsets import Coordinator
from ...group_records import OffsetCommitValue
from .state import DEAD, EMPTY

log = logging.getLogger(__name__)

TRANSACTIONS = "transactions"  # the broker's extras entry of the transaction coordinator
INVALID_PRODUCER_EPOCH, PRODUCER_FENCED = InvalidProducerEpochError.code, ProducerFencedError.code


class TxnOffsetManager:
    def __init__(self, coordinator: Coordinator, extras: Mapping[str, Any]) -> None:
        self.c = coordinator
        self.extras = extras  # the broker's: the transaction coordinator is found there when it is needed
        self.producer_groups: dict[int, set[str]] = {}  # producer id -> groups holding its pending offsets

    def loaded(self, group: GroupMetadata) -> None:
        """A group came from the replay: remember the producers with offsets pending in it."""
        for pid in group.pending_txn_offsets:
            self.producer_groups.setdefault(pid, set()).add(group.group_id)

    async def commit(self, group_id: str, transactional_id: str, producer_id: int, producer_epoch: int,
                     member_id: str, instance_id: str | None, generation: int,
                     offsets: dict[TopicPartition, OffsetCommitValue]) -> dict[TopicPartition, int]:
        """TxnOffsetCommit: the error per partition, NONE once the offsets are in the log (pending)."""
        def every(code: int) -> dict[TopicPartition, int]:
            return dict.fromkeys(offsets, code)
        try:
            self.c.check(group_id)
        except CompactLogError as exc:
            return every(exc.code)
        group = self.c.groups.get(group_id)
        if group is None:  # Kafka makes the group here, whatever the generation: the member check decides
            group = self.c.groups[group_id] = GroupMetadata(group_id, self.c.now())
        code = await self._verify(transactional_id, producer_id, producer_epoch, group_id)
        if code:
            return every(code)
        code = member_error(group, generation, member_id, instance_id)
        if code:
            return every(code)
        results: dict[TopicPartition, int] = {}
        valid = {}
        for tp, value in offsets.items():
            if len(value.metadata) > self.c.max_metadata:
                results[tp] = OFFSET_METADATA_TOO_LARGE
            else:
                valid[tp] = value
        if not valid:
            return results
        group.prepare_txn_offsets(producer_id, valid)
        self.producer_groups.setdefault(producer_id, set()).add(group_id)

        def appended(position: int) -> None:
            if not group.is_(DEAD):
                group.txn_offsets_appended(producer_id, valid, position)

        async def store() -> None:
            try:
                await self.c.store.store_offsets(group_id, valid, appended, (producer_id, producer_epoch))
            except BaseException:
                if not group.is_(DEAD):
                    group.txn_offsets_failed(producer_id, valid)
                    if producer_id not in group.pending_txn_offsets:
                        self._forget(producer_id, group_id)
                raise

        try:
            await asyncio.shield(self.c.spawn(store()))
            code = NONE
        except (CompactLogError, OSError) as exc:
            log.warning("storing transactional offsets of group %s (producer %d) failed: %s", group_id, producer_id, exc)
            code = store_error(exc)
        results.update(dict.fromkeys(valid, code))
        return results

    async def _verify(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str) -> int:
        """The transaction coordinator's word that the group's offsets partition is in this producer's
        ongoing transaction (AddOffsetsToTxn), with its errors converted as Kafka converts an offset
        commit's. NONE on a broker without a transaction coordinator."""
        service = self.extras.get(TRANSACTIONS)
        verify = getattr(service, "verify_offsets_in_transaction", None)
        if verify is None:
            return NONE
        code = verify(transactional_id, producer_id, producer_epoch, group_id)
        if inspect.isawaitable(code):
            code = await code
        if code == PRODUCER_FENCED:  # as Kafka's verification of a partition answers a fenced producer
            return INVALID_PRODUCER_EPOCH
        return commit_error(int(code))

    async def write_txn_marker(self, offsets_partition: int, producer_id: int, producer_epoch: int, commit: bool,
                               coordinator_epoch: int) -> None:
        """End the producer's transaction in ``__consumer_offsets`` partition ``offsets_partition``: the
        marker goes into the log (``Partition.write_txn_marker``), then the producer's pending offsets of
        that partition's groups are committed or dropped. Waits until the replay at start is done (the
        replay must not miss the marker nor apply it twice). Raises the storage layer's error when the
        marker cannot be written (the offsets then stay pending), and ``CoordinatorNotAvailableError``
        when the coordinator stops first."""
        await self.c.wait_loaded()

        def complete(_marker_offset: int) -> None:
            for group_id in list(self.producer_groups.get(producer_id, ())):
                if self.c.store.partition_for(group_id) != offsets_partition:
                    continue
                group = self.c.groups.get(group_id)
                if group is not None and not group.is_(DEAD):
                    group.complete_txn(producer_id, commit)
                self._forget(producer_id, group_id)
        await self.c.store.write_marker(offsets_partition, producer_id, producer_epoch, commit, coordinator_epoch,
                                        complete)

    def _forget(self, producer_id: int, group_id: str) -> None:
        groups = self.producer_groups.get(producer_id)
        if groups is not None:
            groups.discard(group_id)
            if not groups:
                del self.producer_groups[producer_id]


def member_error(group: GroupMetadata, generation: int, member_id: str, instance_id: str | None) -> int:
    """Kafka's check of a transactional offset commit against the group. A producer naming no member
    (TxnOffsetCommit v0-2, or v3 without a consumer group's metadata) may commit into any group; one
    that names a member, an instance or a generation must be the current one of each."""
    if group.is_(DEAD):
        return COORDINATOR_NOT_AVAILABLE
    if generation < 0 and group.is_(EMPTY):
        return NONE
    if generation < 0 and not member_id and instance_id is None:
        return NONE
    if instance_id is not None:
        current = group.static_members.get(instance_id)
        if current is None:
            return UNKNOWN_MEMBER_ID
        if current != member_id:
            return FENCED_INSTANCE_ID
    if not group.has(member_id):
        return UNKNOWN_MEMBER_ID
    if generation != group.generation_id:
        return ILLEGAL_GENERATION
    return NONE

