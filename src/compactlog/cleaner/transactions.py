"""Transaction-aware cleaning: which batches of transactions and which markers a round keeps.

Kafka's cleaner (``Cleaner.java`` with ``CleanedTransactionMetadata``) has rules for transactional
data, and the log cleaner, the Spark compaction job and the compactor all follow them through here:

* **The offset map.** Records of aborted transactions never enter it, so they cannot shadow
  committed records. A batch is aborted when it is transactional and lies in an aborted transaction of
  its producer, as the ``.txnindex`` files list them: from the transaction's first offset up to its
  ABORT marker (:class:`AbortedRanges`, a rule that needs no state, so the Spark job's scan of any
  range and the compactor use it as they are).
* **Copying** walks the round's batches in order with :class:`CleanedTransactions`, Kafka's state:
  the aborted transactions met so far (and whether a batch of theirs was seen this round), and the
  producers with a committed transaction seen but not yet its COMMIT marker. From it each batch gets
  its fate (:class:`BatchFates`):

  - a batch of an aborted transaction loses every record;
  - an ABORT marker stays while the round saw a batch of its transaction (its ``.txnindex`` entry is
    then written again, into the cleaned segment's index); a COMMIT marker may go once the round saw
    no batch of its transaction since the previous one; an empty control batch may go;
  - a marker that may go goes only once its batch's delete horizon has passed: the first round that
    finds it removable stamps the horizon (``now + delete.retention.ms``, KIP-534), a later one removes
    it, as for tombstones;
  - the batch holding a producer's last data offset (its last sequence) is kept, emptied of its
    records if they all go, so the producer's state and duplicate detection survive; for a producer
    whose last entry is a marker, its markers of its current epoch are kept (the epoch fences);
  - the batch ending at the round's upper bound is kept, empty if need be (the rule for every log).

The walk reads batch headers only (and a marker's one record), in Python, batch by batch; the records
of a chunk are dropped by one mask, never by a loop per record. A chunk with no transactional batch,
no control batch and no producer's last batch costs one scan of its batches' attributes.

The Spark job cleans a log's segment groups in separate tasks; :func:`carried_states` walks the
headers once beforehand and gives each group the state the walk has when it reaches the group, so each
task decides exactly as the one local walk would.
"""

from __future__ import annotations

import copy
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Mapping, Sequence

from ..records.batch import CONTROL_BIT, TRANSACTIONAL_BIT, RecordBatch
from ..records.control import ABORT, COMMIT, read_control_record
from ..storage.transaction_index import AbortedTxn

TXN_OR_CONTROL = TRANSACTIONAL_BIT | CONTROL_BIT


@dataclass(frozen=True, slots=True)
class LastRecord:
    """What a round must keep of one active producer (Kafka's ``LastRecord``): the last offset of its
    last data batch (-1 when its last entry is a marker) and its epoch."""

    last_data_offset: int
    producer_epoch: int


class AbortedRanges:
    """The aborted transactions of a range of a log, by producer: which transactional batches are
    aborted, without any walk (each batch on its own).

    A batch of producer P is aborted iff it is transactional, not a control batch, and some aborted
    transaction of P spans it: first offset <= its last offset < the ABORT marker's offset. (A producer
    has one transaction open at a time, so its aborted ranges never overlap.)"""

    def __init__(self, txns: Iterable[AbortedTxn]) -> None:
        by_pid: dict[int, list[tuple[int, int]]] = {}
        for t in txns:
            by_pid.setdefault(t.producer_id, []).append((t.first_offset, t.last_offset))
        self._firsts: dict[int, list[int]] = {}
        self._lasts: dict[int, list[int]] = {}
        for pid, spans in by_pid.items():
            spans = sorted(set(spans))
            self._firsts[pid] = [f for f, _ in spans]
            self._lasts[pid] = [m for _, m in spans]

    def __bool__(self) -> bool:
        return bool(self._firsts)

    def is_aborted(self, batch: RecordBatch) -> bool:
        if (batch.attributes & TXN_OR_CONTROL) != TRANSACTIONAL_BIT:
            return False
        firsts = self._firsts.get(batch.producer_id)
        if firsts is None:
            return False
        last = batch.base_offset + batch.last_offset_delta
        i = bisect_right(firsts, last) - 1
        return i >= 0 and last < self._lasts[batch.producer_id][i]

    def aborted(self, batches: Sequence[RecordBatch]) -> list[int] | None:
        """Indexes of the aborted batches among ``batches``; None when there are none."""
        if not self._firsts:
            return None
        found = [i for i, b in enumerate(batches) if b.attributes & TXN_OR_CONTROL == TRANSACTIONAL_BIT
                 and self.is_aborted(b)]
        return found or None


