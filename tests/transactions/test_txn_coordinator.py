"""The transaction coordinator's decisions against Kafka's TransactionCoordinator (classic flow): each
request from each state, fencing, epoch exhaustion, timeouts and expiry."""

from __future__ import annotations

from dataclasses import replace

import pytest

from compactlog.errors import ProducerFencedError
from compactlog.transactions.coordinator import (
    CONCURRENT_TRANSACTIONS,
    END_TXN,
    INVALID_PRODUCER_EPOCH,
    INVALID_PRODUCER_ID_MAPPING,
    INVALID_REQUEST,
    INVALID_TRANSACTION_TIMEOUT,
    INVALID_TXN_STATE,
    NONE,
    PRODUCER_FENCED,
    Decision,
    abort_timed_out,
    add_offsets,
    add_partitions,
    answered_error,
    complete,
    end_txn,
    expired,
    init_producer_id,
    timed_out,
)
from compactlog.transactions.metadata import TransactionMetadata, log_record
from compactlog.transactions.state import (
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    DEAD,
    EMPTY,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    PREPARE_EPOCH_FENCE,
    IllegalTransactionTransition,
    TransactionState,
)

TID, PID, EPOCH, NOW, MAX_TIMEOUT = "billing-1", 1000, 5, 10_000, 900_000
STATES = list(TransactionState)
OPEN = frozenset({("balances", 0)})


def meta(state: TransactionState, **changes) -> TransactionMetadata:
    """Metadata of ``TID`` in ``state``: producer 1000 at epoch 5 (4 before), partitions when a
    transaction is open or being completed."""
    holds = state in (ONGOING, PREPARE_COMMIT, PREPARE_ABORT, PREPARE_EPOCH_FENCE)
    base = TransactionMetadata(TID, PID, producer_epoch=EPOCH, last_producer_epoch=EPOCH - 1, timeout_ms=60_000,
                               state=state, partitions=OPEN if holds else frozenset(),
                               start_timestamp=100 if state is not EMPTY else -1, last_update_timestamp=200)
    return replace(base, **changes)


class Ids:
    """A producer id allocator that counts its calls."""

    def __init__(self, first: int = 5000) -> None:
        self.next, self.calls = first, 0

    def __call__(self) -> int:
        self.calls += 1
        self.next += 1
        return self.next - 1


def init(current, timeout_ms=30_000, expected=None, ids=None, now=NOW, tid=TID) -> Decision:
    return init_producer_id(current, tid, timeout_ms, now, max_timeout_ms=MAX_TIMEOUT,
                            new_producer_id=ids or Ids(), expected=expected)


# InitProducerId ------------------------------------------------------------------------------------
def test_a_new_transactional_id_gets_a_new_producer_id_at_epoch_0():
    ids = Ids()
    d = init(None, ids=ids)
    assert d.error == NONE and ids.calls == 1
    assert d.metadata == TransactionMetadata(TID, 5000, producer_epoch=0, last_producer_epoch=-1, timeout_ms=30_000,
                                             state=EMPTY, last_update_timestamp=NOW, previous_producer_id=5000)
    # A new producer that names an id and epoch (recovering from UNKNOWN_PRODUCER_ID) is not fenced.
    assert init(None, expected=(42, 3)).metadata.producer_epoch == 0


@pytest.mark.parametrize("timeout_ms", [0, -1, MAX_TIMEOUT + 1, 2**31 - 1])
@pytest.mark.parametrize("state", [None, EMPTY, ONGOING, PREPARE_COMMIT])
def test_a_timeout_out_of_bounds_is_refused_before_anything_else(state, timeout_ms):
    ids = Ids()
    d = init(None if state is None else meta(state), timeout_ms=timeout_ms, ids=ids)
    assert d == Decision(INVALID_TRANSACTION_TIMEOUT) and ids.calls == 0


def test_the_largest_timeout_allowed_is_transaction_max_timeout_ms():
    assert init(None, timeout_ms=MAX_TIMEOUT).metadata.timeout_ms == MAX_TIMEOUT


def test_an_empty_transactional_id_is_an_invalid_request():
    assert init(None, tid="") == Decision(INVALID_REQUEST)


BUMPED = dict(producer_epoch=EPOCH + 1, last_producer_epoch=-1, timeout_ms=30_000, state=EMPTY,
              partitions=frozenset(), start_timestamp=-1, last_update_timestamp=NOW, previous_producer_id=PID)

