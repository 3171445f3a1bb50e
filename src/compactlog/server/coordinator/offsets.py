"""Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete, their expiry, and DeleteGroups.

Kafka's ``OffsetMetadataManager`` in its own words: a group's committed offsets live in its
``GroupMetadata`` and in ``__consumer_offsets``. A commit is validated against the group (a client that
only stores offsets commits with generation -1 into an Empty or unknown group; a member must name its
current generation), then appended as one batch and applied to memory in log order, and only then
acknowledged. Deletions write tombstones; a group left Empty with no offsets is dead, and its metadata
record gets a tombstone too. Expiry (``offsets.retention.minutes``) follows ``GroupMetadata.expired_offsets``.

The manager reaches the coordinator only through ``Coordinator``, the members of ``GroupCoordinator``
it uses: the coordinator builds the manager and hands itself in, so this module need not import the
coordinator's, which imports this one.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from ...errors import CompactLogError
from .codes import (
    COORDINATOR_NOT_AVAILABLE,
    GROUP_ID_NOT_FOUND,
    GROUP_SUBSCRIBED_TO_TOPIC,
    ILLEGAL_GENERATION,
    NON_EMPTY_GROUP,
    NONE,
    OFFSET_METADATA_TOO_LARGE,
)
from .group import CONSUMER_PROTOCOL_TYPE, GroupMetadata, TopicPartition
from .manager import GroupMetadataManager, store_error
from .rebalance import Rebalancer
from ...group_records import OffsetCommitValue
from .state import DEAD, EMPTY, MEMBER_COMMIT_ANSWER

log = logging.getLogger(__name__)


class Coordinator(Protocol):
    """What the offsets manager uses of the group coordinator (``GroupCoordinator`` has it all)."""

    groups: dict[str, GroupMetadata]
    store: GroupMetadataManager
    rebalance: Rebalancer
    max_metadata: int
    retention_ms: int

    def now(self) -> int: ...
    def check(self, group_id: str) -> None: ...
    def member_error(self, group: GroupMetadata | None, member_id: str, instance_id: str | None,
                     generation: int | None) -> int: ...
    def prepare_topic(self) -> None: ...
    def spawn(self, coro: Awaitable[Any]) -> asyncio.Task: ...
    async def wait_loaded(self) -> None: ...


class OffsetMetadataManager:
    def __init__(self, coordinator: Coordinator) -> None:
        self.c = coordinator  # its groups, store, rebalance timers and checks

    async def commit_offsets(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                             offsets: dict[TopicPartition, OffsetCommitValue]) -> dict[TopicPartition, int]:
        """OffsetCommit: the error per partition, NONE once the offsets are in the log."""
        def every(code: int) -> dict[TopicPartition, int]:
            return dict.fromkeys(offsets, code)
        try:
            self.c.check(group_id)
        except CompactLogError as exc:
            return every(exc.code)
        group = self.c.groups.get(group_id)
        if group is None:
            if generation >= 0:  # a member of a generation this coordinator never had
                return every(ILLEGAL_GENERATION)
            group = self.c.groups[group_id] = GroupMetadata(group_id, self.c.now())
        if group.is_(DEAD):
            return every(COORDINATOR_NOT_AVAILABLE)
        if not (generation < 0 and group.is_(EMPTY)):  # else: a client that only stores offsets here
            code = self.c.member_error(group, member_id, instance_id, generation) or MEMBER_COMMIT_ANSWER[group.state]
            if code:
                return every(code)
            self.c.rebalance.heartbeat(group, group.members[member_id])
        self.c.prepare_topic()
        results: dict[TopicPartition, int] = {}
        valid = {}
        for tp, value in offsets.items():
            if len(value.metadata) > self.c.max_metadata:
                results[tp] = OFFSET_METADATA_TOO_LARGE
            else:
                valid[tp] = value
        if valid:
            group.pending_commits.update(valid.keys())

            async def store() -> None:
                try:
                    await self.c.store.store_offsets(group_id, valid, lambda at: group.set_offsets(valid, at))
                finally:
                    group.pending_commits.subtract(valid.keys())
                    group.pending_commits += Counter()  # drop the partitions no longer pending

            task = self.c.spawn(store())
            try:
                await asyncio.shield(task)
                code = NONE
            except (CompactLogError, OSError) as exc:
                log.warning("storing offsets of group %s failed: %s", group_id, exc)
                code = store_error(exc)
            results.update(dict.fromkeys(valid, code))
        return results

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None
                      ) -> tuple[int, list[tuple[TopicPartition, OffsetCommitValue | None]]]:
        """(error, [(partition, committed value or None)]); ``partitions`` None: every committed one.
        Offsets pending in a transaction are not among them (``unstable`` names their partitions)."""
        try:
            self.c.check(group_id)
        except CompactLogError as exc:
            return exc.code, []
        group = self.c.groups.get(group_id)
        offsets = {} if group is None or group.is_(DEAD) else group.offsets
        if partitions is None:
            return NONE, sorted(offsets.items())
        return NONE, [(tp, offsets.get(tp)) for tp in partitions]

    def unstable(self, group_id: str, partitions: list[TopicPartition] | None) -> set[TopicPartition]:
        """Of ``partitions`` (None: every committed one), those with a commit under way or pending in a
        transaction: OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for them."""
        group = self.c.groups.get(group_id)
        if group is None or group.is_(DEAD):
            return set()
        return {tp for tp in (group.offsets if partitions is None else partitions) if group.has_pending_offset(tp)}

    async def delete_offsets(self, group_id: str, partitions: list[TopicPartition]) -> tuple[int, dict[TopicPartition, int]]:
        """OffsetDelete: allowed for an Empty group, and in a consumer group for topics no member consumes."""
        try:
            self.c.check(group_id)
        except CompactLogError as exc:
            return exc.code, {}
        group = self.c.groups.get(group_id)
        if group is None or group.is_(DEAD):
            return GROUP_ID_NOT_FOUND, {}
        errors: dict[TopicPartition, int] = {}
        if group.is_(EMPTY):
            eligible = list(partitions)
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            eligible = [tp for tp in partitions if not group.is_subscribed_to(tp[0])]
            errors = {tp: GROUP_SUBSCRIBED_TO_TOPIC for tp in partitions if group.is_subscribed_to(tp[0])}
        else:
            return NON_EMPTY_GROUP, {}
        if eligible:
            await self.cleanup(group, lambda g: g.remove_offsets(eligible))
            errors.update(dict.fromkeys(eligible, NONE))
        return NONE, errors

    async def cleanup(self, group: GroupMetadata, select: Callable[[GroupMetadata], list[TopicPartition]]) -> int:
        """Remove the offsets ``select`` picks and write their tombstones; a group left Empty without
        offsets is dead and its metadata record gets a tombstone too (unless no generation ever
        completed, when there is none to delete)."""
        removed = select(group)
        if group.is_(EMPTY) and not group.has_offsets() and not group.pending_members:
            group.transition_to(DEAD, self.c.now())
        group_too = False
        if group.is_(DEAD) and self.c.rebalance.current(group):
            del self.c.groups[group.group_id]
            self.c.rebalance.cancel_all(group)
            group_too = group.generation_id > 0
        if removed or group_too:
            try:
                await asyncio.shield(self.c.spawn(self.c.store.tombstones(group.group_id, removed, group_too)))
            except (CompactLogError, OSError) as exc:
                log.warning("writing tombstones for group %s failed: %s", group.group_id, exc)
        return len(removed)

    async def delete_topic_offsets(self, topic: str) -> int:
        """Every group's committed offsets of a deleted topic go, with tombstones (Kafka does this when
        partitions are deleted): a topic made again under the name must not resume at the old offsets."""
        def of_topic(g: GroupMetadata) -> list[TopicPartition]:  # committed, or pending in a transaction
            pending = (tp for offsets in g.pending_txn_offsets.values() for tp in offsets)
            return [tp for tp in dict.fromkeys([*g.offsets, *pending]) if tp[0] == topic]
        total = 0
        for group in list(self.c.groups.values()):
            if of_topic(group):
                total += await self.cleanup(group, lambda g: g.remove_offsets(of_topic(g)))
        return total

    async def expire_offsets(self) -> int:
        """Remove offsets past ``offsets.retention.minutes`` (``GroupMetadata.expired_offsets``). Offsets
        pending in a transaction are not committed yet and stay, as in Kafka."""
        now = self.c.now()
        total = 0
        for group in list(self.c.groups.values()):
            total += await self.cleanup(group, lambda g: g.remove_offsets(g.expired_offsets(now, self.c.retention_ms),
                                                                          pending_txn_too=False))
        if total:
            log.info("removed %d expired offsets", total)
        return total

    async def delete_groups(self, group_ids: Sequence[str]) -> dict[str, int]:
        """DeleteGroups: only Empty groups go (with their offsets); the error per group."""
        results: dict[str, int] = {}
        doomed = []
        for group_id in group_ids:
            try:
                self.c.check(group_id)
            except CompactLogError as exc:
                results[group_id] = exc.code
                continue
            group = self.c.groups.get(group_id)
            if group is None or group.is_(DEAD):
                results[group_id] = GROUP_ID_NOT_FOUND
            elif group.is_(EMPTY):
                group.transition_to(DEAD, self.c.now())
                doomed.append(group)
                results[group_id] = NONE
            else:
                results[group_id] = NON_EMPTY_GROUP
        for group in doomed:
            await self.cleanup(group, lambda g: g.remove_offsets(list(g.offsets)))
        return results
