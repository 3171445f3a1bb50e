"""Idempotent producers: per-partition sequence checks, so a retried batch is not stored twice.

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

The state survives restarts in Kafka's ``.snapshot`` files (``producer_snapshot.py`` for the bytes,
``producer_recovery.py`` for which one is loaded and what is replayed after it); with none usable it
is rebuilt from the batch headers of the log's last two segments. Either happens the first time the
state is needed after the process started. Pure rules here; the log holds its lock.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from ..errors import InvalidProducerEpochError, OutOfOrderSequenceError

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
    timestamp of its last batch, and (until transactions are served, always -1) the coordinator epoch
    of its last transaction marker and the first offset of its open transaction."""

    epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=BATCHES_KEPT))
    last_timestamp: int = NONE
    coordinator_epoch: int = NONE
    current_txn_first_offset: int = NONE

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


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
        expected = (entry.last_seq + 1) % SEQUENCES if entry.batches else first_seq
        if first_seq != expected:
            raise OutOfOrderSequenceError(
                f"Out of order sequence number for producer {pid} in {where}: {first_seq} (incoming batch), "
                f"{entry.last_seq} (last stored batch)"
            )
        return None

    def record(self, pid: int, epoch: int, first_seq: int, last_seq: int, first_offset: int, last_offset: int,
               timestamp: int = NONE) -> None:
        """Remember a batch that was stored (an append, or one met while rebuilding); ``timestamp`` is its
        max timestamp."""
        entry = self.producers.get(pid)
        if entry is None or epoch > entry.epoch:
            entry = self.producers[pid] = ProducerEntry(epoch)
        elif epoch < entry.epoch:
            return
        entry.batches.append(BatchSeq(first_seq, last_seq, first_offset, last_offset))
        entry.last_timestamp = timestamp

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
        self.loaded = False
        self.loaded_from = None
        self.batches_replayed = 0
