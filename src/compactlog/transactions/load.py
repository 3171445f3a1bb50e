"""The replay of ``__transaction_state`` into the coordinator's cache (Kafka's loadTransactionMetadata).

When the transaction coordinator (to come, in the broker) takes a partition of ``__transaction_state``,
it reads the partition from its start and rebuilds the metadata of every transactional id stored there;
``load_partition`` does that through the embedded API and ``replay`` is the same over any iterable of
(offset, key bytes, value bytes), so that the rules are tested without a log. The rules are Kafka's:

- records are read in offset order and the last value of a transactional id wins;
- a tombstone (null value) removes the id: it expired;
- a key of a version Kafka does not define (a newer Kafka's record type, or the leftover of an aborted
  upgrade) is skipped and counted;
- a record without a key, a key or a value that does not parse raises ``CorruptRecordError`` naming the
  partition and the offset. Kafka logs the error and keeps what it loaded before the record; here the
  load fails, because a coordinator that silently forgot a transaction would answer its producer wrong
  and leave its partitions' last stable offset stuck.

What the loaded metadata asks for next is returned with it: the transactions stored in PrepareCommit or
PrepareAbort were decided but their markers may not all be written (Kafka writes the markers again
after a load, then stores the Complete state), and those Ongoing past their timeout are to be aborted
(Kafka's periodic ``abortTimedOutTransactions`` finds them; at load, after a restart, it is the first
thing to do). Nothing here writes markers or records: the broker's coordinator will.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

from ..errors import CorruptRecordError
from .coordinator import TRANSACTION_STATE_TOPIC, timed_out
from .log_records import decode_key, decode_value
from .metadata import TransactionMetadata, from_log_value
from .state import COMPLETING

if TYPE_CHECKING:
    from ..api import CompactLog

#: One stored record as the replay reads it: (offset, key, value), None for a missing key or a tombstone.
StoredRecord = tuple[int, "bytes | None", "bytes | None"]


@dataclass(frozen=True, slots=True)
class LoadedTransactions:
    """What one partition of ``__transaction_state`` holds after a replay.

    ``transactions`` maps each transactional id to its metadata; ``to_complete`` (PrepareCommit and
    PrepareAbort: write their markers, then store the Complete state) and ``to_abort`` (Ongoing past
    their timeout) are among them, sorted by transactional id. ``skipped`` counts the records whose key
    is of an unknown version."""

    partition: int
    transactions: Mapping[str, TransactionMetadata]
    to_complete: tuple[TransactionMetadata, ...]
    to_abort: tuple[TransactionMetadata, ...]
    skipped: int = 0


def replay(records: Iterable[StoredRecord], partition: int, now: int) -> LoadedTransactions:
    """Replay ``records`` of ``__transaction_state`` partition ``partition`` in the order given (offset
    order), with ``now`` (milliseconds) deciding which open transactions have timed out."""
    cache: dict[str, TransactionMetadata] = {}
    skipped = 0
    for offset, key, value in records:
        where = f"{TRANSACTION_STATE_TOPIC}-{partition} offset {offset}"
        if key is None:
            raise CorruptRecordError(f"{where}: the record has no key (every record of the topic names "
                                     "a transactional id)")
        try:
            transactional_id = decode_key(key)
            if transactional_id is None:
                skipped += 1
                continue
            stored = decode_value(value)
        except CorruptRecordError as exc:
            raise CorruptRecordError(f"{where}: {exc}") from None
        if stored is None:
            cache.pop(transactional_id, None)
        else:
            cache[transactional_id] = from_log_value(transactional_id, stored)
    ordered = [cache[t] for t in sorted(cache)]
    return LoadedTransactions(
        partition=partition,
        transactions=MappingProxyType(cache),
        to_complete=tuple(m for m in ordered if m.state in COMPLETING),
        to_abort=tuple(m for m in ordered if timed_out(m, now)),
        skipped=skipped,
    )


def load_partition(cl: "CompactLog", partition: int, now: int) -> LoadedTransactions:
    """Replay partition ``partition`` of ``__transaction_state`` from the log ``cl`` holds (an empty
    load when the topic does not exist yet, as Kafka finds no log). Blocking: the broker runs it in a
    thread. A batch that fails its CRC raises, as a record that does not parse does."""
    if not cl.has_topic(TRANSACTION_STATE_TOPIC):
        return replay((), partition, now)
    part = cl.partition(TRANSACTION_STATE_TOPIC, partition)
    return replay(((r.offset, r.key, r.value) for r in part.records()), partition, now)
