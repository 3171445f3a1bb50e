"""One classic group's metadata: its state, generation, members, chosen protocol and committed offsets.

Pure bookkeeping, as Kafka's ``GroupMetadata``: no timers, no I/O, no clock of its own (callers pass
``now`` in milliseconds). Every state change goes through ``transition_to``, which checks the move
against ``state.TRANSITIONS``. The coordinator (``coordinator.py``) decides *when* things happen; this
class only keeps the facts consistent: the leader is always a member, every static member's instance id
maps to its current member id, and ``supported`` counts how many members support each protocol.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from .member import MemberMetadata, Protocols
from ...group_records import (
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitValue,
    consumer_subscription_topics,
)
from .state import COMPLETING_REBALANCE, EMPTY, STABLE, GroupState, check_transition

CONSUMER_PROTOCOL_TYPE = "consumer"
TopicPartition = tuple[str, int]


@dataclass(slots=True)
class PendingTxnOffset:
    """An offset a transaction committed (TxnOffsetCommit), invisible until the transaction's marker."""

    value: OffsetCommitValue
    position: int | None = None  # its record's offset in __consumer_offsets, once appended


class GroupMetadata:
    def __init__(self, group_id: str, now: int, state: GroupState = EMPTY) -> None:
        self.group_id = group_id
        self.state = state
        self.state_timestamp: int | None = now  # when the group entered its state (offset expiry of Empty groups)
        self.generation_id = 0
        self.protocol_type: str | None = None  # None: a group that only stores offsets (no member ever joined)
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}  # in joining order (the first is the first leader)
        self.pending_members: set[str] = set()  # given an id by MEMBER_ID_REQUIRED, not joined with it yet
        self.pending_sync: set[str] = set()  # members of this generation that have not sent SyncGroup yet
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.supported: Counter[str] = Counter()  # protocol name -> members supporting it
        self.new_member_added = False  # a member joined during the initial delay (it is extended)
        self.subscribed_topics: frozenset[str] | None = None  # None: unknown, assume every topic
        self.offsets: dict[TopicPartition, OffsetCommitValue] = {}
        # Where each committed offset's record is in __consumer_offsets: a transaction's offset replaces a
        # committed one at its COMMIT marker only if its own record is the later one (Kafka's olderThan).
        self.offset_positions: dict[TopicPartition, int] = {}
        # Offsets of open transactions, by producer id (Kafka's pendingTransactionalOffsetCommits).
        self.pending_txn_offsets: dict[int, dict[TopicPartition, PendingTxnOffset]] = {}
        # Commits on their way to the log, per partition: removals leave these alone, or a tombstone
        # written after an acknowledged commit would undo it at the next load (Kafka's pendingOffsetCommits).
        self.pending_commits: Counter = Counter()
        # The coordinator's timers for this group (asyncio handles), kept here so they die with it.
        self.join_timer = None
        self.join_is_initial = False  # the initial delay does not end early when everyone has joined
        self.join_remaining_ms = 0
        self.sync_timer = None
        self.store_task = None  # the store of the last empty generation, until it is in the log

    def __repr__(self) -> str:
        return (f"GroupMetadata({self.group_id!r}, {self.state.value}, generation={self.generation_id}, "
                f"members={list(self.members)})")

    # state --------------------------------------------------------------------------------------
    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, state: GroupState, now: int) -> None:
        check_transition(self.group_id, self.state, state)
        self.state = state
        self.state_timestamp = now

    # members ------------------------------------------------------------------------------------
    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: MemberMetadata) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.pending_members.discard(member.member_id)
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.supported.update(member.protocol_names())

    def remove(self, member_id: str) -> MemberMetadata | None:
        """Forget a member (or a pending member id); a removed leader is succeeded by another member."""
        self.pending_members.discard(member_id)
        self.pending_sync.discard(member_id)
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self.supported.subtract(member.protocol_names())
        self.supported = +self.supported
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def update_member(self, member: MemberMetadata, protocols: Protocols, rebalance_timeout_ms: int,
                      session_timeout_ms: int) -> None:
        self.supported.subtract(member.protocol_names())
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        self.supported.update(member.protocol_names())
        self.supported = +self.supported

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> MemberMetadata:
        """Move a static member to a new member id (its client restarted); it keeps everything else,
        including the leadership and its assignment."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        self.static_members[instance_id] = new_id
        return member

    def is_static_member_fenced(self, instance_id: str | None, member_id: str) -> bool:
        """A request names a known instance id with a member id that is no longer its one."""
        if instance_id is None:
            return False
        current = self.static_members.get(instance_id)
        return current is not None and current != member_id

    @property
    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join)

    def not_yet_rejoined(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def has_all_members_joined(self) -> bool:
        return all(m.awaiting_join for m in self.members.values()) and not self.pending_members

    def rebalance_timeout_ms(self) -> int:
        """The longest rebalance timeout any member asked for: how long a join phase may last."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a leader that rejoined, else make any rejoined member leader. False: no leader at all,
        or no member rejoined."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.awaiting_join:
                self.leader_id = member_id
                return True
        return False

    # protocols ----------------------------------------------------------------------------------
    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        n = len(self.members)
        return {name for name, count in self.supported.items() if count == n}

    def supports_protocols(self, protocol_type: str, names: Iterable[str]) -> bool:
        """May a member with this protocol type and these protocols join?"""
        names = set(names)
        if not self.members:
            return bool(protocol_type) and bool(names)
        return self.protocol_type == protocol_type and bool(self.candidate_protocols() & names)

    def select_protocol(self) -> str:
        """Every member votes for its most preferred protocol that all support; most votes wins (ties:
        the first name in sorted order, so that the choice does not depend on joining order)."""
        candidates = self.candidate_protocols()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        best = max(votes.values())
        return min(name for name, count in votes.items() if count == best)

    def current_member_metadata(self) -> tuple[tuple[str, str | None, bytes], ...]:
        """What the leader gets in its JoinGroup answer: each member's metadata for the chosen protocol."""
        return tuple((m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
                     for m in self.members.values())

    def init_next_generation(self, now: int) -> None:
        """The join phase is over: a new generation, with a protocol if there are members, else Empty."""
        self.generation_id += 1
        self.pending_sync.clear()
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self._compute_subscribed_topics()
            self.transition_to(COMPLETING_REBALANCE, now)
        else:
            self.protocol_name = None
            self.subscribed_topics = self._compute_subscribed_topics()
            self.transition_to(EMPTY, now)

    def _compute_subscribed_topics(self) -> frozenset[str] | None:
        """The topics the members consume, when the group speaks the consumer protocol (protects their
        offsets from expiry and from OffsetDelete); None when that cannot be known."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        topics: set[str] = set()
        for m in self.members.values():
            found = consumer_subscription_topics(m.metadata(self.protocol_name))
            if found is None:
                return None
            topics |= found
        return frozenset(topics)

    def is_subscribed_to(self, topic: str) -> bool:
        return self.subscribed_topics is None or topic in self.subscribed_topics

    # offsets ------------------------------------------------------------------------------------
    def expired_offsets(self, now: int, retention_ms: int) -> list[TopicPartition]:
        """Offsets past retention, by Kafka's rules. In an Empty group: ``retention_ms`` after the group
        became empty (after the commit when that time is unknown). In a Stable consumer group: offsets of
        topics no member subscribes to, ``retention_ms`` after their commit. In a group that only stores
        offsets: ``retention_ms`` after the commit. A commit that named its own expiry keeps it."""
        protected: frozenset[str] = frozenset()
        if self.protocol_type is not None and self.is_(EMPTY):
            since_empty = self.state_timestamp
        elif self.protocol_type == CONSUMER_PROTOCOL_TYPE and self.subscribed_topics is not None and self.is_(STABLE):
            since_empty, protected = None, self.subscribed_topics
        elif self.protocol_type is None:
            since_empty = None
        else:
            return []  # a rebalancing group, or members whose topics we cannot read: keep everything
        out = []
        for tp, v in self.offsets.items():
            if tp[0] in protected:
                continue
            if v.expire_timestamp >= 0:
                expired = now >= v.expire_timestamp
            else:
                expired = now - (v.commit_timestamp if since_empty is None else since_empty) >= retention_ms
            if expired:
                out.append(tp)
        return out

    def remove_offsets(self, partitions: Iterable[TopicPartition], pending_txn_too: bool = True) -> list[TopicPartition]:
        """Drop committed offsets, except those with a commit under way; returns those dropped (they need
        tombstones). ``pending_txn_too``: open transactions' offsets of these partitions go as well, as
        Kafka's removeOffsets drops them (deleted groups, OffsetDelete, deleted topics); expiry keeps them."""
        partitions = list(partitions)
        if pending_txn_too:
            for pid, pending in list(self.pending_txn_offsets.items()):
                for tp in partitions:
                    pending.pop(tp, None)
                if not pending:
                    del self.pending_txn_offsets[pid]
        removed = [tp for tp in partitions if tp not in self.pending_commits and self.offsets.pop(tp, None) is not None]
        for tp in removed:
            self.offset_positions.pop(tp, None)
        return removed

    def set_offsets(self, offsets: dict[TopicPartition, OffsetCommitValue], position: int) -> None:
        """Offsets committed by the record batch at ``position`` of __consumer_offsets."""
        self.offsets.update(offsets)
        self.offset_positions.update(dict.fromkeys(offsets, position))

    def has_offsets(self) -> bool:
        """Committed, on their way to the log, or pending in a transaction: a group holding any is not dead."""
        return bool(self.offsets or self.pending_commits or self.pending_txn_offsets)

    def has_pending_offset(self, tp: TopicPartition) -> bool:
        """A commit of ``tp`` is under way or in an open transaction: OffsetFetch with require_stable
        answers UNSTABLE_OFFSET_COMMIT for it."""
        return tp in self.pending_commits or any(tp in p for p in self.pending_txn_offsets.values())

    # transactional offsets ------------------------------------------------------------------------
    def prepare_txn_offsets(self, producer_id: int, offsets: dict[TopicPartition, OffsetCommitValue]) -> None:
        """A TxnOffsetCommit is on its way to the log: its offsets are pending from now on."""
        pending = self.pending_txn_offsets.setdefault(producer_id, {})
        for tp, value in offsets.items():
            pending[tp] = PendingTxnOffset(value)

    def txn_offsets_appended(self, producer_id: int, offsets: dict[TopicPartition, OffsetCommitValue],
                             position: int) -> None:
        """Their record batch is at ``position``: remember it (unless a later commit replaced them)."""
        pending = self.pending_txn_offsets.get(producer_id, {})
        for tp, value in offsets.items():
            entry = pending.get(tp)
            if entry is not None and entry.value == value:
                entry.position = position

    def txn_offsets_failed(self, producer_id: int, offsets: Iterable[TopicPartition]) -> None:
        """Their append failed: they are not pending any more (the client retries)."""
        pending = self.pending_txn_offsets.get(producer_id)
        if pending is None:
            return
        for tp in offsets:
            pending.pop(tp, None)
        if not pending:
            del self.pending_txn_offsets[producer_id]

    def complete_txn(self, producer_id: int, commit: bool) -> list[TopicPartition]:
        """The producer's transaction ended (its marker is in the log): on commit its offsets become the
        committed ones, each unless the partition's committed offset came from a later record; on abort
        they are dropped. Returns the partitions whose committed offset changed."""
        pending = self.pending_txn_offsets.pop(producer_id, None)
        if not commit or not pending:
            return []
        applied = []
        for tp, entry in pending.items():
            if entry.position is None:  # its append has not returned: it was never acknowledged
                continue
            if tp not in self.offsets or self.offset_positions.get(tp, -1) < entry.position:
                self.offsets[tp] = entry.value
                self.offset_positions[tp] = entry.position
                applied.append(tp)
        return applied

    # persistence --------------------------------------------------------------------------------
    def to_record(self, assignment: dict[str, bytes], now: int) -> GroupMetadataValue:
        """The group metadata value stored for this generation (its members with ``assignment``)."""
        members = tuple(
            MemberMetadataValue(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                m.rebalance_timeout_ms, m.session_timeout_ms, m.metadata(self.protocol_name),
                                assignment.get(m.member_id, b""))
            for m in self.members.values()
        ) if self.protocol_name is not None else ()
        return GroupMetadataValue(self.protocol_type or "", self.generation_id, self.protocol_name,
                                  self.leader_id if members else None,
                                  self.state_timestamp if self.state_timestamp is not None else now, members)

    @classmethod
    def from_record(cls, group_id: str, value: GroupMetadataValue, now: int) -> GroupMetadata:
        """A group as its last stored generation left it: Stable with its members, or Empty."""
        group = cls(group_id, now, STABLE if value.members else EMPTY)
        group.generation_id = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        group.state_timestamp = value.current_state_timestamp if value.current_state_timestamp >= 0 else None
        for m in value.members:
            protocols = ((value.protocol, m.subscription),) if value.protocol is not None else ()
            member = MemberMetadata(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                    m.rebalance_timeout, m.session_timeout, group.protocol_type or "", protocols,
                                    assignment=m.assignment)
            group.add(member)
        if value.leader in group.members:
            group.leader_id = value.leader
        group.subscribed_topics = group._compute_subscribed_topics()
        return group

    def described_protocol(self) -> str:
        """DescribeGroups shows the chosen protocol only in Stable (elsewhere it may be about to change)."""
        return (self.protocol_name or "") if self.is_(STABLE) else ""