# InitProducerId (no expected epoch) from each state: (error, what is stored or None, or an exception).
INIT_FROM = {
    EMPTY: (NONE, BUMPED),
    COMPLETE_COMMIT: (NONE, BUMPED),
    COMPLETE_ABORT: (NONE, BUMPED),
    ONGOING: (CONCURRENT_TRANSACTIONS, dict(state=PREPARE_ABORT, producer_epoch=EPOCH + 1, last_producer_epoch=-1,
                                            last_update_timestamp=NOW)),
    PREPARE_COMMIT: (CONCURRENT_TRANSACTIONS, None),
    PREPARE_ABORT: (CONCURRENT_TRANSACTIONS, None),
    DEAD: IllegalTransactionTransition,
    PREPARE_EPOCH_FENCE: IllegalTransactionTransition,
}


@pytest.mark.parametrize("state", STATES, ids=lambda s: s.value)
def test_init_producer_id_from_each_state(state):
    outcome = INIT_FROM[state]
    if outcome is IllegalTransactionTransition:
        with pytest.raises(IllegalTransactionTransition, match=f"in state {state.value}"):
            init(meta(state))
        return
    error, stored = outcome
    d = init(meta(state))
    assert d.error == error
    assert d.metadata == (None if stored is None else replace(meta(state), **stored))


@pytest.mark.parametrize("state", STATES, ids=lambda s: s.value)
def test_while_a_write_is_under_way_every_request_waits(state):
    busy = meta(state, pending=PREPARE_COMMIT)
    assert init(busy) == Decision(CONCURRENT_TRANSACTIONS)
    assert add_partitions(busy, TID, PID, EPOCH, [("x", 1)], NOW) == Decision(CONCURRENT_TRANSACTIONS)
    assert end_txn(busy, TID, PID, EPOCH, True, NOW) == Decision(CONCURRENT_TRANSACTIONS)
    assert not timed_out(busy, 10**12) and abort_timed_out(busy, 10**12) is None
    assert expired(busy, 10**12, 1) is None


def test_a_producer_recovering_at_its_current_epoch_is_bumped_and_remembers_it():
    d = init(meta(EMPTY), expected=(PID, EPOCH))
    assert (d.error, d.metadata.producer_epoch, d.metadata.last_producer_epoch) == (NONE, EPOCH + 1, EPOCH)
    # Its retry (the answer was lost) names the old epoch again: the same epoch, not a second bump.
    retry = init(d.metadata, expected=(PID, EPOCH))
    assert (retry.error, retry.metadata.producer_epoch, retry.metadata.last_producer_epoch) == (NONE, EPOCH + 1, EPOCH)


@pytest.mark.parametrize("expected", [(PID, EPOCH - 2), (PID, EPOCH + 1), (PID + 1, EPOCH), (PID - 1, 32766)])
def test_a_producer_naming_an_id_or_epoch_it_does_not_hold_is_fenced(expected):
    assert init(meta(EMPTY), expected=expected) == Decision(PRODUCER_FENCED)


def test_the_previous_producer_id_is_accepted_only_with_an_exhausted_epoch():
    rotated = meta(EMPTY, producer_epoch=0, last_producer_epoch=-1, previous_producer_id=900)
    assert init(rotated, expected=(900, 0)) == Decision(PRODUCER_FENCED)
    assert init(rotated, expected=(900, 32765)) == Decision(PRODUCER_FENCED)


# Epoch exhaustion --------------------------------------------------------------------------------------
def test_the_epoch_before_exhaustion_is_still_handed_out():
    assert init(meta(EMPTY, producer_epoch=32765)).metadata.producer_epoch == 32766


@pytest.mark.parametrize("state", [EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT], ids=lambda s: s.value)
@pytest.mark.parametrize("epoch", [32766, 32767])
def test_an_exhausted_epoch_gets_a_new_producer_id(state, epoch):
    ids = Ids()
    d = init(meta(state, producer_epoch=epoch), ids=ids)
    assert d.error == NONE and ids.calls == 1
    assert (d.metadata.producer_id, d.metadata.producer_epoch, d.metadata.last_producer_epoch,
            d.metadata.previous_producer_id) == (5000, 0, -1, PID)


