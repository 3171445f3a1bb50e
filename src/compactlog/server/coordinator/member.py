"""One member of a classic group: who it is, what it supports, what it was given, what it waits for.

The coordinator never looks inside ``protocols`` metadata or ``assignment`` bytes: they are the
client's (a ConsumerProtocolSubscription and ConsumerProtocolAssignment for consumers), chosen and
decoded by the group leader's assignor. The coordinator only compares them to notice a change.

A member *awaits join* while its JoinGroup is parked and *awaits sync* while its SyncGroup is parked;
the parked request is an asyncio future the coordinator completes. Awaiting counts as being alive: a
member blocked in a rebalance cannot heartbeat (its connection serves one request at a time).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

Protocols = tuple[tuple[str, bytes], ...]  # (name, metadata) in the member's order of preference


@dataclass(frozen=True, slots=True)
class JoinResult:
    """What a JoinGroup is answered with. ``members`` (id, instance id, metadata) only for the leader;
    ``skip_assignment`` (JoinGroup v9+) tells a leader to take its leadership without computing an
    assignment (the group stays Stable, its assignment stands)."""

    member_id: str
    error: int = 0
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncResult:
    """What a SyncGroup is answered with; a success names the group's protocol (SyncGroup v5+)."""

    error: int = 0
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(eq=False)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None  # static membership (KIP-345): the id a restarted client keeps
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    is_new: bool = False  # joined in the current rebalance: may still be dropped if its client went away
    join_future: Any = None  # the parked JoinGroup answer (asyncio.Future[JoinResult])
    sync_future: Any = None  # the parked SyncGroup answer (asyncio.Future[SyncResult])
    heartbeat_timer: Any = field(default=None, repr=False)  # asyncio.TimerHandle of the session expiry

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str | None) -> bytes:
        """This member's metadata for ``protocol`` (empty if it does not support it)."""
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def matches(self, protocols: Sequence[tuple[str, bytes]]) -> bool:
        """Same protocols, same order, same metadata: rejoining with these changes nothing."""
        return tuple((n, bytes(m)) for n, m in protocols) == self.protocols

    def vote(self, candidates: set[str]) -> str:
        """The first protocol of this member's own preference order that every member supports."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")


def protocols_of(pairs: Sequence[tuple[str, bytes]]) -> Protocols:
    """A member's protocols in its order of preference, each name once (its first entry): Kafka keeps
    them as a set, and a name counted twice would leave no protocol every member supports."""
    seen: dict[str, bytes] = {}
    for name, meta in pairs:
        seen.setdefault(name, bytes(meta))
    return tuple(seen.items())


def complete(future: Any, value: Any) -> None:
    """Answer a parked request unless its client already went away (a cancelled future)."""
    if future is not None and not future.done():
        future.set_result(value)
