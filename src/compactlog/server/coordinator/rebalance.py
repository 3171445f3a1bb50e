"""The timed half of the coordinator: join phases, session expiry and late SyncGroups.

Kafka keeps these as delayed operations in purgatories; here each is an asyncio timer on the server's
event loop, held by the group or member it belongs to and cancelled when it no longer applies:

- **join phase** (Kafka's DelayedJoin): ends when every member has a parked JoinGroup (and no member id
  handed out by MEMBER_ID_REQUIRED is still unused), or after the longest rebalance timeout of the
  members; members that did not rejoin are then dropped, except static ones, which keep their place.
- **initial delay** (InitialDelayedJoin): the first join phase of an Empty group waits
  ``group.initial.rebalance.delay.ms`` so that members starting together land in one generation; each
  newcomer extends it by that much again, never past the rebalance timeout. It does not end early.
- **session** (DelayedHeartbeat): a member not heard from within its session timeout is removed, unless
  it is parked in a rebalance (it cannot heartbeat then). A member that has just joined gets five
  minutes instead, the time Kafka gives a JoinGroup whose client may have gone away meanwhile.
- **sync** (DelayedSync): members that do not send SyncGroup within the rebalance timeout after a
  generation completes are removed, and the group rebalances without them.

Everything runs on the event loop, so no locks: each callback sees a consistent group.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from .codes import REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID
from .group import GroupMetadata
from .member import JoinResult, MemberMetadata, SyncResult, complete
from .state import (
    CAN_REBALANCE,
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
)

log = logging.getLogger(__name__)

NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000


class Rebalancer:
    def __init__(self, groups: dict[str, GroupMetadata], now: Callable[[], int], initial_delay_ms: int,
                 on_empty: Callable[[GroupMetadata], None]) -> None:
        self.groups = groups  # the coordinator's groups, shared: a timer of a group no longer there is void
        self.now = now
        self.initial_delay_ms = initial_delay_ms
        self.on_empty = on_empty  # a generation ended with no members: the coordinator stores that

    # timers -------------------------------------------------------------------------------------
    def later(self, ms: int, fn: Callable[..., None], *args: Any) -> asyncio.TimerHandle:
        return asyncio.get_running_loop().call_later(max(ms, 0) / 1000, self._guarded, fn, args)

    @staticmethod
    def _guarded(fn: Callable[..., None], args: tuple) -> None:
        try:
            fn(*args)
        except Exception:  # a timer must never take the loop's exception handler by surprise
            log.exception("group coordinator timer %s failed", getattr(fn, "__name__", fn))

    @staticmethod
    def cancel(handle: asyncio.TimerHandle | None) -> None:
        if handle is not None:
            handle.cancel()

    def current(self, group: GroupMetadata) -> bool:
        """Is ``group`` still the coordinator's group of that id (not deleted or replaced)?"""
        return self.groups.get(group.group_id) is group

    def cancel_all(self, group: GroupMetadata) -> None:
        self.cancel(group.join_timer)
        self.cancel(group.sync_timer)
        group.join_timer = group.sync_timer = None
        for m in group.members.values():
            self.cancel(m.heartbeat_timer)
            m.heartbeat_timer = None

    # parked answers -----------------------------------------------------------------------------
    def park_join(self, member: MemberMetadata) -> asyncio.Future:
        """Park a JoinGroup; a request it supersedes (sent before its client reconnected) is told to rejoin."""
        if member.join_future is not None:
            complete(member.join_future, JoinResult(member.member_id, REBALANCE_IN_PROGRESS))
        member.join_future = asyncio.get_running_loop().create_future()
        return member.join_future

    def park_sync(self, member: MemberMetadata) -> asyncio.Future:
        if member.sync_future is not None:
            complete(member.sync_future, SyncResult(REBALANCE_IN_PROGRESS))
        member.sync_future = asyncio.get_running_loop().create_future()
        return member.sync_future

    @staticmethod
    def answer_join(member: MemberMetadata, result: JoinResult) -> None:
        future, member.join_future = member.join_future, None
        complete(future, result)

    @staticmethod
    def answer_sync(member: MemberMetadata, result: SyncResult) -> None:
        future, member.sync_future = member.sync_future, None
        complete(future, result)

    @staticmethod
    def generation_answer(group: GroupMetadata, member_id: str) -> JoinResult:
        """The current generation as a JoinGroup answer; only the leader gets the members."""
        return JoinResult(member_id, 0, group.generation_id, group.protocol_type, group.protocol_name,
                          group.leader_id or "",
                          group.current_member_metadata() if group.is_leader(member_id) else ())

    def reset_assignments(self, group: GroupMetadata, error: int) -> None:
        """Forget the assignment and answer parked SyncGroups with ``error`` (a new rebalance began)."""
        for m in group.members.values():
            m.assignment = b""
            self.answer_sync(m, SyncResult(error))

    def propagate_assignment(self, group: GroupMetadata, assignment: dict[str, bytes]) -> None:
        for m in group.members.values():
            m.assignment = assignment.get(m.member_id, b"")
            self.answer_sync(m, SyncResult(0, m.assignment, group.protocol_type, group.protocol_name))

    # sessions -----------------------------------------------------------------------------------
    def heartbeat(self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int | None = None) -> None:
        """The member is alive: its session starts again."""
        self.cancel(member.heartbeat_timer)
        member.heartbeat_timer = self.later(member.session_timeout_ms if timeout_ms is None else timeout_ms,
                                            self._session_expired, group, member)

    def _session_expired(self, group: GroupMetadata, member: MemberMetadata) -> None:
        member.heartbeat_timer = None
        if not self.current(group) or group.members.get(member.member_id) is not member or group.is_(DEAD):
            return
        if not member.is_new and (member.awaiting_join or member.awaiting_sync):
            self.heartbeat(group, member)
            return
        log.info("member %s of group %s timed out (session %d ms)", member.member_id, group.group_id,
                 member.session_timeout_ms)
        self.remove_member(group, member, f"member {member.member_id} timed out")

    def expire_pending_member_later(self, group: GroupMetadata, member_id: str, session_ms: int) -> None:
        self.later(session_ms, self._pending_expired, group, member_id)

    def _pending_expired(self, group: GroupMetadata, member_id: str) -> None:
        if self.current(group) and member_id in group.pending_members:
            log.info("pending member %s of group %s never joined; forgetting it", member_id, group.group_id)
            group.pending_members.discard(member_id)
            self.try_complete_join(group)

    def forget_member(self, group: GroupMetadata, member: MemberMetadata) -> None:
        """Remove a member; its parked requests (if any) learn that it is no longer one."""
        self.answer_join(member, JoinResult("", UNKNOWN_MEMBER_ID))
        self.answer_sync(member, SyncResult(UNKNOWN_MEMBER_ID))
        self.cancel(member.heartbeat_timer)
        member.heartbeat_timer = None
        group.remove(member.member_id)

    def remove_member(self, group: GroupMetadata, member: MemberMetadata, reason: str) -> None:
        """A member left or failed: the others must rebalance without it."""
        self.forget_member(group, member)
        if group.is_(STABLE) or group.is_(COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance(group, reason)
        elif group.is_(PREPARING_REBALANCE):
            self.try_complete_join(group)

    # join phases --------------------------------------------------------------------------------
    def maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.state in CAN_REBALANCE:
            self.prepare_rebalance(group, reason)

    def prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        log.info("group %s: rebalance from %s (generation %d): %s", group.group_id, group.state.value,
                 group.generation_id, reason)
        if group.is_(COMPLETING_REBALANCE):
            self.reset_assignments(group, REBALANCE_IN_PROGRESS)
        self.cancel(group.sync_timer)
        group.sync_timer = None
        group.pending_sync.clear()
        self.cancel(group.join_timer)
        initial = group.is_(EMPTY)
        group.transition_to(PREPARING_REBALANCE, self.now())
        if initial:
            group.join_is_initial = True
            group.join_remaining_ms = max(group.rebalance_timeout_ms() - self.initial_delay_ms, 0)
            group.join_timer = self.later(self.initial_delay_ms, self._initial_delay_over, group)
        else:
            group.join_is_initial = False
            group.join_timer = self.later(group.rebalance_timeout_ms(), self.complete_join, group)
            self.try_complete_join(group)

    def _initial_delay_over(self, group: GroupMetadata) -> None:
        group.join_timer = None
        if group.new_member_added and group.join_remaining_ms > 0:
            group.new_member_added = False
            delay = min(self.initial_delay_ms, group.join_remaining_ms)
            group.join_remaining_ms = max(group.join_remaining_ms - self.initial_delay_ms, 0)
            group.join_timer = self.later(delay, self._initial_delay_over, group)
        else:
            self.complete_join(group)

    def try_complete_join(self, group: GroupMetadata) -> None:
        if group.is_(PREPARING_REBALANCE) and not group.join_is_initial and group.has_all_members_joined():
            self.complete_join(group)

    def complete_join(self, group: GroupMetadata) -> None:
        """End the join phase: drop dynamic members that did not rejoin, start the next generation and
        answer every parked JoinGroup (the leader with the members' metadata)."""
        self.cancel(group.join_timer)
        group.join_timer = None
        group.join_is_initial = False
        if not self.current(group) or not group.is_(PREPARING_REBALANCE):
            return
        for m in group.not_yet_rejoined():
            if not m.is_static:
                log.info("group %s: member %s did not rejoin in time", group.group_id, m.member_id)
                self.forget_member(group, m)
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members that have not rejoined are left: wait for them (or their sessions).
            group.join_timer = self.later(group.rebalance_timeout_ms(), self.complete_join, group)
            return
        group.init_next_generation(self.now())
        if group.is_(EMPTY):
            log.info("group %s is empty at generation %d", group.group_id, group.generation_id)
            self.on_empty(group)
            return
        log.info("group %s: generation %d with %d members, protocol %s, leader %s", group.group_id,
                 group.generation_id, len(group.members), group.protocol_name, group.leader_id)
        for m in group.members.values():
            self.answer_join(m, self.generation_answer(group, m.member_id))
            self.heartbeat(group, m)
            m.is_new = False
        group.pending_sync = set(group.members)
        group.sync_timer = self.later(group.rebalance_timeout_ms(), self._sync_expired, group, group.generation_id)

    def _sync_expired(self, group: GroupMetadata, generation: int) -> None:
        group.sync_timer = None
        if not self.current(group) or group.generation_id != generation or not group.pending_sync:
            return
        if group.is_(COMPLETING_REBALANCE) or group.is_(STABLE):
            late = sorted(group.pending_sync)
            log.info("group %s: members %s sent no SyncGroup in time", group.group_id, late)
            for member_id in late:
                member = group.members.get(member_id)
                if member is not None:
                    self.forget_member(group, member)
            self.maybe_prepare_rebalance(group, f"members {late} sent no SyncGroup")