@dataclass
class BatchFates:
    """The transaction rules' word on some batches of a chunk, by index in the chunk (every batch not
    named follows the plain rules): ``discard``, every record of the batch goes (a batch of an aborted
    transaction, a marker past its horizon that may go); ``retain_empty``, the batch stays as its
    61-byte header if no record survives; ``mark``, a marker kept for now that may go once its delete
    horizon passes, which it gains here if it has none."""

    discard: set[int] = field(default_factory=set)
    retain_empty: set[int] = field(default_factory=set)
    mark: set[int] = field(default_factory=set)


@dataclass
class _Aborted:
    txn: AbortedTxn
    seen: bool = False  # a batch of it was met this round (Kafka's lastObservedBatchOffset is set)


class CleanedTransactions:
    """One round's walk over a log's batches in offset order (Kafka's ``CleanedTransactionMetadata``).

    ``aborted``: the aborted transactions of the walked range (from the ``.txnindex`` files; order does
    not matter). ``last_records``: the active producers' :class:`LastRecord`, by producer id.
    ``index_entries`` collects, in marker order, the ``.txnindex`` entries of the ABORT markers kept
    since the last :meth:`take_index_entries` (the cleaned segment's index)."""

    def __init__(self, aborted: Iterable[AbortedTxn] = (), last_records: Mapping[int, LastRecord] | None = None) -> None:
        self._pending: list[AbortedTxn] = sorted(set(aborted), key=lambda t: (t.first_offset, t.last_offset))
        self._next = 0  # _pending[_next:] are not yet met
        self.ongoing_aborted: dict[int, _Aborted] = {}
        self.ongoing_committed: set[int] = set()
        self.index_entries: list[AbortedTxn] = []
        self.last_records: dict[int, LastRecord] = dict(last_records or {})
        self._last_data = sorted(r.last_data_offset for r in self.last_records.values() if r.last_data_offset >= 0)

    # Kafka's two callbacks ------------------------------------------------------------------------
    def _meet_aborted_up_to(self, offset: int) -> None:
        pending = self._pending
        while self._next < len(pending) and pending[self._next].first_offset <= offset:
            t = pending[self._next]
            self._next += 1
            self.ongoing_aborted.setdefault(t.producer_id, _Aborted(t))

    def on_batch(self, batch: RecordBatch) -> bool:
        """A data batch read: whether it belongs to an aborted transaction (and may be discarded)."""
        self._meet_aborted_up_to(batch.last_offset)
        if not batch.attributes & TRANSACTIONAL_BIT:
            return False
        ongoing = self.ongoing_aborted.get(batch.producer_id)
        if ongoing is not None:
            ongoing.seen = True
            return True
        self.ongoing_committed.add(batch.producer_id)
        return False

    def on_control(self, batch: RecordBatch) -> bool:
        """A control batch read: whether it may be discarded (once its delete horizon passes)."""
        self._meet_aborted_up_to(batch.last_offset)
        record = read_control_record(batch)
        if record is None:  # emptied by an earlier round: nothing left to keep
            return True
        pid = batch.producer_id
        if record.type_id == ABORT:
            ongoing = self.ongoing_aborted.pop(pid, None)
            if ongoing is not None and ongoing.seen:
                self.index_entries.append(ongoing.txn)
                return False
            return True
        if record.type_id == COMMIT:
            if pid in self.ongoing_committed:
                self.ongoing_committed.discard(pid)
                return False
            return True
        return False  # a control record of another kind is kept

    def take_index_entries(self) -> list[AbortedTxn]:
        """The kept ABORT markers' index entries collected since the last call (one cleaned segment's)."""
        out, self.index_entries = self.index_entries, []
        return out

    # the chunk's fates ------------------------------------------------------------------------------
    def is_last_of_producer(self, batch: RecordBatch) -> bool:
        """Kafka's ``isBatchLastRecordOfProducer``: the batch holds its active producer's last data
        offset, or, for a producer whose last entry is a marker, it is a marker of the producer's epoch."""
        rec = self.last_records.get(batch.producer_id)
        if rec is None:
            return False
        if rec.last_data_offset >= 0:
            return batch.base_offset + batch.last_offset_delta == rec.last_data_offset
        return bool(batch.attributes & CONTROL_BIT) and batch.producer_epoch == rec.producer_epoch

    def fates(self, batches: Sequence[RecordBatch], now: int) -> BatchFates | None:
        """Walk ``batches`` (the next ones of the round) and say what the transaction rules decide for
        them; None when they decide nothing (no transactional or control batch, no producer's last)."""
        if not batches:
            return None
        special = [i for i, b in enumerate(batches) if b.attributes & TXN_OR_CONTROL]
        lo = bisect_left(self._last_data, batches[0].base_offset)
        hi = bisect_right(self._last_data, batches[-1].last_offset)
        if lo < hi:  # some producer's last data batch is here (a producer's batch or not, it is met)
            lasts = set(self._last_data[lo:hi])
            special = sorted({*special, *(i for i, b in enumerate(batches) if b.last_offset in lasts)})
        if not special:
            return None
        out = BatchFates()
        records = self.last_records
        for i in special:
            b = batches[i]
            if b.attributes & CONTROL_BIT:
                may_go = self.on_control(b)
                horizon = b.delete_horizon_ms
                discard = may_go and horizon is not None and horizon <= now
                if may_go and not discard:
                    out.mark.add(i)
            else:
                discard = self.on_batch(b)
            if discard:
                out.discard.add(i)
            if b.producer_id in records and self.is_last_of_producer(b):
                out.retain_empty.add(i)
        return out

    # the Spark job's split of the walk ----------------------------------------------------------------
    def for_range(self, end: int) -> "CleanedTransactions":
        """A copy of this state to walk on from here up to ``end`` (exclusive) elsewhere: the aborted
        transactions not yet met are kept only if they start before ``end``; nothing collected."""
        twin = copy.copy(self)
        twin._pending = [t for t in self._pending[self._next:] if t.first_offset < end]
        twin._next = 0
        twin.ongoing_aborted = {pid: _Aborted(a.txn, a.seen) for pid, a in self.ongoing_aborted.items()}
        twin.ongoing_committed = set(self.ongoing_committed)
        twin.index_entries = []
        return twin


