"""Transactions in a partition's storage: the rules the log applies, kept out of it (Kafka's UnifiedLog,
LogSegment.updateProducerState and LocalLog.collectAbortedTransactions).

- :func:`marker_batch` is the control batch ``write_txn_marker`` stores (``records/control.py`` bytes).
- :func:`apply_stored` records a batch already in the log (a rebuild of the producer state, a follower's
  append) in the producer state: data batches and markers alike, without the checks a client's append
  gets (what is stored stays stored), as Kafka's replication origin does.
- :func:`aborted_entry` is the ``.txnindex`` entry of a completed transaction (None unless aborted).
- :func:`collect_aborted` is the search of the ``.txnindex`` files for a read_committed read of [start,
  end): from the segment holding ``start``, stopping at the first index whose search is complete.

The producer state (``producer_state.py``) holds the open transactions and the epoch rules; the log
(``log.py``) holds the lock and the files.
"""

from __future__ import annotations

import bisect
import logging
from typing import TYPE_CHECKING

from ..errors import CorruptRecordError
from ..records.batch import RecordBatch
from ..records.control import ABORT, COMMIT, build_end_txn_marker, read_control_record
from .producer_state import CompletedTxn, ProducerStateManager, last_sequence
from .transaction_index import AbortedTxn

if TYPE_CHECKING:
    from .reader import Listing

log = logging.getLogger(__name__)

# The leader epoch stamped on stored batches (validator.LEADER_EPOCH: one node, the first and only leader)
MARKER_LEADER_EPOCH = 0


def marker_batch(commit: bool, coordinator_epoch: int, producer_id: int, producer_epoch: int, timestamp: int,
                 offset: int) -> bytes:
    """The COMMIT or ABORT control batch at ``offset`` (ValueError for a field outside its type)."""
    return build_end_txn_marker(COMMIT if commit else ABORT, coordinator_epoch, producer_id=producer_id,
                                producer_epoch=producer_epoch, timestamp=timestamp, base_offset=offset,
                                partition_leader_epoch=MARKER_LEADER_EPOCH)


def apply_stored(state: ProducerStateManager, batch: RecordBatch) -> tuple[CompletedTxn | None, int] | None:
    """Record a stored batch of a producer (a batch with no producer id is ignored). For an end-transaction
    marker: the transaction it completed (or None) and the LSO it leaves (``ProducerStateManager.complete``);
    None for anything else. A control batch emptied by cleaning, or of a type that ends no transaction,
    changes nothing; one whose record cannot be read is logged and skipped (the read path names it)."""
    pid = batch.producer_id
    if pid < 0:
        return None
    if batch.is_control:
        try:
            record = read_control_record(batch)
        except CorruptRecordError as exc:
            log.warning("skipping a control batch the producer state cannot read: %s", exc)
            return None
        if record is None or not record.is_end_txn_marker:
            return None
        return state.complete(pid, batch.producer_epoch, record.coordinator_epoch, batch.base_offset,
                              batch.max_timestamp, record.is_abort)
    state.record(pid, batch.producer_epoch, batch.base_sequence, last_sequence(batch.base_sequence, batch.last_offset_delta),
                 batch.base_offset, batch.last_offset, batch.max_timestamp, batch.is_transactional)
    return None


def is_abort_marker(batch: RecordBatch) -> bool:
    """Whether ``batch`` is an ABORT marker of a producer (False for a batch whose control record is
    unreadable: what cannot be read completes nothing)."""
    if not batch.is_control or batch.producer_id < 0:
        return False
    try:
        record = read_control_record(batch)
    except CorruptRecordError:
        return False
    return record is not None and record.is_abort


def check_index_entries(entries, find, walk) -> None:
    """Raise CorruptRecordError unless each ``.txnindex`` entry agrees with the log: its last offset is
    an ABORT marker of its producer, a batch starting at its first offset is that producer's, and no
    other marker of that producer lies between the two (a first offset moved back into an earlier
    transaction of the same producer would hide its committed records).

    The file has no checksum (Kafka's format), and a flipped producer id or offset would make
    read_committed readers hand out aborted records, or hide committed ones, with no error. ``find``
    gives the first batch whose last offset is at or above an offset, or None; ``walk(start, end)`` the
    batches from the one holding ``start`` to those starting below ``end``. A first offset whose batch
    the cleaner removed starts no batch, and is let be."""
    for entry in entries:
        marker = find(entry.last_offset)
        if (marker is None or marker.base_offset != entry.last_offset or not is_abort_marker(marker)
                or marker.producer_id != entry.producer_id):
            raise CorruptRecordError(f"the transaction index entry {entry} names no ABORT marker of its producer")
        first = find(entry.first_offset)
        if first is not None and first.base_offset == entry.first_offset and (
                first.producer_id != entry.producer_id or not first.is_transactional):
            raise CorruptRecordError(f"the transaction index entry {entry} starts at another producer's batch")
        for batch in walk(entry.first_offset, entry.last_offset):
            if batch.is_control and batch.producer_id == entry.producer_id:
                raise CorruptRecordError(f"the transaction index entry {entry} spans another marker of its "
                                         f"producer, at offset {batch.base_offset}")


def aborted_entry(done: tuple[CompletedTxn | None, int] | None) -> AbortedTxn | None:
    """The ``.txnindex`` entry for what :func:`apply_stored` or ``complete`` returned: only an aborted
    transaction has one (a marker with no transaction open has nothing to index, as in Kafka)."""
    if done is None or done[0] is None or not done[0].is_aborted:
        return None
    txn, lso = done
    return AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, lso)


def collect_aborted(listing: "Listing", start: int, end: int) -> list[AbortedTxn]:
    """The aborted transactions overlapping [start, end), from the ``.txnindex`` of the segment holding
    ``start`` on, in index order (Kafka's collectAbortedTransactions)."""
    bases, segment_at = listing
    found: list[AbortedTxn] = []
    if end <= start:
        return found
    for k in range(max(bisect.bisect_right(bases, start) - 1, 0), len(bases)):
        result = segment_at(k).txn_index.collect_aborted_txns(start, end)
        found += result.aborted
        if result.complete:
            break
    return found
