"""The replay of ``__transaction_state`` into the coordinator's cache (Kafka's loadTransactionMetadata).

When the transaction coordinator (to come, in the broker) takes a partition of ``__transaction_state``,
it reads the partition from its start and rebuilds the metadata of every transactional id stored there;
``load_partition`` does that through the embedded API and ``replay`` is the same over any iterable of
(offset, key bytes, value bytes), so that the rules are tested without a log. The rules are Kafka's:

- records are read in offset order and the last value of a transactional id wins;
- a tombstone (null value) removes the id: it expired;
- a key of a version Kafka does not define (a newer Kafka's record type, or the leftover of an aborted
  upgrade) is skipped and counted;
- damage is the group coordinator's rule for ``__consumer_offsets`` (``server/coordinator/manager.py``):
  a record without a key, or whose key or value does not parse, is skipped with a warning naming the
  partition and the offset and counted in ``unreadable``; a batch failing its CRC is skipped with an
  error; a partition whose structure is damaged is loaded from the records before the damage. Kafka
  logs the error and keeps what it loaded before the first bad record, and serves. Failing the load
  instead left the coordinator loading for ever, every transactional producer of every id answered
  COORDINATOR_LOAD_IN_PROGRESS, over one flipped byte; skipping keeps the later records of the damaged
  one's id (each record holds an id's whole metadata, so the next one replaces it).

What the loaded metadata asks for next is returned with it: the transactions stored in PrepareCommit or
PrepareAbort were decided but their markers may not all be written (Kafka writes the markers again
after a load, then stores the Complete state), and those Ongoing past their timeout are to be aborted
(Kafka's periodic ``abortTimedOutTransactions`` finds them; at load, after a restart, it is the first
thing to do). Nothing here writes markers or records: the broker's coordinator will.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
import logging
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

from ..errors import CompactLogError, CorruptRecordError
from ..reading import loadable_batches
from .coordinator import TRANSACTION_STATE_TOPIC, timed_out
from .log_records import decode_key, decode_value
from .metadata import TransactionMetadata, from_log_value
from .state import COMPLETING, NEVER_STORED

if TYPE_CHECKING:
    from ..api import CompactLog

log = logging.getLogger(__name__)

#: One stored record as the replay reads it: (offset, key, value), None for a missing key or a tombstone.
StoredRecord = tuple[int, "bytes | None", "bytes | None"]


@dataclass(frozen=True, slots=True)
class LoadedTransactions:
    """What one partition of ``__transaction_state`` holds after a replay.

    ``transactions`` maps each transactional id to its metadata; ``to_complete`` (PrepareCommit and
    PrepareAbort: write their markers, then store the Complete state) and ``to_abort`` (Ongoing past
    their timeout) are among them, sorted by transactional id. ``skipped`` counts the records whose key
    is of an unknown version, ``unreadable`` those that do not parse (skipped with a warning)."""

    partition: int
    transactions: Mapping[str, TransactionMetadata]
    to_complete: tuple[TransactionMetadata, ...]
    to_abort: tuple[TransactionMetadata, ...]
    skipped: int = 0
    unreadable: int = 0


def replay(records: Iterable[StoredRecord], partition: int, now: int) -> LoadedTransactions:
    """Replay ``records`` of ``__transaction_state`` partition ``partition`` in the order given (offset
    order), with ``now`` (milliseconds) deciding which open transactions have timed out."""
    cache: dict[str, TransactionMetadata] = {}
    skipped = unreadable = 0
    for offset, key, value in records:
        try:
            if key is None:
                raise CorruptRecordError("the record has no key (every record of the topic names a "
                                         "transactional id)")
            transactional_id = decode_key(key)
            if transactional_id is None:
                skipped += 1
                continue
            stored = decode_value(value)
            meta = None if stored is None else from_log_value(transactional_id, stored)
            if meta is not None and meta.state in NEVER_STORED:  # a request meeting it would fail: damage
                raise CorruptRecordError(f"the state {meta.state.value} is never stored")
        except CompactLogError as exc:
            unreadable += 1
            log.warning("skipping the unreadable record at %s-%d offset %d: %s", TRANSACTION_STATE_TOPIC,
                        partition, offset, exc)
            continue
        if meta is None:
            cache.pop(transactional_id, None)
        else:
            cache[transactional_id] = meta
    ordered = [cache[t] for t in sorted(cache)]
    return LoadedTransactions(
        partition=partition,
        transactions=MappingProxyType(cache),
        to_complete=tuple(m for m in ordered if m.state in COMPLETING),
        to_abort=tuple(m for m in ordered if timed_out(m, now)),
        skipped=skipped,
        unreadable=unreadable,
    )


def load_partition(cl: "CompactLog", partition: int, now: int) -> LoadedTransactions:
    """Replay partition ``partition`` of ``__transaction_state`` from the log ``cl`` holds (an empty
    load when the topic does not exist yet, as Kafka finds no log). Blocking: the broker runs it in a
    thread. Damage is skipped as the module's docstring says."""
    if not cl.has_topic(TRANSACTION_STATE_TOPIC):
        return replay((), partition, now)
    return replay(_stored_records(cl.partition(TRANSACTION_STATE_TOPIC, partition), partition), partition, now)


def _stored_records(part, partition: int) -> Iterator[StoredRecord]:
    """The partition's records in offset order, as ``reading.loadable_batches`` passes them."""
    for batch, records in loadable_batches(part.batches(check_crcs=False), TRANSACTION_STATE_TOPIC, partition,
                                           "the transactional ids' states it held are lost"):
        if not batch.is_control:
            yield from ((r.offset, r.key, r.value) for r in records)
