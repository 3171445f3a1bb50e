"""The transaction state table against Kafka's TransactionState (ids, names, valid previous states)."""

from __future__ import annotations

import itertools

import pytest

from compactlog.transactions.state import (
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    DEAD,
    EMPTY,
    EXPIRATION_ALLOWED,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    PREPARE_EPOCH_FENCE,
    PREVIOUS_STATES,
    TRANSITIONS,
    IllegalTransactionTransition,
    TransactionState,
    check_transition,
)

# Written out from Kafka's TransactionMetadata.scala: (id, name, valid previous states, expiration allowed).
KAFKA = {
    EMPTY: (0, "Empty", {EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT}, True),
    ONGOING: (1, "Ongoing", {ONGOING, EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT}, False),
    PREPARE_COMMIT: (2, "PrepareCommit", {ONGOING}, False),
    PREPARE_ABORT: (3, "PrepareAbort", {ONGOING, PREPARE_EPOCH_FENCE}, False),
    COMPLETE_COMMIT: (4, "CompleteCommit", {PREPARE_COMMIT}, True),
    COMPLETE_ABORT: (5, "CompleteAbort", {PREPARE_ABORT}, True),
    DEAD: (6, "Dead", {EMPTY, COMPLETE_ABORT, COMPLETE_COMMIT}, False),
    PREPARE_EPOCH_FENCE: (7, "PrepareEpochFence", {ONGOING}, False),
}


def test_every_state_is_in_the_table():
    assert set(TransactionState) == set(KAFKA) == set(PREVIOUS_STATES) == set(TRANSITIONS)


@pytest.mark.parametrize("state", list(TransactionState), ids=lambda s: s.value)
def test_each_row_matches_kafka(state):
    status, name, previous, expires = KAFKA[state]
    assert state.id == status
    assert state.value == name
    assert TransactionState.from_id(status) is state
    assert PREVIOUS_STATES[state] == previous
    assert (state in EXPIRATION_ALLOWED) is expires


@pytest.mark.parametrize("status", [-1, 8, 127])
def test_unknown_state_ids_are_refused(status):
    with pytest.raises(ValueError, match=f"unknown transaction state id {status}"):
        TransactionState.from_id(status)


def test_transitions_are_the_previous_states_read_the_other_way():
    for old, new in itertools.product(TransactionState, repeat=2):
        assert (new in TRANSITIONS[old]) == (old in PREVIOUS_STATES[new])
    assert TRANSITIONS[DEAD] == frozenset()  # nothing follows Dead: the id is removed


ALL_MOVES = list(itertools.product(TransactionState, repeat=2))


@pytest.mark.parametrize("old,new", [m for m in ALL_MOVES if m[0] in KAFKA[m[1]][2]],
                         ids=lambda s: s.value)
def test_every_move_kafka_allows_is_allowed(old, new):
    check_transition("t", old, new)


@pytest.mark.parametrize("old,new", [m for m in ALL_MOVES if m[0] not in KAFKA[m[1]][2]],
                         ids=lambda s: s.value)
def test_every_move_kafka_refuses_is_refused(old, new):
    with pytest.raises(IllegalTransactionTransition) as e:
        check_transition("billing-1", old, new)
    assert f"'billing-1' cannot move from {old.value} to {new.value}" in str(e.value)
