"""The transactions open in partitions, set beside what the transaction coordinator holds.

A partition's open transactions come from the embedded API (``Partition.open_transactions``: producer
id, epoch, first offset, the time of the producer's last batch); the coordinator's transactional ids from
``server.state_views.transactions``, read on the event loop and handed here as plain values. A
transaction is **hanging** by kafka-transactions' ``find-hanging`` rule: open for longer than
``transaction.max.timeout.ms`` (by its last write) while no transactional id's open transaction at the
coordinator holds that partition, so no marker will ever end it and read_committed consumers stay
behind its first offset until someone aborts it (``compactlog transactions abort``).

Reading a partition's open transactions loads its producer state when it is not in memory yet: these
functions run on the console's threads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..errors import CompactLogError


@dataclass(frozen=True)
class OpenTxnRow:
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    first_offset: int
    last_timestamp: int  # the producer's last batch in this partition
    coordinator_epoch: int
    age_ms: int  # since that last batch (never below 0: a producer's clock may run ahead)
    transactional_id: str | None  # the id whose open transaction holds this partition, if one does
    hanging: bool


def partition_rows(part, topic: str, partition: int, view, now_ms: int) -> list[OpenTxnRow]:
    """The open transactions of one partition (``part``: a ``Partition``), by first offset. ``view``: the
    coordinator's ``TransactionsView``, or None beside no coordinator (nothing is then called hanging)."""
    holders = view.by_producer() if view is not None else {}
    judged = view is not None and view.unavailable is None
    rows = []
    for t in part.open_transactions():
        holder = holders.get(t.producer_id)
        held = holder is not None and holder.holds(topic, partition)
        age = max(0, now_ms - t.last_timestamp)
        rows.append(OpenTxnRow(topic, partition, t.producer_id, t.producer_epoch, t.first_offset, t.last_timestamp,
                               t.coordinator_epoch, age, holder.transactional_id if held else None,
                               judged and not held and age > view.max_timeout_ms))
    return rows


def all_rows(cl, view, now_ms: int, visible: Callable[[str], bool]) -> list[OpenTxnRow]:
    """The open transactions of every partition of the topics ``visible`` lets the viewer describe; a
    topic deleted while we looked is skipped."""
    rows: list[OpenTxnRow] = []
    for topic in cl.list_topics():
        if not visible(topic):
            continue
        try:
            for p in range(cl.partitions_for(topic)):
                rows += partition_rows(cl.partition(topic, p), topic, p, view, now_ms)
        except CompactLogError:
            continue
    return rows
