"""The group coordinator: Kafka's classic group protocol, for every group, on this one node.

Each public method is one API's meaning, free of wire types (``handlers.py`` converts kio entities):
JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, OffsetDelete, ListGroups,
DescribeGroups, DeleteGroups. They follow Kafka's coordinator rule for rule, including its error codes
(``errors.py`` names each); the states and what each state answers are tables in ``state.py``, the timed
parts in ``rebalance.py``, the storage in ``manager.py``; the codes are named in ``codes.py``.

A JoinGroup or SyncGroup that must wait for other members is *parked*: the method awaits a future that
the rebalance completes. Everything runs on the server's event loop; the only awaits are parked requests
and appends to ``__consumer_offsets``, after which the group's state is checked again (it may have moved
on meanwhile, exactly as Kafka's callbacks check it).

Offsets (commit, fetch, delete, expiry) and group deletion are in ``offsets.py``; transactions' offsets
(TxnOffsetCommit, and ``write_txn_marker``, which the transaction coordinator calls) in ``txn_offsets.py``.

The coordinator is a broker service: ``start`` replays ``__consumer_offsets`` in a worker thread (every
group API answers COORDINATOR_LOAD_IN_PROGRESS meanwhile, SyncGroup REBALANCE_IN_PROGRESS as Kafka does
for old clients), then expires old offsets every ``offsets.retention.check.interval.ms``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import (
    CompactLogError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    InvalidGroupIdError,
)
from .codes import (
    COORDINATOR_NOT_AVAILABLE,
    FENCED_INSTANCE_ID,
    GROUP_MAX_SIZE_REACHED,
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    INVALID_SESSION_TIMEOUT,
    MEMBER_ID_REQUIRED,
    NONE,
    NOT_COORDINATOR,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
)
from .group import GroupMetadata
from .manager import GroupMetadataManager, store_error
from .member import JoinResult, MemberMetadata, Protocols, SyncResult, protocols_of
from .offsets import OffsetMetadataManager
from .rebalance import NEW_MEMBER_JOIN_TIMEOUT_MS, Rebalancer
from .txn_offsets import TxnOffsetManager
from .state import (
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    HEARTBEAT_ANSWER,
    PREPARING_REBALANCE,
    STABLE,
    SYNC_ANSWER,
)

log = logging.getLogger(__name__)

LOAD_RETRY_S = 5.0


class GroupCoordinator:
    def __init__(self, broker) -> None:
        cfg = broker.config
        self.time = broker.cl.time
        self.min_session_ms: int = cfg.get("group.min.session.timeout.ms")
        self.max_session_ms: int = cfg.get("group.max.session.timeout.ms")
        self.max_size: int = cfg.get("group.max.size")
        self.retention_ms: int = cfg.get("offsets.retention.minutes") * 60_000
        self.retention_check_ms: int = cfg.get("offsets.retention.check.interval.ms")
        self.max_metadata: int = cfg.get("offset.metadata.max.bytes")
        self.store = GroupMetadataManager(broker.cl, cfg, broker.data_arrived)
        self.groups: dict[str, GroupMetadata] = {}
        self.rebalance = Rebalancer(self.groups, self.now, cfg.get("group.initial.rebalance.delay.ms"),
                                    self._store_empty_generation)
        self.active = False
        self.loading = True
        self._loaded = asyncio.Event()  # set when the replay is done, or when the coordinator stops
        self._tasks: set[asyncio.Task] = set()  # stores that must finish even if their client goes away
        self._loader: asyncio.Task | None = None
        # OffsetCommit, OffsetFetch, OffsetDelete, DeleteGroups and expiry live in offsets.py.
        self.offsets = OffsetMetadataManager(self)
        self.commit_offsets = self.offsets.commit_offsets
        self.fetch_offsets = self.offsets.fetch_offsets
        self.delete_offsets = self.offsets.delete_offsets
        self.delete_groups = self.offsets.delete_groups
        self.expire_offsets = self.offsets.expire_offsets
        self.unstable_offsets = self.offsets.unstable
        self.txn_offsets = TxnOffsetManager(self, broker.extras)
        self.commit_txn_offsets = self.txn_offsets.commit
        self.write_txn_marker = self.txn_offsets.write_txn_marker  # the transaction coordinator's, at EndTxn

    def now(self) -> int:
        return self.time.milliseconds()

    # service lifecycle --------------------------------------------------------------------------
    async def start(self) -> None:
        """Start loading in the background: the server accepts connections meanwhile."""
        self.active = True
        self._loader = asyncio.get_running_loop().create_task(self._load_then_expire())

    async def stop(self) -> None:
        """Let stores under way finish; parked requests are answered NOT_COORDINATOR (clients look for the
        coordinator again)."""
        self.active = False
        self._loaded.set()  # whoever waits for the replay gets CoordinatorNotAvailableError
        if self._loader is not None:
            self._loader.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=10)
        for group in self.groups.values():
            self.rebalance.cancel_all(group)
            for m in group.members.values():
                self.rebalance.answer_join(m, JoinResult(m.member_id, NOT_COORDINATOR))
                self.rebalance.answer_sync(m, SyncResult(NOT_COORDINATOR))

    def spawn(self, coro: Awaitable[Any]) -> asyncio.Task:
        """Run work that must finish even if the client that caused it goes away."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _load_then_expire(self) -> None:
        while True:
            try:
                loaded = await asyncio.to_thread(self.store.load)
                break
            except Exception:
                log.exception("cannot load %s; retrying in %.0f s", "__consumer_offsets", LOAD_RETRY_S)
                await asyncio.sleep(LOAD_RETRY_S)
        now = self.now()
        for group_id, found in loaded.items():
            group = (GroupMetadata.from_record(group_id, found.metadata, now) if found.metadata is not None
                     else GroupMetadata(group_id, now))
            group.offsets, group.offset_positions, group.pending_txn_offsets = found.offsets, found.positions, found.pending
            self.groups[group_id] = group
            self.txn_offsets.loaded(group)
            for m in group.members.values():  # members of the stored generation keep it if they come back in time
                self.rebalance.heartbeat(group, m)
        self.loading = False
        self._loaded.set()
        while True:
            await asyncio.sleep(self.retention_check_ms / 1000)
            try:
                await self.expire_offsets()
            except Exception:
                log.exception("expiring old offsets failed")

    async def wait_loaded(self) -> None:
        """Return once ``__consumer_offsets`` is replayed; ``CoordinatorNotAvailableError`` if it stops first."""
        await self._loaded.wait()
        if not self.active or self.loading:
            raise CoordinatorNotAvailableError("the group coordinator is not running")

    def prepare_topic(self) -> None:
        """Start creating ``__consumer_offsets`` if it is missing: something will be stored soon."""
        self.store.prepare(self.spawn)

    def check(self, group_id: str) -> None:
        """Kafka's checks before any group operation, in its order."""
        if not group_id:
            raise InvalidGroupIdError("the group id is empty")
        if not self.active:
            raise CoordinatorNotAvailableError("the group coordinator is not running")
        if self.loading:
            raise CoordinatorLoadInProgressError("the group coordinator is still loading __consumer_offsets")

    # JoinGroup ----------------------------------------------------------------------------------
    async def join_group(self, group_id: str, member_id: str, instance_id: str | None, client_id: str,
                         client_host: str, session_ms: int, rebalance_ms: int, protocol_type: str,
                         protocols: Sequence[tuple[str, bytes]], require_known_member_id: bool,
                         reason: str | None = None, may_skip_assignment: bool = False) -> JoinResult:
        """``reason`` (JoinGroup v8+) is the client's, for the log; ``may_skip_assignment`` (v9+): see
        ``_store_replacement``."""
        try:
            self.check(group_id)
        except CompactLogError as exc:
            return JoinResult(member_id, exc.code)
        if not self.min_session_ms <= session_ms <= self.max_session_ms:
            return JoinResult(member_id, INVALID_SESSION_TIMEOUT)
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                return JoinResult(member_id, UNKNOWN_MEMBER_ID)
            group = self.groups[group_id] = GroupMetadata(group_id, self.now())
        if not self._accepts(group, member_id):
            known = group.members.get(member_id)
            if known is not None:
                self.rebalance.remove_member(group, known, "the group is above group.max.size")
            return JoinResult("", GROUP_MAX_SIZE_REACHED)
        if group.is_(DEAD):
            return JoinResult(member_id, COORDINATOR_NOT_AVAILABLE)
        protocols = protocols_of(protocols)
        if not group.supports_protocols(protocol_type, [name for name, _ in protocols]):
            return JoinResult(member_id, INCONSISTENT_GROUP_PROTOCOL)
        self.prepare_topic()
        join = _Join(client_id, client_host, session_ms, rebalance_ms, protocol_type, protocols, reason,
                     may_skip_assignment)
        if not member_id:
            outcome = self._join_new(group, instance_id, require_known_member_id, join)
        else:
            outcome = self._join_known(group, member_id, instance_id, join)
        self.rebalance.try_complete_join(group)
        if isinstance(outcome, JoinResult):
            return outcome
        return await outcome

    def _accepts(self, group: GroupMetadata, member_id: str) -> bool:
        """``group.max.size``: members already waiting in the join phase, or already in the group, stay;
        newcomers only while there is room."""
        member = group.members.get(member_id)
        if group.is_(EMPTY) or group.is_(DEAD):
            return True
        if group.is_(PREPARING_REBALANCE):
            return (member is not None and member.awaiting_join) or group.num_awaiting_join < self.max_size
        return member is not None or len(group.members) < self.max_size

    def _join_new(self, group: GroupMetadata, instance_id: str | None, require_known: bool,
                  join: _Join) -> JoinResult | asyncio.Future:
        new_id = f"{instance_id if instance_id is not None else join.client_id}-{uuid.uuid4()}"
        if instance_id is not None:
            old_id = group.static_members.get(instance_id)
            if old_id is not None:
                return self._replace_static_member(group, instance_id, old_id, new_id, join)
            return self._add_member(group, new_id, instance_id, join)
        if require_known:
            # JoinGroup v4+: the client must come back with this id, so that a client that never gets this
            # answer leaves no member behind (only a pending id that expires with the session timeout).
            group.pending_members.add(new_id)
            self.rebalance.expire_pending_member_later(group, new_id, join.session_ms)
            return JoinResult(new_id, MEMBER_ID_REQUIRED)
        return self._add_member(group, new_id, None, join)

    def _join_known(self, group: GroupMetadata, member_id: str, instance_id: str | None,
                    join: _Join) -> JoinResult | asyncio.Future:
        if member_id in group.pending_members:
            return self._add_member(group, member_id, instance_id, join)
        if group.is_static_member_fenced(instance_id, member_id):
            return JoinResult(member_id, FENCED_INSTANCE_ID)
        member = group.members.get(member_id)
        if member is None or (instance_id is not None and instance_id not in group.static_members):
            return JoinResult(member_id, UNKNOWN_MEMBER_ID)
        reason = join.why(f"member {member_id} rejoined in {group.state.value}")
        if group.is_(PREPARING_REBALANCE):
            return self._update_member(group, member, join, reason)
        if group.is_(COMPLETING_REBALANCE):
            if member.matches(join.protocols):  # it lost its JoinGroup answer: the same one again
                return self.rebalance.generation_answer(group, member_id)
            return self._update_member(group, member, join, join.why(f"member {member_id} changed its metadata"))
        if group.is_(STABLE):
            # The leader rejoining always rebalances: that is how a consumer leader asks for a new
            # assignment when topics change without any member's metadata changing.
            if group.is_leader(member_id) or not member.matches(join.protocols):
                return self._update_member(group, member, join, reason)
            return JoinResult(member_id, NONE, group.generation_id, group.protocol_type, group.protocol_name,
                              group.leader_id or "")
        return JoinResult(member_id, UNKNOWN_MEMBER_ID)  # Empty: the client must join afresh

    def _add_member(self, group: GroupMetadata, member_id: str, instance_id: str | None,
                    join: _Join) -> asyncio.Future:
        member = MemberMetadata(member_id, instance_id, join.client_id, join.client_host, join.rebalance_ms,
                                join.session_ms, join.protocol_type, join.protocols, is_new=True)
        if group.is_(PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True  # extends the initial delay
        future = self.rebalance.park_join(member)
        group.add(member)
        self.rebalance.heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self.rebalance.maybe_prepare_rebalance(group, join.why(f"new member {member_id} joined"))
        return future

    def _update_member(self, group: GroupMetadata, member: MemberMetadata, join: _Join,
                       reason: str) -> asyncio.Future:
        group.update_member(member, join.protocols, join.rebalance_ms, join.session_ms)
        future = self.rebalance.park_join(member)
        self.rebalance.heartbeat(group, member)
        self.rebalance.maybe_prepare_rebalance(group, reason)
        return future

    def _replace_static_member(self, group: GroupMetadata, instance_id: str, old_id: str, new_id: str,
                               join: _Join) -> asyncio.Future:
        """A static member's client restarted and joined without its old member id (KIP-345). The new id
        takes the old one's place, its assignment and leadership; the old id is fenced. In Stable, with
        unchanged metadata for the chosen protocol and the same protocol choice, there is no rebalance:
        the new id is stored and the member gets the current generation (``_store_replacement``)."""
        old = group.members[old_id]
        self.rebalance.answer_join(old, JoinResult(old_id, FENCED_INSTANCE_ID))
        self.rebalance.answer_sync(old, SyncResult(FENCED_INSTANCE_ID))
        leader_before = group.leader_id or ""
        undo = (old.protocols, old.rebalance_timeout_ms, old.session_timeout_ms, old.client_id, old.client_host)
        # What the assignment was computed from: the metadata for the chosen protocol (a member loaded after
        # a broker restart remembers no other).
        unchanged = dict(join.protocols).get(group.protocol_name) == old.metadata(group.protocol_name)
        member = group.replace_static_member(instance_id, old_id, new_id)
        member.client_id, member.client_host = join.client_id, join.client_host
        group.update_member(member, join.protocols, join.rebalance_ms, join.session_ms)
        future = self.rebalance.park_join(member)
        self.rebalance.heartbeat(group, member)
        if group.is_(STABLE):
            if unchanged and group.protocol_name == group.select_protocol():
                self.spawn(self._store_replacement(group, member, instance_id, old_id, leader_before, undo,
                                                   join.may_skip_assignment))
            else:
                self.rebalance.prepare_rebalance(group, f"static member {instance_id} rejoined with new metadata")
        elif group.is_(COMPLETING_REBALANCE):
            # The leader may already be assigning to the old id: start over so the new id gets its share.
            self.rebalance.prepare_rebalance(group, f"static member {instance_id} rejoined during a rebalance")
        return future

    async def _store_replacement(self, group: GroupMetadata, member: MemberMetadata, instance_id: str,
                                 old_id: str, leader_before: str, undo: tuple, may_skip: bool) -> None:
        """Store the new member id, then answer it. Before JoinGroup v9 the answer names the leader as it
        was, so that a restarted leader does not compute an assignment a Stable group would ignore; from
        v9 a restarted leader is told it leads (with the members) and to skip the assignment."""
        new_id = member.member_id
        try:
            await self.store.store_group(group, {m.member_id: m.assignment for m in group.members.values()})
        except (CompactLogError, OSError) as exc:
            log.warning("storing group %s after static member %s rejoined failed: %s", group.group_id,
                        instance_id, exc)
            if self.rebalance.current(group) and group.members.get(new_id) is member:
                group.replace_static_member(instance_id, new_id, old_id)
                protocols, rebalance_ms, session_ms, member.client_id, member.client_host = undo
                group.update_member(member, protocols, rebalance_ms, session_ms)
                self.rebalance.answer_join(member, JoinResult("", store_error(exc)))
            return
        if may_skip:
            answer = self.rebalance.generation_answer(group, new_id)
            self.rebalance.answer_join(member, dataclasses.replace(answer, skip_assignment=group.is_leader(new_id)))
        else:
            self.rebalance.answer_join(member, JoinResult(new_id, NONE, group.generation_id, group.protocol_type,
                                                          group.protocol_name, leader_before))

    def _store_empty_generation(self, group: GroupMetadata) -> None:
        async def store() -> None:
            try:
                await self.store.store_group(group, {})
            except (CompactLogError, OSError) as exc:
                log.warning("storing the empty generation of group %s failed: %s", group.group_id, exc)
        group.store_task = self.spawn(store())

    # SyncGroup, Heartbeat, LeaveGroup -----------------------------------------------------------
    def member_error(self, group: GroupMetadata | None, member_id: str, instance_id: str | None,
                      generation: int | None) -> int:
        """The error for a request from a member, or NONE: group gone, fenced, unknown, wrong generation."""
        if group is None:
            return UNKNOWN_MEMBER_ID
        if group.is_(DEAD):
            return COORDINATOR_NOT_AVAILABLE
        if group.is_static_member_fenced(instance_id, member_id):
            return FENCED_INSTANCE_ID
        if not group.has(member_id):
            return UNKNOWN_MEMBER_ID
        if generation is not None and generation != group.generation_id:
            return ILLEGAL_GENERATION
        return NONE

    async def sync_group(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                         assignments: dict[str, bytes], protocol_type: str | None = None,
                         protocol_name: str | None = None) -> SyncResult:
        """``protocol_type`` and ``protocol_name`` (SyncGroup v5+), when given, must be the group's."""
        if self.active and self.loading:
            return SyncResult(REBALANCE_IN_PROGRESS)  # the rebalance it belonged to is lost: rejoin
        try:
            self.check(group_id)
        except CompactLogError as exc:
            return SyncResult(exc.code)
        group = self.groups.get(group_id)
        code = self.member_error(group, member_id, instance_id, generation)
        if code:
            return SyncResult(code)
        if (protocol_type is not None and protocol_type != group.protocol_type
                or protocol_name is not None and protocol_name != group.protocol_name):
            return SyncResult(INCONSISTENT_GROUP_PROTOCOL)
        member = group.members[member_id]
        if group.is_(COMPLETING_REBALANCE):
            future = self.rebalance.park_sync(member)
            group.pending_sync.discard(member_id)
            if group.is_leader(member_id):
                full = {m: bytes(assignments.get(m, b"")) for m in group.members}
                self.spawn(self._store_assignment(group, generation, full))
            return await future
        code = SYNC_ANSWER[group.state]
        if code:
            return SyncResult(code)
        group.pending_sync.discard(member_id)
        self.rebalance.heartbeat(group, member)
        return SyncResult(NONE, member.assignment, group.protocol_type, group.protocol_name)

    async def _store_assignment(self, group: GroupMetadata, generation: int, assignment: dict[str, bytes]) -> None:
        """Store the leader's assignment, then hand every member its part (unless the group moved on)."""
        error = NONE
        try:
            await self.store.store_group(group, assignment)
        except (CompactLogError, OSError) as exc:
            log.warning("storing the assignment of group %s failed: %s", group.group_id, exc)
            error = store_error(exc)
        if not (self.rebalance.current(group) and group.is_(COMPLETING_REBALANCE) and group.generation_id == generation):
            return
        if error:
            self.rebalance.reset_assignments(group, error)
            self.rebalance.maybe_prepare_rebalance(group, "the assignment could not be stored")
        else:
            self.rebalance.propagate_assignment(group, assignment)
            group.transition_to(STABLE, self.now())

    def heartbeat(self, group_id: str, generation: int, member_id: str, instance_id: str | None) -> int:
        try:
            self.check(group_id)
        except CompactLogError as exc:
            return exc.code
        group = self.groups.get(group_id)
        code = self.member_error(group, member_id, instance_id, generation)
        if code:
            return code
        if not group.is_(EMPTY):
            self.rebalance.heartbeat(group, group.members[member_id])
        return HEARTBEAT_ANSWER[group.state]

    async def leave_group(self, group_id: str, leaving: Sequence[tuple]) -> tuple[int, list[int]]:
        """(error of the request, error per leaving member). ``leaving`` holds (member id, instance id)
        or (member id, instance id, the client's reason: LeaveGroup v5+). A member may be named by its
        instance id alone (an administrator removing a static member). When the last member leaves, the
        answer waits until the empty generation is in the log, as Kafka's does: a broker killed right
        after it must not bring the departed members back."""
        try:
            self.check(group_id)
        except CompactLogError as exc:
            return exc.code, []
        group = self.groups.get(group_id)
        if group is None:
            return NONE, [UNKNOWN_MEMBER_ID] * len(leaving)
        if group.is_(DEAD):
            return COORDINATOR_NOT_AVAILABLE, []
        errors = []
        for member_id, instance_id, *reason in leaving:
            if not member_id:
                current = group.static_members.get(instance_id) if instance_id is not None else None
                if current is None:
                    errors.append(UNKNOWN_MEMBER_ID)
                    continue
                member_id = current
            elif member_id in group.pending_members:
                group.pending_members.discard(member_id)
                self.rebalance.try_complete_join(group)
                errors.append(NONE)
                continue
            code = self.member_error(group, member_id, instance_id, None)
            if code == NONE:
                why = f"member {member_id} left" + (f"; client reason: {reason[0]}" if any(reason) else "")
                self.rebalance.remove_member(group, group.members[member_id], why)
            errors.append(code)
        if group.store_task is not None and not group.store_task.done():
            await asyncio.shield(group.store_task)
        return NONE, errors

    # groups -------------------------------------------------------------------------------------
    def list_groups(self) -> tuple[int, list[tuple[str, str, str]]]:
        """(error, [(group id, protocol type, state)]) of every live group."""
        try:
            self.check("*")
        except CompactLogError as exc:
            return exc.code, []
        return NONE, [(g.group_id, g.protocol_type or "", g.state.value) for g in self.groups.values()
                      if not g.is_(DEAD)]

    def describe_group(self, group_id: str) -> tuple[int, GroupMetadata | None]:
        """(error, group); an unknown group is no error: it is described as Dead with nothing in it."""
        try:
            self.check(group_id)
        except CompactLogError as exc:
            return exc.code, None
        return NONE, self.groups.get(group_id)


@dataclass(frozen=True, slots=True)
class _Join:
    """The parts of a JoinGroup request every join path needs."""

    client_id: str
    client_host: str
    session_ms: int
    rebalance_ms: int
    protocol_type: str
    protocols: Protocols
    reason: str | None = None  # the client's (JoinGroup v8+), added to the log's reasons
    may_skip_assignment: bool = False  # JoinGroup v9+

    def why(self, text: str) -> str:
        return f"{text}; client reason: {self.reason}" if self.reason else text

