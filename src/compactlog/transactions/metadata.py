"""What the transaction coordinator knows of one transactional id (Kafka's TransactionMetadata), immutable.

The coordinator (to come) keeps one ``TransactionMetadata`` per transactional id, replaces it with the one
a decision of ``coordinator.py`` returns once that has been written to ``__transaction_state``, and
rebuilds them all from that topic at start with ``from_log_value``. Kafka mutates one object under a
lock and marks a write in flight with a *pending state*; here a new value replaces the old, and
``pending`` plays that part (the caller sets it while a write is under way, so that concurrent requests
are answered CONCURRENT_TRANSACTIONS as Kafka answers them).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .log_records import TransactionLogValue, encode_key, encode_value
from .state import EMPTY, DEAD, TransactionState, check_transition

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
#: Epochs stop here: a producer is never handed 32767, so the coordinator can always fence one epoch
#: higher (Kafka's ``isEpochExhausted``: epoch >= Short.MaxValue - 1 asks for a new producer id).
MAX_EPOCH = 32767

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class TransactionMetadata:
    """One transactional id's producer, epochs, transaction and timestamps.

    ``last_producer_epoch`` is the epoch before the last bump, kept in memory only (a retried
    InitProducerId that names it gets the current epoch again); ``previous_producer_id`` is the producer
    id before the last InitProducerId (a retry after a producer id rotation names it)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    timeout_ms: int = 60_000
    state: TransactionState = EMPTY
    partitions: frozenset[TopicPartition] = frozenset()
    start_timestamp: int = -1  # when the first partition of the open transaction was added
    last_update_timestamp: int = -1
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0
    pending: TransactionState | None = None  # a write of this state is under way (Kafka's pendingState)

    @property
    def epoch_exhausted(self) -> bool:
        """No further epoch may be handed out for this producer id: the next InitProducerId gives a new id."""
        return self.producer_epoch >= MAX_EPOCH - 1

    def moved(self, state: TransactionState, **changes) -> "TransactionMetadata":
        """This metadata in ``state`` with ``changes``, after checking the move against the state table."""
        check_transition(self.transactional_id, self.state, state)
        return replace(self, state=state, pending=None, **changes)


def partitions_field(partitions: frozenset[TopicPartition]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """The TransactionPartitions entries of a set of partitions: one per topic, both sorted (Kafka groups
    by topic in a hash order; any order reads back the same)."""
    topics: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        topics.setdefault(topic, []).append(partition)
    return tuple((topic, tuple(ids)) for topic, ids in topics.items())


def to_log_value(meta: TransactionMetadata) -> TransactionLogValue:
    """The value Kafka writes for ``meta``: partitions null in Empty, the producer id links left at their
    defaults (Kafka's classic coordinator does not write them)."""
    if meta.state is EMPTY and meta.partitions:
        raise ValueError(f"transactional id {meta.transactional_id!r} is Empty but holds partitions")
    return TransactionLogValue(
        producer_id=meta.producer_id, producer_epoch=meta.producer_epoch,
        transaction_timeout_ms=meta.timeout_ms, state=meta.state,
        partitions=None if meta.state is EMPTY else partitions_field(meta.partitions),
        last_update_timestamp_ms=meta.last_update_timestamp, start_timestamp_ms=meta.start_timestamp,
        client_transaction_version=meta.client_transaction_version)


def from_log_value(transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
    """The metadata a replay of ``__transaction_state`` rebuilds from one value, as Kafka's load does:
    the last epoch is not stored (so it is unknown), and an Empty state holds no partitions."""
    partitions = frozenset() if value.state is EMPTY else frozenset(
        (topic, p) for topic, ids in value.partitions or () for p in ids)
    return TransactionMetadata(
        transactional_id=transactional_id, producer_id=value.producer_id, producer_epoch=value.producer_epoch,
        last_producer_epoch=NO_PRODUCER_EPOCH, timeout_ms=value.transaction_timeout_ms, state=value.state,
        partitions=partitions, start_timestamp=value.start_timestamp_ms,
        last_update_timestamp=value.last_update_timestamp_ms, previous_producer_id=value.previous_producer_id,
        next_producer_id=value.next_producer_id, client_transaction_version=value.client_transaction_version)


def log_record(meta: TransactionMetadata, value_version: int = 0) -> tuple[bytes, bytes | None]:
    """The ``__transaction_state`` record (key, value) that stores ``meta``; a Dead id is a tombstone."""
    key = encode_key(meta.transactional_id)
    if meta.state is DEAD:
        return key, None
    return key, encode_value(to_log_value(meta), value_version)
