"""The producer-state and transaction part of ``Log`` (a mixin, so the log's module stays about its
segments): loading the state of idempotent and transactional producers when first needed, snapshots,
expiration, writing transaction markers, and what readers ask of transactions (the last stable offset,
the aborted transactions of a range, the open ones). The rules are in ``producer_state.py`` and
``transactions.py``; this holds the lock and the files, as the rest of the log does.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from ..clock import Time
from ..errors import CorruptRecordError
from . import producer_recovery
from .failure import LogDirFailure
from .producer_state import OpenTransaction, ProducerInfo, ProducerStateManager
from .segment import LogSegment
from .transaction_index import AbortedTxn
from .transactions import aborted_entry, collect_aborted, marker_batch

log = logging.getLogger(__name__)


class ProducerStateLog:
    """Mixed into ``Log``, which provides the attributes below and ``_store``/``segments``."""

    dir: Path
    name: str
    lock: threading.RLock
    failure: LogDirFailure
    producer_state: ProducerStateManager
    _has_snapshots: bool
    _next_offset: int
    time: Time
    segments: tuple[LogSegment, ...]
    active_segment: LogSegment
    high_watermark: int
    log_start_offset: int
    _view: tuple[tuple[int, ...], tuple[LogSegment, ...]]

    def _store(self, data, first: int, last: int, max_ts: int, offset_of_max_ts: int, now: int) -> None: ...

    def write_txn_marker(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int) -> int:
        """Append the COMMIT or ABORT marker of the producer's transaction (the coordinator's write) and
        return its offset; an ABORT that completes an open transaction adds its ``.txnindex`` entry to the
        segment holding the marker. Epoch rules: ``ProducerStateManager.check_marker``."""
        with self.lock:
            self.failure.check()
            now = self.time.milliseconds()
            self._state().check_marker(producer_id, producer_epoch, coordinator_epoch, self.name)
            offset = self._next_offset
            raw = marker_batch(commit, coordinator_epoch, producer_id, producer_epoch, now, offset)
            with self.failure.guard(f"writing a transaction marker to {self.name}"):
                self._store(raw, offset, offset, now, offset, now)
                self._index(self.producer_state.complete(producer_id, producer_epoch, coordinator_epoch, offset, now,
                                                         not commit))
            return offset

    def _index(self, done) -> None:
        """Add the ``.txnindex`` entry of an aborted transaction just completed (its marker is the last
        batch of the active segment)."""
        entry = aborted_entry(done)
        if entry is not None:
            self.active_segment.txn_index.append(entry)

    def _state(self) -> ProducerStateManager:
        """The producer state, loaded first if it is not yet (under the lock)."""
        if not self.producer_state.loaded:
            with self.lock:
                if not self.producer_state.loaded:
                    self._load_producer_state()
        return self.producer_state

    @property
    def last_stable_offset(self) -> int:
        """Below it every transaction is complete: the first offset of the oldest open one (not below the
        log start), else the high watermark."""
        return self._state().last_stable_offset(self.high_watermark, self.log_start_offset)

    def aborted_transactions(self, start: int, end: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions overlapping [start, end), from the
        ``.txnindex`` files (``transactions.collect_aborted``)."""
        return [(t.producer_id, t.first_offset) for t in self.aborted_txns(start, end)]

    def aborted_txns(self, start: int, end: int) -> list[AbortedTxn]:
        """The ``.txnindex`` entries of :meth:`aborted_transactions` (their markers' offsets too)."""
        bases, segs = self._view
        return collect_aborted((bases, segs.__getitem__), start, end)

    def open_transactions(self) -> list[OpenTransaction]:
        with self.lock:
            return self._state().open_transactions()

    def producers(self) -> list[ProducerInfo]:
        with self.lock:
            return self._state().infos()

    def last_records_of_active_producers(self) -> dict[int, tuple[int, int]]:
        """Per producer id: (offset of its last data batch's last record, -1 when it has none; its epoch),
        what the cleaner keeps so that producers' state survives cleaning (Kafka's
        lastRecordsOfActiveProducers)."""
        with self.lock:
            state = self._state()
            return {pid: (e.batches[-1].last_offset if e.batches else -1, e.epoch) for pid, e in state.producers.items()}

    def _load_producer_state(self) -> None:
        """What idempotent producers last wrote: the newest good snapshot and the batches after it, else
        the batch headers of the last two segments (``producer_recovery.py``), less the expired producers."""
        self.producer_state = producer_recovery.load_state(self.dir, self.segments, self._next_offset,
                                                           self.producer_state.expiration_ms, self.time.milliseconds())

    def remove_expired_producers(self, now: int | None = None) -> int:
        """Forget the idempotent producers idle for ``producer.id.expiration.ms`` (Kafka's periodic
        check); how many were forgotten. A state not loaded yet holds none: its load drops them."""
        with self.lock:
            if not self.producer_state.loaded:
                return 0
            return self.producer_state.remove_expired(self.time.milliseconds() if now is None else now)

    def _snapshot_producer_state(self, offset: int, sync_dir: bool = True) -> None:
        """Write ``<offset>.snapshot`` (Kafka's, at a roll and a clean close) once producers were seen:
        the state holds some, or snapshots exist that a later load would otherwise replay further from.
        (A state loaded to answer a reader or the cleaner, holding no producer, writes none.)"""
        if not self._has_snapshots and not (self.producer_state.loaded and self.producer_state.producers):
            return
        try:
            if not self.producer_state.loaded:
                self._load_producer_state()
        except CorruptRecordError as exc:  # damage kept in place: the roll goes on, the next load meets it
            log.warning("no producer snapshot at %d for %s: %s", offset, self.name, exc)
            return
        producer_recovery.take_snapshot(self.dir, self.producer_state, offset, sync_dir)
        self._has_snapshots = True