def last_records(producers: Mapping[int, tuple[int, int]]) -> dict[int, LastRecord]:
    """:class:`LastRecord` by producer id from the log's ``last_records_of_active_producers`` (last data
    offset or -1, epoch)."""
    return {pid: LastRecord(last, epoch) for pid, (last, epoch) in producers.items()}


def walk(state: CleanedTransactions, batches: Iterable[RecordBatch]) -> None:
    """Advance ``state`` over ``batches`` as a round would, without writing anything."""
    for b in batches:
        if b.attributes & CONTROL_BIT:
            state.on_control(b)
        elif b.attributes & TRANSACTIONAL_BIT:
            state.on_batch(b)


def carried_states(state: CleanedTransactions, batches: Iterable[RecordBatch],
                   starts: Sequence[int], ends: Sequence[int]) -> Iterator[CleanedTransactions]:
    """For each range [starts[i], ends[i]) of a round (in order, not overlapping), the state a walk of
    the round has when it reaches starts[i], restricted to that range (:meth:`CleanedTransactions.for_range`).
    ``batches`` are the round's batches in order from its start; ``state`` is advanced over them."""
    it = iter(batches)
    pending: RecordBatch | None = None
    for start, end in zip(starts, ends):
        while True:
            b = pending if pending is not None else next(it, None)
            pending = None
            if b is None:
                break
            if b.base_offset >= start:
                pending = b
                break
            walk(state, (b,))
        yield state.for_range(end)


__all__ = ["AbortedRanges", "BatchFates", "CleanedTransactions", "LastRecord", "carried_states", "last_records",
           "walk"]