def test_a_rotation_the_producer_asked_for_is_found_again_on_its_retry():
    first = init(meta(EMPTY, producer_epoch=32766), expected=(PID, 32766))
    assert (first.metadata.producer_id, first.metadata.producer_epoch, first.metadata.last_producer_epoch) \
        == (5000, 0, 32766)
    # The retry names the old producer id and its exhausted epoch: it gets the new id, not a third one.
    ids = Ids(9000)
    retry = init(first.metadata, expected=(PID, 32766), ids=ids)
    assert (retry.error, retry.metadata.producer_id, retry.metadata.producer_epoch, ids.calls) == (NONE, 5000, 0, 0)


def test_fencing_the_last_epoch_leads_to_a_new_producer_id():
    fenced = init(meta(ONGOING, producer_epoch=32766))
    assert (fenced.error, fenced.metadata.state, fenced.metadata.producer_epoch) \
        == (CONCURRENT_TRANSACTIONS, PREPARE_ABORT, 32767)
    done = complete(fenced.metadata, NOW + 1)
    d = init(done)
    assert (d.metadata.producer_id, d.metadata.producer_epoch) == (5000, 0)


def test_an_open_transaction_at_the_largest_epoch_cannot_be_fenced():
    with pytest.raises(IllegalTransactionTransition, match="its epoch is 32767"):
        init(meta(ONGOING, producer_epoch=32767))


# AddPartitionsToTxn, AddOffsetsToTxn ---------------------------------------------------------------
ADDED = [("balances", 1), ("audit", 0)]

# (error, stored start timestamp or None for nothing stored, or an exception)
ADD_FROM = {
    EMPTY: (NONE, NOW),
    COMPLETE_COMMIT: (NONE, NOW),
    COMPLETE_ABORT: (NONE, NOW),
    ONGOING: (NONE, 100),  # the transaction started with its first partition
    PREPARE_COMMIT: (CONCURRENT_TRANSACTIONS, None),
    PREPARE_ABORT: (CONCURRENT_TRANSACTIONS, None),
    DEAD: IllegalTransactionTransition,
    PREPARE_EPOCH_FENCE: IllegalTransactionTransition,
}


@pytest.mark.parametrize("state", STATES, ids=lambda s: s.value)
def test_add_partitions_from_each_state(state):
    current = meta(state)
    if ADD_FROM[state] is IllegalTransactionTransition:
        with pytest.raises(IllegalTransactionTransition):
            add_partitions(current, TID, PID, EPOCH, ADDED, NOW)
        return
    error, start = ADD_FROM[state]
    d = add_partitions(current, TID, PID, EPOCH, ADDED, NOW)
    assert d.error == error
    if start is None:
        assert d.metadata is None
    else:
        assert d.metadata == replace(current, state=ONGOING, partitions=current.partitions | frozenset(ADDED),
                                     start_timestamp=start, last_update_timestamp=NOW)


def test_partitions_already_in_the_transaction_are_answered_without_a_write():
    assert add_partitions(meta(ONGOING), TID, PID, EPOCH, OPEN, NOW) == Decision(NONE)
    assert add_partitions(meta(ONGOING), TID, PID, EPOCH, [], NOW) == Decision(NONE)


@pytest.mark.parametrize("state", [EMPTY, ONGOING, COMPLETE_COMMIT], ids=lambda s: s.value)
def test_add_offsets_adds_the_groups_offsets_partition(state):
    d = add_offsets(meta(state), TID, PID, EPOCH, "g1", NOW, offsets_partitions=50)
    assert d.error == NONE and ("__consumer_offsets", 42) in d.metadata.partitions  # abs(hashCode) 3242 % 50
    assert add_offsets(meta(state), TID, PID, EPOCH, "g1", NOW, offsets_partitions=1).metadata.partitions >= {
        ("__consumer_offsets", 0)}
    assert add_offsets(meta(PREPARE_ABORT), TID, PID, EPOCH, "g1", NOW,
                       offsets_partitions=50) == Decision(CONCURRENT_TRANSACTIONS)


