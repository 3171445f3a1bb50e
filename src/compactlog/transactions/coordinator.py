"""What the transaction coordinator answers to each request, as pure functions of the stored metadata.

Each function takes the transactional id's current ``TransactionMetadata`` (None when the coordinator
holds none) and the request, and returns a ``Decision``: Kafka's error code and, when something must be
stored, the metadata to write to ``__transaction_state`` and then adopt. Nothing here writes, waits or
sends markers; the broker's handlers (to come) do that and call ``complete`` once the markers are written.
The rules are Kafka's classic flow (TransactionCoordinator.scala before Transactions V2: the epoch is
bumped by InitProducerId and by fencing, never by EndTxn).

A fence (InitProducerId while a transaction is open, or the transaction's timeout) bumps the epoch and
aborts in one write: Kafka passes through PrepareEpochFence in memory and stores PrepareAbort with the
bumped epoch, which is what ``Decision.metadata`` holds; the producer that asked is answered
CONCURRENT_TRANSACTIONS and retries once the abort completes. (Kafka also remembers a fence whose write
failed, so as not to bump twice; that belongs to the caller that sees the write fail.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

from ..errors import (
    ConcurrentTransactionsError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidRequestError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    ProducerFencedError,
)
from ..java_hash import coordinator_partition
from .metadata import MAX_EPOCH, NO_PRODUCER_EPOCH, TopicPartition, TransactionMetadata
from .state import (
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    COMPLETING,
    DEAD,
    EMPTY,
    EXPIRATION_ALLOWED,
    NEVER_STORED,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    PREPARE_EPOCH_FENCE,
    IllegalTransactionTransition,
    TransactionState,
    check_transition,
)

NONE = 0
INVALID_PRODUCER_EPOCH = InvalidProducerEpochError.code
INVALID_TXN_STATE = InvalidTxnStateError.code
INVALID_PRODUCER_ID_MAPPING = InvalidProducerIdMappingError.code
INVALID_TRANSACTION_TIMEOUT = InvalidTransactionTimeoutError.code
CONCURRENT_TRANSACTIONS = ConcurrentTransactionsError.code
INVALID_REQUEST = InvalidRequestError.code
PRODUCER_FENCED = ProducerFencedError.code

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"

#: API key -> the first version that understands PRODUCER_FENCED; older versions are answered
#: INVALID_PRODUCER_EPOCH instead, as Kafka's KafkaApis does.
PRODUCER_FENCED_SINCE: Mapping[int, int] = MappingProxyType({
    22: 4,  # InitProducerId
    24: 2,  # AddPartitionsToTxn
    25: 2,  # AddOffsetsToTxn
    26: 2,  # EndTxn
})

#: EndTxn of a known producer at its current epoch, with nothing being written: (state, commit?) -> the
#: state to prepare, or the error code answered at once. A retry of an EndTxn that completed is answered
#: NONE; one whose markers are still being written, CONCURRENT_TRANSACTIONS.
END_TXN: Mapping[tuple[TransactionState, bool], TransactionState | int] = MappingProxyType({
    (ONGOING, True): PREPARE_COMMIT,
    (ONGOING, False): PREPARE_ABORT,
    (PREPARE_COMMIT, True): CONCURRENT_TRANSACTIONS,
    (PREPARE_COMMIT, False): INVALID_TXN_STATE,
    (PREPARE_ABORT, True): INVALID_TXN_STATE,
    (PREPARE_ABORT, False): CONCURRENT_TRANSACTIONS,
    (COMPLETE_COMMIT, True): NONE,
    (COMPLETE_COMMIT, False): INVALID_TXN_STATE,
    (COMPLETE_ABORT, True): INVALID_TXN_STATE,
    (COMPLETE_ABORT, False): NONE,
    (EMPTY, True): INVALID_TXN_STATE,
    (EMPTY, False): INVALID_TXN_STATE,
})


@dataclass(frozen=True, slots=True)
class Decision:
    """A request's outcome: Kafka's error code, and the metadata to store (None: nothing to store).

    A decision may carry both: a fencing InitProducerId stores the abort and still answers
    CONCURRENT_TRANSACTIONS."""

    error: int
    metadata: TransactionMetadata | None = None


def answered_error(api_key: int, version: int, error: int) -> int:
    """``error`` as a request of ``api_key`` at ``version`` is answered: PRODUCER_FENCED becomes
    INVALID_PRODUCER_EPOCH for versions older than ``PRODUCER_FENCED_SINCE``."""
    if error == PRODUCER_FENCED and version < PRODUCER_FENCED_SINCE.get(api_key, 0):
        return INVALID_PRODUCER_EPOCH
    return error


def _never_stored(meta: TransactionMetadata) -> None:
    if meta.state in NEVER_STORED:
        raise IllegalTransactionTransition(
            f"transactional id {meta.transactional_id!r} is stored in state {meta.state.value}, "
            "which the coordinator never stores")


def _fence_and_abort(meta: TransactionMetadata, now: int) -> TransactionMetadata:
    """Ongoing -> (PrepareEpochFence) -> PrepareAbort with the epoch bumped and the last epoch forgotten."""
    if meta.producer_epoch >= MAX_EPOCH:
        raise IllegalTransactionTransition(
            f"transactional id {meta.transactional_id!r} cannot be fenced: its epoch is {MAX_EPOCH}")
    check_transition(meta.transactional_id, meta.state, PREPARE_EPOCH_FENCE)
    fenced = replace(meta, state=PREPARE_EPOCH_FENCE)
    return fenced.moved(PREPARE_ABORT, producer_epoch=meta.producer_epoch + 1,
                        last_producer_epoch=NO_PRODUCER_EPOCH, last_update_timestamp=now,
                        client_transaction_version=0)


# InitProducerId ------------------------------------------------------------------------------------
def init_producer_id(current: TransactionMetadata | None, transactional_id: str, timeout_ms: int, now: int, *,
                     max_timeout_ms: int, new_producer_id: Callable[[], int],
                     expected: tuple[int, int] | None = None) -> Decision:
    """InitProducerId with a transactional id (a request without one is the idempotent producer's and is
    not the coordinator's business). ``expected`` is the (producer id, epoch) a v3+ request names when
    the producer recovers from an error; ``new_producer_id`` is called only when a new id is needed (a
    new transactional id, or the epochs of the current id are exhausted)."""
    if not transactional_id:
        return Decision(INVALID_REQUEST)
    if not 0 < timeout_ms <= max_timeout_ms:
        return Decision(INVALID_TRANSACTION_TIMEOUT)
    if current is None:
        current = TransactionMetadata(transactional_id, new_producer_id(), timeout_ms=timeout_ms,
                                      last_update_timestamp=now)
    if current.pending is not None:
        return Decision(CONCURRENT_TRANSACTIONS)
    if expected is not None and not _may_reinit(current, *expected):
        return Decision(PRODUCER_FENCED)
    _never_stored(current)
    if current.state in COMPLETING:
        return Decision(CONCURRENT_TRANSACTIONS)
    if current.state is ONGOING:
        return Decision(CONCURRENT_TRANSACTIONS, _fence_and_abort(current, now))
    reset = dict(timeout_ms=timeout_ms, partitions=frozenset(), start_timestamp=-1, last_update_timestamp=now,
                 previous_producer_id=current.producer_id, client_transaction_version=0)
    if current.epoch_exhausted and (expected is None or expected[1] == current.producer_epoch):
        last = current.producer_epoch if expected is not None else NO_PRODUCER_EPOCH
        return Decision(NONE, current.moved(EMPTY, producer_id=new_producer_id(), producer_epoch=0,
                                            last_producer_epoch=last, **reset))
    epoch, last = current.producer_epoch + 1, NO_PRODUCER_EPOCH
    if expected is not None:
        if current.producer_epoch == NO_PRODUCER_EPOCH or expected[1] == current.producer_epoch:
            last = current.producer_epoch  # the producer goes on after an error: bump, remember the old
        elif expected[1] == current.last_producer_epoch:
            epoch, last = current.producer_epoch, current.last_producer_epoch  # a retry of a bump it missed
        else:
            return Decision(PRODUCER_FENCED)
    return Decision(NONE, current.moved(EMPTY, producer_epoch=epoch, last_producer_epoch=last, **reset))


def _may_reinit(meta: TransactionMetadata, producer_id: int, epoch: int) -> bool:
    """Kafka's check of the producer id a re-initialising producer names: the current one, any when the
    metadata is new, or the previous one when its epochs were exhausted (a retry after a rotation)."""
    return (meta.producer_epoch == NO_PRODUCER_EPOCH or producer_id == meta.producer_id
            or (producer_id == meta.previous_producer_id and epoch >= MAX_EPOCH - 1))


# AddPartitionsToTxn, AddOffsetsToTxn -----------------------------------------------------------------
def _check_producer(current: TransactionMetadata | None, transactional_id: str, producer_id: int,
                    producer_epoch: int) -> int:
    if not transactional_id:
        return INVALID_REQUEST
    if current is None or current.producer_id != producer_id:
        return INVALID_PRODUCER_ID_MAPPING
    if current.producer_epoch != producer_epoch:
        return PRODUCER_FENCED
    if current.pending is not None:
        return CONCURRENT_TRANSACTIONS
    return NONE


def add_partitions(current: TransactionMetadata | None, transactional_id: str, producer_id: int,
                   producer_epoch: int, partitions: Iterable[TopicPartition], now: int) -> Decision:
    """AddPartitionsToTxn (v0-v3, one transaction per request): the error answered for every partition.
    The first partition of a transaction starts it (and its timeout); partitions already in an open
    transaction are answered at once with nothing to store."""
    error = _check_producer(current, transactional_id, producer_id, producer_epoch)
    if error != NONE:
        return Decision(error)
    assert current is not None
    added = frozenset(partitions)
    if current.state in COMPLETING:
        return Decision(CONCURRENT_TRANSACTIONS)
    if current.state is ONGOING and added <= current.partitions:
        return Decision(NONE)
    start = now if current.state in (EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT) else current.start_timestamp
    return Decision(NONE, current.moved(ONGOING, partitions=current.partitions | added, start_timestamp=start,
                                        last_update_timestamp=now, client_transaction_version=0))


def add_offsets(current: TransactionMetadata | None, transactional_id: str, producer_id: int,
                producer_epoch: int, group_id: str, now: int, *, offsets_partitions: int) -> Decision:
    """AddOffsetsToTxn: the ``__consumer_offsets`` partition holding ``group_id`` (of the topic's
    ``offsets_partitions``, placed as the group coordinator places it) joins the transaction, exactly as
    AddPartitionsToTxn would add it."""
    return add_partitions(current, transactional_id, producer_id, producer_epoch,
                          [(OFFSETS_TOPIC, coordinator_partition(group_id, offsets_partitions))], now)


def transaction_partition(transactional_id: str, partitions: int) -> int:
    """The ``__transaction_state`` partition (of ``transaction.state.log.num.partitions``) that holds
    ``transactional_id``: Kafka's ``Utils.abs(transactionalId.hashCode()) % partitions``, so that a
    directory Kafka wrote finds each id where Kafka put it (FindCoordinator answers the same)."""
    return coordinator_partition(transactional_id, partitions)


# EndTxn and the markers ------------------------------------------------------------------------------
def end_txn(current: TransactionMetadata | None, transactional_id: str, producer_id: int, producer_epoch: int,
            commit: bool, now: int) -> Decision:
    """EndTxn (v0-v4): from Ongoing, the Prepare state to store (the markers follow); otherwise the
    ``END_TXN`` table's answer."""
    error = _check_producer(current, transactional_id, producer_id, producer_epoch)
    if error != NONE:
        return Decision(error)
    assert current is not None
    _never_stored(current)
    outcome = END_TXN[current.state, commit]
    if isinstance(outcome, int):
        return Decision(outcome)
    return Decision(NONE, current.moved(outcome, last_update_timestamp=now, client_transaction_version=0))


def complete(current: TransactionMetadata, now: int) -> TransactionMetadata:
    """Every marker of a PrepareCommit or PrepareAbort is written: the Complete state to store, which
    leaves the transaction with no partitions (IllegalTransactionTransition from any other state)."""
    target = COMPLETE_COMMIT if current.state is PREPARE_COMMIT else COMPLETE_ABORT
    return current.moved(target, partitions=frozenset(), last_update_timestamp=now)


# Timeouts and expiry -------------------------------------------------------------------------------
def timed_out(current: TransactionMetadata, now: int) -> bool:
    """The transaction has been open longer than its timeout and nothing is being written for it."""
    return (current.pending is None and current.state is ONGOING
            and current.start_timestamp + current.timeout_ms < now)


def abort_timed_out(current: TransactionMetadata, now: int) -> TransactionMetadata | None:
    """The abort to store for a timed-out transaction (the epoch bumped, so that its producer is
    fenced, as Kafka's abortTimedOutTransactions does), or None when it has not timed out."""
    return _fence_and_abort(current, now) if timed_out(current, now) else None


def expired(current: TransactionMetadata, now: int, expiration_ms: int) -> TransactionMetadata | None:
    """The Dead metadata (stored as a tombstone) of a transactional id unused for ``expiration_ms``
    (``transactional.id.expiration.ms``) with no transaction open; None when it is still kept."""
    if (current.pending is None and current.state in EXPIRATION_ALLOWED
            and current.last_update_timestamp <= now - expiration_ms):
        return current.moved(DEAD)
    return None
