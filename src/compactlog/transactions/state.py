"""The states of a transactional id and every legal move between them, as tables (Kafka's TransactionState).

The transaction coordinator (to come: the broker's InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn
and EndTxn handlers, and the replay of ``__transaction_state`` at start) keeps each transactional id in
one of eight states. The ids are the ``TransactionStatus`` byte of the ``__transaction_state`` value and
the names are what DescribeTransactions and ListTransactions show::

    Empty, CompleteCommit, CompleteAbort ──AddPartitions, AddOffsets──► Ongoing (more partitions: Ongoing)
    Empty, CompleteCommit, CompleteAbort ──InitProducerId──► Empty (the epoch bumped)
    Empty, CompleteCommit, CompleteAbort ──transactional.id.expiration.ms──► Dead (a tombstone)
    Ongoing ──EndTxn(commit)──► PrepareCommit ──markers written──► CompleteCommit
    Ongoing ──EndTxn(abort)───► PrepareAbort ───markers written──► CompleteAbort
    Ongoing ──InitProducerId, timeout──► PrepareEpochFence ──► PrepareAbort (the epoch bumped)

``PREVIOUS_STATES`` is Kafka's table (each state with the states it may be entered from) and the whole
truth; ``TRANSITIONS`` is the same table read the other way. A move outside it raises
``IllegalTransactionTransition``: a bug in the coordinator, never a client's mistake.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType


class TransactionState(enum.Enum):
    """A transactional id's state; the value is the name Kafka shows (DescribeTransactions)."""

    EMPTY = "Empty"  # a producer id and epoch, no transaction open
    ONGOING = "Ongoing"  # partitions added, no EndTxn yet
    PREPARE_COMMIT = "PrepareCommit"  # EndTxn(commit) stored, markers being written
    PREPARE_ABORT = "PrepareAbort"  # EndTxn(abort), a timeout or a fence stored, markers being written
    COMPLETE_COMMIT = "CompleteCommit"  # every marker written
    COMPLETE_ABORT = "CompleteAbort"  # every marker written
    DEAD = "Dead"  # expired: about to be removed (its tombstone is being written)
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"  # a newer producer or the timeout is fencing the epoch

    @property
    def id(self) -> int:
        """The ``TransactionStatus`` byte of this state in ``__transaction_state``."""
        return STATE_IDS[self]

    @classmethod
    def from_id(cls, status: int) -> "TransactionState":
        """The state whose ``TransactionStatus`` byte is ``status``; ValueError for any other byte."""
        try:
            return _BY_ID[status]
        except KeyError:
            raise ValueError(f"unknown transaction state id {status} (Kafka's are 0 to 7)") from None


EMPTY = TransactionState.EMPTY
ONGOING = TransactionState.ONGOING
PREPARE_COMMIT = TransactionState.PREPARE_COMMIT
PREPARE_ABORT = TransactionState.PREPARE_ABORT
COMPLETE_COMMIT = TransactionState.COMPLETE_COMMIT
COMPLETE_ABORT = TransactionState.COMPLETE_ABORT
DEAD = TransactionState.DEAD
PREPARE_EPOCH_FENCE = TransactionState.PREPARE_EPOCH_FENCE

#: state -> its ``TransactionStatus`` byte (Kafka's ids, in declaration order).
STATE_IDS: Mapping[TransactionState, int] = MappingProxyType({s: i for i, s in enumerate(TransactionState)})
_BY_ID = {i: s for s, i in STATE_IDS.items()}


def _frozen(table: dict) -> Mapping:
    return MappingProxyType({k: frozenset(v) for k, v in table.items()})


#: state -> the states it may be entered from (Kafka's ``validPreviousStates``).
PREVIOUS_STATES: Mapping[TransactionState, frozenset[TransactionState]] = _frozen({
    EMPTY: {EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT},  # InitProducerId
    ONGOING: {ONGOING, EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT},  # AddPartitions / AddOffsets
    PREPARE_COMMIT: {ONGOING},  # EndTxn(commit)
    PREPARE_ABORT: {ONGOING, PREPARE_EPOCH_FENCE},  # EndTxn(abort), a fence, a timeout
    COMPLETE_COMMIT: {PREPARE_COMMIT},  # markers written
    COMPLETE_ABORT: {PREPARE_ABORT},  # markers written
    DEAD: {EMPTY, COMPLETE_ABORT, COMPLETE_COMMIT},  # transactional.id.expiration.ms passed
    PREPARE_EPOCH_FENCE: {ONGOING},  # InitProducerId or the timeout while a transaction is open
})

#: state -> the states it may move to (``PREVIOUS_STATES`` read the other way).
TRANSITIONS: Mapping[TransactionState, frozenset[TransactionState]] = _frozen({
    old: {new for new, olds in PREVIOUS_STATES.items() if old in olds} for old in TransactionState
})

#: States whose transactional id may expire after ``transactional.id.expiration.ms`` without use.
EXPIRATION_ALLOWED: frozenset[TransactionState] = frozenset({EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT})

#: States in which a transaction is open or being completed (no new producer id may be handed out).
PENDING_TRANSACTION: frozenset[TransactionState] = frozenset({ONGOING, PREPARE_COMMIT, PREPARE_ABORT})

#: States in which the markers of an ended transaction are being written; requests wait for them.
COMPLETING: frozenset[TransactionState] = frozenset({PREPARE_COMMIT, PREPARE_ABORT})

#: States a stored transactional id is never found in: Dead is removed with its tombstone and
#: PrepareEpochFence is only ever a pending step on the way to PrepareAbort (Kafka fails on both).
NEVER_STORED: frozenset[TransactionState] = frozenset({DEAD, PREPARE_EPOCH_FENCE})


class IllegalTransactionTransition(RuntimeError):
    """The coordinator tried a move ``PREVIOUS_STATES`` does not allow (a bug here, not a client error)."""


def check_transition(transactional_id: str, old: TransactionState, new: TransactionState) -> None:
    """Raise ``IllegalTransactionTransition`` unless ``old -> new`` is in ``PREVIOUS_STATES``."""
    if old not in PREVIOUS_STATES[new]:
        raise IllegalTransactionTransition(
            f"transactional id {transactional_id!r} cannot move from {old.value} to {new.value} "
            f"({new.value} is entered only from "
            f"{', '.join(sorted(s.value for s in PREVIOUS_STATES[new]))})"
        )