def _bad_producers():
    return [
        (None, TID, PID, EPOCH, INVALID_PRODUCER_ID_MAPPING),  # the coordinator holds no such id
        (meta(ONGOING), TID, PID + 1, EPOCH, INVALID_PRODUCER_ID_MAPPING),
        (meta(ONGOING), TID, PID, EPOCH - 1, PRODUCER_FENCED),  # a zombie
        (meta(ONGOING), TID, PID, EPOCH + 1, PRODUCER_FENCED),
        (meta(ONGOING), "", PID, EPOCH, INVALID_REQUEST),
    ]


@pytest.mark.parametrize("current,tid,pid,epoch,error", _bad_producers())
def test_requests_of_an_unknown_or_fenced_producer(current, tid, pid, epoch, error):
    assert add_partitions(current, tid, pid, epoch, ADDED, NOW) == Decision(error)
    assert add_offsets(current, tid, pid, epoch, "g", NOW, offsets_partitions=50) == Decision(error)
    assert end_txn(current, tid, pid, epoch, True, NOW) == Decision(error)
    assert end_txn(current, tid, pid, epoch, False, NOW) == Decision(error)


# EndTxn --------------------------------------------------------------------------------------------
KAFKA_END_TXN = {  # written from TransactionCoordinator.endTransaction
    (ONGOING, True): PREPARE_COMMIT, (ONGOING, False): PREPARE_ABORT,
    (PREPARE_COMMIT, True): CONCURRENT_TRANSACTIONS, (PREPARE_COMMIT, False): INVALID_TXN_STATE,
    (PREPARE_ABORT, True): INVALID_TXN_STATE, (PREPARE_ABORT, False): CONCURRENT_TRANSACTIONS,
    (COMPLETE_COMMIT, True): NONE, (COMPLETE_COMMIT, False): INVALID_TXN_STATE,
    (COMPLETE_ABORT, True): INVALID_TXN_STATE, (COMPLETE_ABORT, False): NONE,
    (EMPTY, True): INVALID_TXN_STATE, (EMPTY, False): INVALID_TXN_STATE,
    (DEAD, True): IllegalTransactionTransition, (DEAD, False): IllegalTransactionTransition,
    (PREPARE_EPOCH_FENCE, True): IllegalTransactionTransition,
    (PREPARE_EPOCH_FENCE, False): IllegalTransactionTransition,
}


@pytest.mark.parametrize("state,commit", list(KAFKA_END_TXN), ids=lambda x: getattr(x, "value", str(x)))
def test_end_txn_from_each_state(state, commit):
    expected = KAFKA_END_TXN[state, commit]
    if expected is IllegalTransactionTransition:
        with pytest.raises(IllegalTransactionTransition):
            end_txn(meta(state), TID, PID, EPOCH, commit, NOW)
        return
    assert END_TXN[state, commit] == expected
    d = end_txn(meta(state), TID, PID, EPOCH, commit, NOW)
    if isinstance(expected, TransactionState):
        assert d == Decision(NONE, replace(meta(state), state=expected, last_update_timestamp=NOW))
    else:
        assert d == Decision(expected)


@pytest.mark.parametrize("state", STATES, ids=lambda s: s.value)
def test_markers_written_complete_only_a_prepare_state(state):
    if state in (PREPARE_COMMIT, PREPARE_ABORT):
        done = complete(meta(state), NOW)
        target = COMPLETE_COMMIT if state is PREPARE_COMMIT else COMPLETE_ABORT
        assert done == replace(meta(state), state=target, partitions=frozenset(), last_update_timestamp=NOW)
    else:
        with pytest.raises(IllegalTransactionTransition):
            complete(meta(state), NOW)


def test_a_whole_transaction_and_its_retries():
    current = init(None).metadata
    pid, epoch = current.producer_id, current.producer_epoch
    current = add_partitions(current, TID, pid, epoch, [("balances", 0)], 20).metadata
    current = add_offsets(current, TID, pid, epoch, "my-group", 30, offsets_partitions=50).metadata
    assert (current.state, current.start_timestamp) == (ONGOING, 20)
    assert current.partitions == {("balances", 0), ("__consumer_offsets", 12)}
    current = end_txn(current, TID, pid, epoch, True, 40).metadata
    assert end_txn(current, TID, pid, epoch, True, 41) == Decision(CONCURRENT_TRANSACTIONS)  # markers under way
    current = complete(current, 50)
    assert end_txn(current, TID, pid, epoch, True, 60) == Decision(NONE)  # a retry after completion
    assert end_txn(current, TID, pid, epoch, False, 60) == Decision(INVALID_TXN_STATE)
    nxt = add_partitions(current, TID, pid, epoch, [("balances", 1)], 70).metadata
    assert (nxt.state, nxt.partitions, nxt.start_timestamp, nxt.producer_epoch) \
        == (ONGOING, {("balances", 1)}, 70, epoch)


