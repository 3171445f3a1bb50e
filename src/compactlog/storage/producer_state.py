"""Idempotent and transactional producers: per-partition sequence checks, so a retried batch is not
stored twice, and the transactions open in the partition.

An idempotent producer (InitProducerId) stamps each batch with its producer id, epoch and the sequence
number of the batch's first record, counting per partition. Kafka's leader keeps, per producer, the
epoch and the last five batches appended (first and last sequence, first and last offset), and:

* a batch equal to one of those five (same epoch, same sequence range) is a retry whose first attempt
  was stored: it is acknowledged with the offsets of that attempt and not appended again;
* a batch of an older epoch is refused (INVALID_PRODUCER_EPOCH): a newer instance took over the id;
* a batch whose first sequence does not follow the last one (last + 1, wrapping at 2^31 - 1) in the same
  epoch is refused (OUT_OF_ORDER_SEQUENCE_NUMBER): something before it is missing;
* a new epoch must start at sequence 0;
* a producer not known here (never seen, or its state gone with the log's old segments) is accepted at
  any sequence, as Kafka has done since 2.5, rather than answered UNKNOWN_PRODUCER_ID.

A producer is forgotten once its last batch's max timestamp is ``producer.id.expiration.ms`` older than
the broker's clock and it has no transaction open (Kafka's ProducerStateManager.removeExpiredProducers):
when the state is loaded and every ``producer.id.expiration.check.interval.ms`` from the log manager's
housekeeping. So the state, and every snapshot written from it, holds the producers of the last day (by
default), not every producer ever seen. One that writes again afterwards is unknown, accepted as above.

Transactions (Kafka's ProducerAppendInfo and ProducerStateManager): a producer's first transactional
batch with no transaction open here opens one at its first offset; its COMMIT or ABORT marker (written
by the coordinator through the log, or met again while rebuilding) ends it. A data batch that is not
transactional while the producer's transaction is open is refused (INVALID_TXN_STATE). A marker of an
epoch older than the producer's is refused (INVALID_PRODUCER_EPOCH), and so is one whose coordinator
epoch is older than the last marker's (TRANSACTION_COORDINATOR_FENCED); a marker of a newer epoch moves
the producer to it. A marker with no transaction open is still written and recorded (Kafka does), and
completes nothing. The first offset of the oldest open transaction is the first unstable offset: the
last stable offset (LSO) is it (not below the log start), or the high watermark when none is open. An
aborted transaction is completed with the LSO it leaves behind, the first offset of the oldest other
producer's open transaction or the marker's offset + 1: what its ``.txnindex`` entry records.

The state survives restarts in Kafka's ``.snapshot`` files (``producer_snapshot.py`` for the bytes,
``producer_recovery.py`` for which one is loaded and what is replayed after it); with none usable it
is rebuilt from the batch headers of the log's last two segments. Either happens the first time the
state is needed after the process started. Pure rules here; the log holds its lock.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

from ..errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)

SEQUENCES = 2**31  # sequence numbers wrap from 2^31 - 1 to 0
BATCHES_KEPT = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN
EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms's default (broker_config.py declares the setting)


@dataclass(frozen=True, slots=True)
class BatchSeq:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


NONE = -1  # Kafka's "no value" for a timestamp, coordinator epoch or transaction's first offset


@dataclass
class ProducerEntry:
    """A producer's epoch and last batches, with what Kafka's snapshot keeps beside them: the max
    timestamp of its last batch (or marker), the coordinator epoch of its last transaction marker and
    the first offset of its open transaction (-1: none)."""

    epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=BATCHES_KEPT))
    last_timestamp: int = NONE
    coordinator_epoch: int = NONE
    current_txn_first_offset: int = NONE

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


class CompletedTxn(NamedTuple):
    """A transaction a marker ended: its producer, first offset, the marker's offset, and whether it
    was aborted (Kafka's CompletedTxn)."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass(frozen=True, slots=True)
class OpenTransaction:
    """A transaction open in a partition: what DescribeProducers and hanging-transaction checks show."""

    producer_id: int
    producer_epoch: int
    first_offset: int
    last_timestamp: int
    coordinator_epoch: int


@dataclass(frozen=True, slots=True)
class ProducerInfo:
    """One producer as DescribeProducers answers it (-1 where there is no value)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


def last_sequence(first_seq: int, last_offset_delta: int) -> int:
    """Sequence of a batch's last record: sequences wrap from 2^31 - 1 to 0."""
    return (first_seq + last_offset_delta) % SEQUENCES


class ProducerStateManager:
    """The producers writing to one partition, and what they last wrote."""

    def __init__(self, expiration_ms: int = EXPIRATION_MS) -> None:
        self.expiration_ms = expiration_ms
        self.producers: dict[int, ProducerEntry] = {}
        self.loaded = False
        self.loaded_from: int | None = None  # the offset of the snapshot the state was loaded from
        self.batches_replayed = 0  # batch headers read from the log to build it (0 after a snapshot at the end)
        self.ongoing: dict[int, int] = {}  # first offset -> producer id of each open transaction
        # the oldest open transaction's first offset (None: none open), kept as ``ongoing`` changes so
        # that readers of the LSO read one attribute, without the log's lock
        self.first_unstable: int | None = None

    def duplicate_of(self, pid: int, epoch: int, first_seq: int, last_seq: int, where: str) -> BatchSeq | None:
        """The stored batch this one repeats, None if it is new; raises if it must be refused."""
        entry = self.producers.get(pid)
        if entry is None:
            return None
        if epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"Epoch {epoch} of producer {pid} in {where} is older than its current epoch {entry.epoch}"
            )
        if epoch > entry.epoch:
            if first_seq != 0:
                raise OutOfOrderSequenceError(
                    f"Producer {pid} starts epoch {epoch} in {where} at sequence {first_seq}; a new epoch starts at 0"
                )
            return None
        for b in entry.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        # a producer whose batches a marker of a new epoch cleared expects sequence 0 (Kafka's last sequence -1)
        expected = (entry.last_seq + 1) % SEQUENCES if entry.batches or entry.epoch >= 0 else first_seq
        if first_seq != expected:
            raise OutOfOrderSequenceError(
                f"Out of order sequence number for producer {pid} in {where}: {first_seq} (incoming batch), "
                f"{entry.last_seq} (last stored batch)"
            )
        return None

    def check_append(self, pid: int, epoch: int, first_seq: int, last_seq: int, transactional: bool,
                     where: str) -> BatchSeq | None:
        """:meth:`duplicate_of`, then Kafka's transaction rule: while the producer's transaction is open
        here, its data batches must be transactional (INVALID_TXN_STATE)."""
        dup = self.duplicate_of(pid, epoch, first_seq, last_seq, where)
        entry = self.producers.get(pid)
        if dup is None and not transactional and entry is not None and entry.current_txn_first_offset != NONE:
            raise InvalidTxnStateError(
                f"Expected a transactional write from producer {pid} in {where}: its transaction opened at offset "
                f"{entry.current_txn_first_offset} is not complete"
            )
        return dup

    def record(self, pid: int, epoch: int, first_seq: int, last_seq: int, first_offset: int, last_offset: int,
               timestamp: int = NONE, transactional: bool = False) -> None:
        """Remember a batch that was stored (an append, or one met while rebuilding); ``timestamp`` is its
        max timestamp. A transactional batch of a producer with no transaction open opens one."""
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerEntry(epoch)
        elif epoch < entry.epoch:
            return
        elif epoch > entry.epoch:  # Kafka keeps the open transaction and coordinator epoch across epochs
            entry.epoch = epoch
            entry.batches.clear()
        entry.batches.append(BatchSeq(first_seq, last_seq, first_offset, last_offset))
        entry.last_timestamp = timestamp
        if transactional and entry.current_txn_first_offset == NONE:
            entry.current_txn_first_offset = first_offset
            self.track_open(first_offset, pid)

    # transactions ---------------------------------------------------------------------------------
    def track_open(self, first_offset: int, pid: int) -> None:
        self.ongoing[first_offset] = pid
        if self.first_unstable is None or first_offset < self.first_unstable:
            self.first_unstable = first_offset

    def hold_open(self, pid: int, first_offset: int) -> bool:
        """Count the transaction the producer's next batch (at ``first_offset``) opens, before that batch is
        stored, so that an LSO read while it is being appended stays below it; whether it opens one (the
        caller undoes it with :meth:`track_close` if the batch is not stored)."""
        entry = self.producers.get(pid)
        if entry is None or entry.current_txn_first_offset == NONE:
            self.track_open(first_offset, pid)
            return True
        return False

    def track_close(self, first_offset: int) -> None:
        self.ongoing.pop(first_offset, None)
        self.first_unstable = min(self.ongoing) if self.ongoing else None

    def check_marker(self, pid: int, epoch: int, coordinator_epoch: int, where: str) -> None:
        """Refuse a marker of an epoch older than the producer's, or of an older coordinator epoch."""
        entry = self.producers.get(pid)
        if entry is None:
            return
        if epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"Epoch {epoch} of the transaction marker of producer {pid} in {where} is older than its current "
                f"epoch {entry.epoch}"
            )
        if coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"Invalid coordinator epoch for producer {pid} in {where}: {coordinator_epoch} (zombie), "
                f"{entry.coordinator_epoch} (current)"
            )

    def complete(self, pid: int, epoch: int, coordinator_epoch: int, offset: int, timestamp: int,
                 abort: bool) -> tuple[CompletedTxn | None, int]:
        """Record the marker stored at ``offset``: the producer's open transaction, if any, ends. Returns
        it (None when none was open) and the last stable offset it leaves for its ``.txnindex`` entry: the
        first offset of the oldest other producer's open transaction, else ``offset + 1``."""
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerEntry(epoch)
        completed = None
        if entry.current_txn_first_offset != NONE:
            completed = CompletedTxn(pid, entry.current_txn_first_offset, offset, abort)
            self.track_close(entry.current_txn_first_offset)
        lso = min((first for first, other in self.ongoing.items() if other != pid), default=offset + 1)
        if epoch != entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        entry.coordinator_epoch = coordinator_epoch
        entry.current_txn_first_offset = NONE
        entry.last_timestamp = timestamp
        return completed, lso

    def last_stable_offset(self, high_watermark: int, log_start_offset: int) -> int:
        """Kafka's LSO: the first unstable offset (not below the log start), capped by the high watermark."""
        first = self.first_unstable
        if first is None:
            return high_watermark
        return min(max(first, log_start_offset), high_watermark)

    def open_transactions(self) -> list[OpenTransaction]:
        """The open transactions, by first offset."""
        out = []
        for first in sorted(self.ongoing):
            entry = self.producers.get(self.ongoing[first])
            if entry is not None:
                out.append(OpenTransaction(self.ongoing[first], entry.epoch, first, entry.last_timestamp,
                                           entry.coordinator_epoch))
        return out

    def infos(self) -> list[ProducerInfo]:
        """Every producer known, by producer id."""
        return [ProducerInfo(pid, e.epoch, e.last_seq, e.last_timestamp, e.coordinator_epoch,
                             e.current_txn_first_offset) for pid, e in sorted(self.producers.items())]

    def is_expired(self, entry: ProducerEntry, now: int) -> bool:
        """Kafka's rule: idle for the expiration (by its last batch's timestamp) and no transaction open."""
        return entry.current_txn_first_offset == NONE and now - entry.last_timestamp >= self.expiration_ms

    def remove_expired(self, now: int) -> int:
        """Forget the producers idle for ``expiration_ms`` at ``now`` (ms); how many were forgotten."""
        expired = [pid for pid, entry in self.producers.items() if self.is_expired(entry, now)]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    def reset(self) -> None:
        """Forget everything (after a truncation); the next idempotent append rebuilds from the log."""
        self.producers.clear()
        self.ongoing.clear()
        self.first_unstable = None
        self.loaded = False
        self.loaded_from = None
        self.batches_replayed = 0
