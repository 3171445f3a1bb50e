"""What the broker's transaction coordinator holds, as plain values, for the web console.

The console shows the transactional ids and their states beside each partition's open transactions; it
must not reach into the coordinator's objects (their module, their dict, their pending writes), so this
is the one function it calls, and the values it gets are frozen copies. The coordinator's state belongs
to the broker's event loop: call ``transactions`` from a coroutine on that loop (a console handler), never
from a worker thread.
"""

from __future__ import annotations

from dataclasses import dataclass

TRANSACTIONS = "transactions"  # the broker's extras key of the transaction coordinator
# the states in which the coordinator will still write markers to the transaction's partitions
OPEN_STATES = frozenset({"Ongoing", "PrepareCommit", "PrepareAbort"})


@dataclass(frozen=True)
class TransactionalIdView:
    """One transactional id as DescribeTransactions would describe it."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str  # Kafka's name of the state (Ongoing, CompleteCommit, ...)
    timeout_ms: int
    start_timestamp: int  # when the open (or last) transaction began; -1 before any
    last_update_timestamp: int
    partitions: tuple[tuple[str, int], ...]  # of the open transaction (still without a marker, while Prepare*)

    @property
    def open(self) -> bool:
        """Whether the coordinator will still end this id's transaction with markers."""
        return self.state in OPEN_STATES

    def holds(self, topic: str, partition: int) -> bool:
        """Whether the coordinator will write a marker to this partition for this id's transaction."""
        return self.open and (topic, partition) in self.partitions


@dataclass(frozen=True)
class TransactionsView:
    """The coordinator's transactional ids (by id), or why it cannot list them now."""

    ids: tuple[TransactionalIdView, ...]
    max_timeout_ms: int  # transaction.max.timeout.ms: no transaction may stay open longer
    unavailable: str | None = None  # "loading", "not running"; None when ``ids`` is complete

    def by_producer(self) -> dict[int, TransactionalIdView]:
        return {v.producer_id: v for v in self.ids}


def transactions(broker) -> TransactionsView | None:
    """The transaction coordinator's ids, None when this broker runs none. On the broker's event loop."""
    txn = broker.extras.get(TRANSACTIONS)
    if txn is None:
        return None
    max_timeout = int(broker.config.get("transaction.max.timeout.ms"))
    if not txn.active:
        return TransactionsView((), max_timeout, "not running")
    if txn.loading:
        return TransactionsView((), max_timeout, "loading")
    ids = tuple(TransactionalIdView(m.transactional_id, m.producer_id, m.producer_epoch, m.state.value, m.timeout_ms,
                                    m.start_timestamp, m.last_update_timestamp, tuple(sorted(m.partitions)))
                for m in txn.listed())
    return TransactionsView(ids, max_timeout)