# Fencing a zombie ----------------------------------------------------------------------------------
def test_a_new_instance_fences_the_old_one_and_aborts_its_transaction():
    old = init(None).metadata
    pid, zombie_epoch = old.producer_id, old.producer_epoch
    current = add_partitions(old, TID, pid, zombie_epoch, [("balances", 0)], 20).metadata
    d = init(current, now=30)  # the new instance
    assert d.error == CONCURRENT_TRANSACTIONS
    current = d.metadata
    assert (current.state, current.producer_epoch, current.partitions) \
        == (PREPARE_ABORT, zombie_epoch + 1, {("balances", 0)})
    assert log_record(current)[1][16] == PREPARE_ABORT.id  # stored as PrepareAbort, never PrepareEpochFence
    # The zombie cannot commit, add or write any more; the new instance waits for the abort.
    assert end_txn(current, TID, pid, zombie_epoch, True, 31) == Decision(PRODUCER_FENCED)
    assert init(current, now=31) == Decision(CONCURRENT_TRANSACTIONS)
    current = complete(current, 32)
    d = init(current, now=33)
    assert (d.error, d.metadata.producer_epoch, d.metadata.state) == (NONE, zombie_epoch + 2, EMPTY)
    current = d.metadata
    assert add_partitions(current, TID, pid, zombie_epoch, [("x", 0)], 34) == Decision(PRODUCER_FENCED)
    assert init(current, expected=(pid, zombie_epoch)) == Decision(PRODUCER_FENCED)


@pytest.mark.parametrize("api_key,version,answer", [
    (22, 3, INVALID_PRODUCER_EPOCH), (22, 4, PRODUCER_FENCED),
    (24, 1, INVALID_PRODUCER_EPOCH), (24, 2, PRODUCER_FENCED), (24, 3, PRODUCER_FENCED),
    (25, 0, INVALID_PRODUCER_EPOCH), (25, 2, PRODUCER_FENCED),
    (26, 1, INVALID_PRODUCER_EPOCH), (26, 2, PRODUCER_FENCED),
])
def test_older_clients_are_told_invalid_producer_epoch(api_key, version, answer):
    assert PRODUCER_FENCED == ProducerFencedError.code == 90
    assert answered_error(api_key, version, PRODUCER_FENCED) == answer
    assert answered_error(api_key, version, CONCURRENT_TRANSACTIONS) == CONCURRENT_TRANSACTIONS


# Timeouts and expiry -------------------------------------------------------------------------------
def test_a_transaction_times_out_only_after_its_timeout():
    current = meta(ONGOING, start_timestamp=1000, timeout_ms=500)
    assert not timed_out(current, 1500) and abort_timed_out(current, 1500) is None
    assert timed_out(current, 1501)
    aborted = abort_timed_out(current, 1501)
    assert aborted == replace(current, state=PREPARE_ABORT, producer_epoch=EPOCH + 1, last_producer_epoch=-1,
                              last_update_timestamp=1501)
    # Its producer is fenced: it learns on its next request.
    assert end_txn(aborted, TID, PID, EPOCH, True, 1502) == Decision(PRODUCER_FENCED)


@pytest.mark.parametrize("state", [s for s in STATES if s is not ONGOING], ids=lambda s: s.value)
def test_only_an_open_transaction_times_out(state):
    current = meta(state, start_timestamp=0, timeout_ms=1)
    assert not timed_out(current, 10**12) and abort_timed_out(current, 10**12) is None


EXPIRES = {EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT}


@pytest.mark.parametrize("state", STATES, ids=lambda s: s.value)
def test_an_unused_transactional_id_expires_to_a_tombstone(state):
    current = meta(state, last_update_timestamp=1000)
    assert expired(current, 1000 + 604_800_000 - 1, 604_800_000) is None
    dead = expired(current, 1000 + 604_800_000, 604_800_000)
    if state in EXPIRES:
        assert dead == replace(current, state=DEAD)
        assert log_record(dead)[1] is None
    else:
        assert dead is None
