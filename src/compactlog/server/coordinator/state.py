"""The states of a classic consumer group and every legal move between them, as tables.

Kafka's group coordinator keeps each group in one of five states::

    Empty ──────────────► PreparingRebalance ◄──────────── Stable
      ▲                      │       ▲                        ▲
      │ (nobody rejoined)    │       │ (member joins, leaves,  │ (leader's SyncGroup
      └──────────────────────┘       │  fails, changes)        │  stored)
                             ▼       │                         │
                          CompletingRebalance ─────────────────┘

    and Dead from any state (the group is being deleted or was never there).

``TRANSITIONS`` is the whole truth (the drawing is only a reading aid): a move that is not in it raises
``IllegalGroupTransition``, which means a bug in the coordinator, never a client's mistake. The other
tables say what the coordinator answers in each state, so the rules can be read (and tested) without
following the code.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

from .codes import (
    COORDINATOR_NOT_AVAILABLE,
    NONE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
)


class GroupState(enum.Enum):
    """A group's state; the value is the name Kafka shows in DescribeGroups and its tools."""

    EMPTY = "Empty"  # no members; committed offsets may still exist
    PREPARING_REBALANCE = "PreparingRebalance"  # collecting JoinGroup requests for the next generation
    COMPLETING_REBALANCE = "CompletingRebalance"  # waiting for the leader's assignment (SyncGroup)
    STABLE = "Stable"  # every member knows its assignment
    DEAD = "Dead"  # removed (DeleteGroups, or expired with no offsets left)


EMPTY = GroupState.EMPTY
PREPARING_REBALANCE = GroupState.PREPARING_REBALANCE
COMPLETING_REBALANCE = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
DEAD = GroupState.DEAD


def _frozen(table: dict) -> Mapping:
    return MappingProxyType({k: frozenset(v) for k, v in table.items()})


#: state -> the states it may move to.
TRANSITIONS: Mapping[GroupState, frozenset[GroupState]] = _frozen({
    EMPTY: {PREPARING_REBALANCE, DEAD},
    PREPARING_REBALANCE: {COMPLETING_REBALANCE, EMPTY, DEAD},
    COMPLETING_REBALANCE: {PREPARING_REBALANCE, STABLE, DEAD},
    STABLE: {PREPARING_REBALANCE, DEAD},
    DEAD: {DEAD},
})

#: States from which a membership change starts a rebalance (in PreparingRebalance one is already under
#: way: the change joins it; Dead groups never rebalance).
CAN_REBALANCE: frozenset[GroupState] = frozenset({EMPTY, COMPLETING_REBALANCE, STABLE})


#: Heartbeat of a known member of the current generation: the answer in each state. PreparingRebalance
#: answers REBALANCE_IN_PROGRESS, which is how members learn that they must rejoin; an Empty group has no
#: members to beat; Dead tells the client to find its coordinator again.
HEARTBEAT_ANSWER: Mapping[GroupState, int] = MappingProxyType({
    EMPTY: UNKNOWN_MEMBER_ID,
    PREPARING_REBALANCE: REBALANCE_IN_PROGRESS,
    COMPLETING_REBALANCE: NONE,
    STABLE: NONE,
    DEAD: COORDINATOR_NOT_AVAILABLE,
})

#: SyncGroup of a known member of the current generation, in the states that answer at once. In
#: CompletingRebalance the request is parked until the leader's assignment is stored.
SYNC_ANSWER: Mapping[GroupState, int] = MappingProxyType({
    EMPTY: UNKNOWN_MEMBER_ID,
    PREPARING_REBALANCE: REBALANCE_IN_PROGRESS,
    STABLE: NONE,
    DEAD: COORDINATOR_NOT_AVAILABLE,
})

#: OffsetCommit of a known member of the current generation. A commit during PreparingRebalance is still
#: taken (the member learns of the rebalance from its next heartbeat); during CompletingRebalance the
#: member has its new generation but not its assignment yet, so it must not commit.
MEMBER_COMMIT_ANSWER: Mapping[GroupState, int] = MappingProxyType({
    EMPTY: UNKNOWN_MEMBER_ID,
    PREPARING_REBALANCE: NONE,
    COMPLETING_REBALANCE: REBALANCE_IN_PROGRESS,
    STABLE: NONE,
    DEAD: COORDINATOR_NOT_AVAILABLE,
})


class IllegalGroupTransition(RuntimeError):
    """The coordinator tried a move ``TRANSITIONS`` does not allow (a bug here, not a client error)."""


def check_transition(group_id: str, old: GroupState, new: GroupState) -> None:
    """Raise ``IllegalGroupTransition`` unless ``old -> new`` is in ``TRANSITIONS``."""
    if new not in TRANSITIONS[old]:
        raise IllegalGroupTransition(
            f"group {group_id!r} cannot move from {old.value} to {new.value} "
            f"(from {old.value} only to {', '.join(sorted(s.value for s in TRANSITIONS[old]))})"
        )
