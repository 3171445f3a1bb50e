"""What the broker's coordinators hold, as plain values, for the web console.

The console shows the transaction coordinator's transactional ids beside each partition's open
transactions, and the group coordinator's groups, members and committed offsets; it must not reach into
the coordinators' objects (their modules, their dicts, their pending writes), so these functions are
what it calls, and the values it gets are frozen copies. The coordinators' state belongs to the broker's
event loop: call them from a coroutine on that loop (a console handler), never from a worker thread.
A reset of a group's offsets goes through the group coordinator's own OffsetCommit path
(``reset_group_offsets``), so it lands in ``__consumer_offsets`` exactly as a client's commit does.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

from ..group_records import OffsetCommitValue
from .coordinator import GROUP_COORDINATOR

TRANSACTIONS = "transactions"  # the broker's extras key of the transaction coordinator
# the states in which the coordinator will still write markers to the transaction's partitions
OPEN_STATES = frozenset({"Ongoing", "PrepareCommit", "PrepareAbort"})


@dataclass(frozen=True)
class TransactionalIdView:
    """One transactional id as DescribeTransactions would describe it."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str  # Kafka's name of the state (Ongoing, CompleteCommit, ...)
    timeout_ms: int
    start_timestamp: int  # when the open (or last) transaction began; -1 before any
    last_update_timestamp: int
    partitions: tuple[tuple[str, int], ...]  # of the open transaction (still without a marker, while Prepare*)

    @property
    def open(self) -> bool:
        """Whether the coordinator will still end this id's transaction with markers."""
        return self.state in OPEN_STATES

    def holds(self, topic: str, partition: int) -> bool:
        """Whether the coordinator will write a marker to this partition for this id's transaction."""
        return self.open and (topic, partition) in self.partitions


@dataclass(frozen=True)
class TransactionsView:
    """The coordinator's transactional ids (by id), or why it cannot list them now."""

    ids: tuple[TransactionalIdView, ...]
    max_timeout_ms: int  # transaction.max.timeout.ms: no transaction may stay open longer
    unavailable: str | None = None  # "loading", "not running"; None when ``ids`` is complete

    def by_producer(self) -> dict[int, TransactionalIdView]:
        return {v.producer_id: v for v in self.ids}


def transactions(broker) -> TransactionsView | None:
    """The transaction coordinator's ids, None when this broker runs none. On the broker's event loop."""
    txn = broker.extras.get(TRANSACTIONS)
    if txn is None:
        return None
    max_timeout = int(broker.config.get("transaction.max.timeout.ms"))
    if not txn.active:
        return TransactionsView((), max_timeout, "not running")
    if txn.loading:
        return TransactionsView((), max_timeout, "loading")
    ids = tuple(TransactionalIdView(m.transactional_id, m.producer_id, m.producer_epoch, m.state.value, m.timeout_ms,
                                    m.start_timestamp, m.last_update_timestamp, tuple(sorted(m.partitions)))
                for m in txn.listed())
    return TransactionsView(ids, max_timeout)


# groups ----------------------------------------------------------------------------------------------

STABLE, EMPTY, DEAD = "Stable", "Empty", "Dead"  # Kafka's names of the group states the console tells apart
CONSUMER_PROTOCOL_TYPE = "consumer"  # members of such a group carry ConsumerProtocol assignments
TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class MemberStateView:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: bytes  # as SyncGroup handed it out (a ConsumerProtocolAssignment for a consumer group)


@dataclass(frozen=True)
class GroupStateView:
    """One group as DescribeGroups and OffsetFetch would show it."""

    group_id: str
    state: str  # Kafka's name of the state
    generation_id: int
    protocol_type: str
    protocol_name: str  # the chosen assignor, only while Stable (as DescribeGroups shows it)
    leader_id: str
    members: tuple[MemberStateView, ...]
    offsets: Mapping[TopicPartition, OffsetCommitValue]  # committed (a transaction's pending ones are not)


def groups_loading(broker) -> bool:
    """Whether the group coordinator is still loading ``__consumer_offsets``."""
    coord = broker.extras.get(GROUP_COORDINATOR)
    return coord is not None and bool(coord.loading)


def has_group_coordinator(broker) -> bool:
    return broker.extras.get(GROUP_COORDINATOR) is not None


def _group_view(g) -> GroupStateView:
    members = tuple(MemberStateView(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                    bytes(m.assignment or b"")) for m in g.members.values())
    return GroupStateView(g.group_id, g.state.value, g.generation_id, g.protocol_type or "", g.described_protocol(),
                          g.leader_id or "", members, MappingProxyType(dict(g.offsets)))


def groups(broker) -> list[GroupStateView]:
    """Every live group (not Dead), by group id; none without a group coordinator. On the event loop."""
    coord = broker.extras.get(GROUP_COORDINATOR)
    if coord is None:
        return []
    return [_group_view(g) for g in sorted(coord.groups.values(), key=lambda g: g.group_id) if g.state.value != DEAD]


def group(broker, group_id: str) -> GroupStateView | None:
    """The live group, after Kafka's checks before any group operation (an empty id, a coordinator not
    running or still loading raise their errors); None when there is none. On the event loop."""
    coord = broker.extras.get(GROUP_COORDINATOR)
    if coord is None:
        return None
    coord.check(group_id)
    g = coord.groups.get(group_id)
    return None if g is None or g.state.value == DEAD else _group_view(g)


async def reset_group_offsets(broker, group_id: str,
                              offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
    """Commit ``offsets`` for the group outside any generation (generation -1, no member id), as an admin
    client's AlterConsumerGroupOffsets does, through the coordinator's OffsetCommit path; Kafka's error
    code per partition (0: committed). Call it with no await since the group's state was checked, so no
    member can have joined in between."""
    coord = broker.extras[GROUP_COORDINATOR]
    now = coord.now()
    values = {tp: OffsetCommitValue(offset, -1, "", now, -1) for tp, offset in offsets.items()}
    return await coord.commit_offsets(group_id, -1, "", None, values)


async def forget_topic_offsets(broker, topic: str) -> None:
    """After a topic's deletion, the groups' committed offsets of it go, as after DeleteTopics."""
    coord = broker.extras.get(GROUP_COORDINATOR)
    if coord is not None:
        await coord.offsets.delete_topic_offsets(topic)
