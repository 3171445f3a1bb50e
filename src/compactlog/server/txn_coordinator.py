"""The transaction coordinator of this node: Kafka's ``TransactionCoordinator`` over ``__transaction_state``.

The rules are pure functions in ``compactlog.transactions`` (what each request answers, the states, the
record bytes, the replay); this service holds each transactional id's ``TransactionMetadata`` in memory,
stores every change in ``__transaction_state`` before it answers (``txn_log.py``), writes the markers
that end a transaction (``txn_markers.py``) and runs the timers. It lives at
``broker.extras["transactions"]`` and is a broker service like the group coordinator:

- ``start`` replays ``__transaction_state`` in a worker thread (requests are answered
  COORDINATOR_LOAD_IN_PROGRESS meanwhile), then finishes what the log left half done: a transaction
  stored in PrepareCommit or PrepareAbort gets its markers and its Complete state, one open past its
  timeout is aborted;
- every ``transaction.abort.timed.out.transaction.cleanup.interval.ms`` it aborts the transactions open
  longer than their timeout, bumping the epoch so that the producer that left it is fenced (Kafka's
  ``abortTimedOutTransactions``), and tries again the markers that could not be written;
- every ``transaction.remove.expired.transaction.cleanup.interval.ms`` it forgets the ids unused for
  ``transactional.id.expiration.ms`` (a tombstone).

While a change of an id is being written its metadata carries ``pending`` and other requests for that
id are answered CONCURRENT_TRANSACTIONS, as Kafka answers them. EndTxn stores the Prepare state, then
writes the markers and the Complete state; it answers once that is done (or has failed and been left to
the timer), so a producer that goes on with its next transaction does not meet CONCURRENT_TRANSACTIONS.
Time is the broker's clock (``broker.cl.time``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Iterable
from dataclasses import replace
from typing import Any

from ..transactions import coordinator as rules
from ..transactions.coordinator import (
    CONCURRENT_TRANSACTIONS,
    INVALID_PRODUCER_ID_MAPPING,
    INVALID_REQUEST,
    INVALID_TXN_STATE,
    NONE,
    OFFSETS_TOPIC,
    PRODUCER_FENCED,
    Decision,
)
from ..transactions.metadata import TopicPartition, TransactionMetadata, log_record
from ..transactions.state import COMPLETING, DEAD, PREPARE_COMMIT, IllegalTransactionTransition
from ..java_hash import coordinator_partition
from .coordinator import running_group_coordinator
from .txn_log import TransactionStateLog, write_error
from .txn_markers import UNKNOWN_TOPIC_OR_PARTITION, write_marker

log = logging.getLogger(__name__)

EXTRA = "transactions"
COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR = 14, 16
INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED = 47, 52
#: A marker write answering one of these will never succeed: the partition leaves the transaction.
GIVE_UP = frozenset({UNKNOWN_TOPIC_OR_PARTITION, INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED})
LOAD_RETRY_S = 5.0
END_TXN_WAIT_S = 5.0  # how long EndTxn waits for its markers before answering (the timer finishes them)
#: The coordinator epoch written into markers: the leader epoch of the ``__transaction_state`` partition,
#: always 0 on one node (Metadata reports leader epoch 0 for every partition).
COORDINATOR_EPOCH = 0


class TransactionCoordinatorService:
    def __init__(self, broker) -> None:
        cfg = broker.config
        self.broker = broker
        self.time = broker.cl.time
        self.max_timeout_ms: int = cfg.get("transaction.max.timeout.ms")
        self.expiration_ms: int = cfg.get("transactional.id.expiration.ms")
        self.abort_interval_ms: int = cfg.get("transaction.abort.timed.out.transaction.cleanup.interval.ms")
        self.expire_interval_ms: int = cfg.get("transaction.remove.expired.transaction.cleanup.interval.ms")
        self.store = TransactionStateLog(broker.cl, cfg)
        self.transactions: dict[str, TransactionMetadata] = {}
        self.active = False
        self.loading = True
        self.write_marker = write_marker  # (broker, topic, partition, pid, epoch, commit, coordinator epoch) -> code
        self._tasks: set[asyncio.Task] = set()
        self._completing: dict[str, asyncio.Task] = {}
        self._timers: list[asyncio.Task] = []

    def now(self) -> int:
        return self.time.milliseconds()

    # service lifecycle --------------------------------------------------------------------------
    async def start(self) -> None:
        """Load in the background: the server accepts connections meanwhile."""
        self.active = True
        self._timers.append(asyncio.get_running_loop().create_task(self._load_then_run()))

    async def stop(self) -> None:
        """Let writes under way finish (a Prepare without its markers is finished at the next start)."""
        self.active = False
        for t in self._timers:
            t.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=10)

    def spawn(self, coro: Awaitable[Any]) -> asyncio.Task:
        """Run work that must finish even if the client that caused it goes away."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _load_then_run(self) -> None:
        while True:
            try:
                loaded = await asyncio.to_thread(self.store.load, self.now())
                break
            except Exception:
                log.exception("cannot load %s; retrying in %.0f s", "__transaction_state", LOAD_RETRY_S)
                await asyncio.sleep(LOAD_RETRY_S)
        for part in loaded:
            self.transactions.update(part.transactions)
        self.loading = False
        log.info("loaded %d transactional ids from __transaction_state", len(self.transactions))
        for part in loaded:
            for meta in part.to_complete:
                self._complete_later(meta.transactional_id)
        await self.abort_timed_out()
        self._timers.append(asyncio.get_running_loop().create_task(self._every(self.expire_interval_ms,
                                                                                self.expire)))
        await self._every(self.abort_interval_ms, self._abort_and_retry)

    async def _every(self, interval_ms: int, job) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await job()
            except Exception:
                log.exception("the transaction coordinator's %s failed", job.__name__)

    def prepare_topic(self) -> None:
        """Start creating ``__transaction_state`` if it is missing (FindCoordinator: a producer comes)."""
        self.store.prepare(self.spawn)

    def unavailable(self) -> int:
        """Kafka's answer before any transactional request while this coordinator cannot serve: not
        running NOT_COORDINATOR, still loading COORDINATOR_LOAD_IN_PROGRESS; NONE when it can."""
        if not self.active:
            return NOT_COORDINATOR
        if self.loading:
            return COORDINATOR_LOAD_IN_PROGRESS
        return NONE

    # storing ------------------------------------------------------------------------------------
    async def _store(self, old: TransactionMetadata | None, new: TransactionMetadata) -> int:
        """Write ``new`` to ``__transaction_state`` and adopt it; Kafka's code for the client. While the
        write is under way the id's old metadata carries ``pending`` (a new id a placeholder)."""
        tid = new.transactional_id
        before = old if old is not None else TransactionMetadata(tid, new.producer_id, timeout_ms=new.timeout_ms,
                                                                 last_update_timestamp=self.now())
        self.transactions[tid] = replace(before, pending=new.state)
        # The write runs to its end even when the asking client goes away (its connection's task, awaiting
        # here, is cancelled): dropped half way, the id would keep ``pending`` and answer
        # CONCURRENT_TRANSACTIONS to every later request, the next instance's InitProducerId included.
        return await asyncio.shield(self.spawn(self._write(tid, old, new)))

    async def _write(self, tid: str, old: TransactionMetadata | None, new: TransactionMetadata) -> int:
        """``_store``'s append and adoption (or the old state put back when the append fails)."""
        def adopt() -> None:
            if new.state is DEAD:
                self.transactions.pop(tid, None)
            else:
                self.transactions[tid] = new
        try:
            await self.store.append(tid, *log_record(new), apply=adopt)
        except Exception as exc:  # noqa: BLE001 - any failure is the client's error code, memory unchanged
            log.warning("cannot store transactional id %r in state %s: %s", tid, new.state.value, exc)
            if old is None:
                self.transactions.pop(tid, None)
            else:
                self.transactions[tid] = old
            return write_error(exc)
        return NONE

    async def _decide(self, current: TransactionMetadata | None, decision: Decision) -> int:
        """Store what ``decision`` asks for; its error, or the store's when that fails."""
        if decision.metadata is None:
            return decision.error
        stored = await self._store(current, decision.metadata)
        return stored if stored != NONE else decision.error

    # InitProducerId ---------------------------------------------------------------------------
    async def init_producer_id(self, transactional_id: str, timeout_ms: int, expected: tuple[int, int] | None,
                               new_producer_id) -> tuple[int, int, int]:
        """(error, producer id, epoch) for InitProducerId with a transactional id. ``new_producer_id`` is a
        blocking allocator, called in a worker thread only when a new id is needed."""
        if not transactional_id:
            return INVALID_REQUEST, -1, -1
        if not 0 < timeout_ms <= self.max_timeout_ms:
            return rules.INVALID_TRANSACTION_TIMEOUT, -1, -1
        busy = self.unavailable()
        if busy != NONE:
            return busy, -1, -1
        current = self.transactions.get(transactional_id)
        fresh = None
        if current is None or current.epoch_exhausted:
            fresh = await asyncio.to_thread(new_producer_id)
            current = self.transactions.get(transactional_id)  # it may have changed meanwhile
        decision = rules.init_producer_id(current, transactional_id, timeout_ms, self.now(),
                                          max_timeout_ms=self.max_timeout_ms,
                                          new_producer_id=(lambda: fresh) if fresh is not None else new_producer_id,
                                          expected=expected)
        error = await self._decide(current, decision)
        if decision.metadata is not None and decision.metadata.state in COMPLETING and error == CONCURRENT_TRANSACTIONS:
            self._complete_later(transactional_id)  # the fence's abort: markers, then CompleteAbort
        if error != NONE or decision.metadata is None:
            return error, -1, -1
        return NONE, decision.metadata.producer_id, decision.metadata.producer_epoch

    # AddPartitionsToTxn, AddOffsetsToTxn ----------------------------------------------------------
    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: Iterable[TopicPartition]) -> int:
        busy = self.unavailable()
        if busy != NONE:
            return busy
        current = self.transactions.get(transactional_id)
        decision = rules.add_partitions(current, transactional_id, producer_id, producer_epoch, partitions, self.now())
        return await self._decide(current, decision)

    def offsets_partitions(self) -> int:
        """The partition count of ``__consumer_offsets``, as the group coordinator places groups."""
        group = running_group_coordinator(self.broker)
        store = getattr(group, "store", None)
        if store is not None and hasattr(store, "partitions"):
            return store.partitions()
        return self.broker.config.get("offsets.topic.num.partitions")

    def offsets_partition(self, group_id: str) -> int:
        return coordinator_partition(group_id, self.offsets_partitions())

    async def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str) -> int:
        return await self.add_partitions(transactional_id, producer_id, producer_epoch,
                                         [(OFFSETS_TOPIC, self.offsets_partition(group_id))])

    # EndTxn ---------------------------------------------------------------------------------------
    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> int:
        busy = self.unavailable()
        if busy != NONE:
            return busy
        current = self.transactions.get(transactional_id)
        decision = rules.end_txn(current, transactional_id, producer_id, producer_epoch, commit, self.now())
        error = await self._decide(current, decision)
        if error == NONE and decision.metadata is not None:
            task = self._complete_later(transactional_id)
            try:
                await asyncio.wait_for(asyncio.shield(task), END_TXN_WAIT_S)
            except Exception:  # noqa: BLE001 - the Prepare is stored; the timer finishes the markers
                pass
        return error

    # completion: markers, then Complete -------------------------------------------------------------
    def _complete_later(self, transactional_id: str) -> asyncio.Task:
        """The task writing the markers and the Complete state of the id's Prepare (one at a time)."""
        running = self._completing.get(transactional_id)
        if running is not None and not running.done():
            return running
        task = self.spawn(self._complete(transactional_id))
        self._completing[transactional_id] = task
        task.add_done_callback(lambda t: self._completing.pop(transactional_id, None)
                               if self._completing.get(transactional_id) is t else None)
        return task

    async def _complete(self, transactional_id: str) -> bool:
        """Write the markers of a PrepareCommit or PrepareAbort, then store the Complete state. A partition
        whose marker is written (or that is gone, or holds a newer epoch) leaves the in-memory metadata,
        so DescribeTransactions shows what is left; when some marker fails the state stays Prepare and
        the timer tries again. True when the transaction is complete."""
        meta = self.transactions.get(transactional_id)
        if meta is None or meta.state not in COMPLETING or meta.pending is not None:
            return False
        commit = meta.state is PREPARE_COMMIT
        remaining = set(meta.partitions)
        for topic, partition in sorted(meta.partitions):
            code = await self.write_marker(self.broker, topic, partition, meta.producer_id, meta.producer_epoch,
                                           commit, COORDINATOR_EPOCH)
            if code == NONE or code in GIVE_UP:
                if code != NONE:
                    log.warning("no %s marker for producer %d in %s-%d (error %d); the partition leaves the "
                                "transaction of %r", "COMMIT" if commit else "ABORT", meta.producer_id, topic,
                                partition, code, transactional_id)
                remaining.discard((topic, partition))
        now_meta = self.transactions.get(transactional_id)
        if now_meta is None or (now_meta.state, now_meta.producer_epoch) != (meta.state, meta.producer_epoch):
            return False
        if remaining:
            self.transactions[transactional_id] = replace(now_meta, partitions=frozenset(remaining))
            log.warning("%d markers of transactional id %r are not written yet; trying again in %d ms",
                        len(remaining), transactional_id, self.abort_interval_ms)
            return False
        return await self._store(now_meta, rules.complete(now_meta, self.now())) == NONE

    # timers ---------------------------------------------------------------------------------------
    async def abort_timed_out(self) -> int:
        """Abort every transaction open longer than its timeout, the epoch bumped (the producer is fenced);
        the number aborted."""
        if self.loading or not self.active:
            return 0
        now = self.now()
        aborted = 0
        for tid, meta in list(self.transactions.items()):
            try:
                fenced = rules.abort_timed_out(meta, now)
            except IllegalTransactionTransition as exc:  # the epoch is at its end: nothing can fence it
                log.error("cannot abort the timed-out transaction of %r: %s", tid, exc)
                continue
            if fenced is None or self.transactions.get(tid) is not meta:
                continue
            log.info("aborting the transaction of %r (producer %d epoch %d): open for more than %d ms",
                     tid, meta.producer_id, meta.producer_epoch, meta.timeout_ms)
            if await self._store(meta, fenced) == NONE:
                aborted += 1
                self._complete_later(tid)
        return aborted

    async def _abort_and_retry(self) -> None:
        await self.abort_timed_out()
        for tid, meta in list(self.transactions.items()):
            if meta.state in COMPLETING and meta.pending is None:
                self._complete_later(tid)

    async def expire(self) -> int:
        """Forget the ids unused for ``transactional.id.expiration.ms``; the number forgotten."""
        if self.loading or not self.active:
            return 0
        now = self.now()
        forgotten = 0
        for tid, meta in list(self.transactions.items()):
            dead = rules.expired(meta, now, self.expiration_ms)
            if dead is not None and self.transactions.get(tid) is meta and await self._store(meta, dead) == NONE:
                forgotten += 1
        if forgotten:
            log.info("forgot %d transactional ids unused for %d ms", forgotten, self.expiration_ms)
        return forgotten

    # checks for Produce and TxnOffsetCommit -----------------------------------------------------------
    def partition_in_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                 topic: str, partition: int) -> int:
        """Kafka's verification before a transactional append (``handleVerifyPartitionsInTransaction``):
        NONE when the partition is in the producer's open transaction; else INVALID_REQUEST (no id),
        INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, CONCURRENT_TRANSACTIONS (markers being written),
        INVALID_TXN_STATE (not added), or the coordinator's unavailability."""
        if not transactional_id:
            return INVALID_REQUEST
        busy = self.unavailable()
        if busy != NONE:
            return busy
        meta = self.transactions.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return INVALID_PRODUCER_ID_MAPPING
        if meta.producer_epoch != producer_epoch:
            return PRODUCER_FENCED
        if meta.state in COMPLETING:
            return CONCURRENT_TRANSACTIONS
        return NONE if (topic, partition) in meta.partitions else INVALID_TXN_STATE

    def verify_offsets_in_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                      group_id: str) -> int:
        """The same check for TxnOffsetCommit: the group's ``__consumer_offsets`` partition (added by
        AddOffsetsToTxn) must be in the producer's open transaction."""
        return self.partition_in_transaction(transactional_id, producer_id, producer_epoch, OFFSETS_TOPIC,
                                             self.offsets_partition(group_id))

    # ListTransactions, DescribeTransactions -------------------------------------------------------
    def listed(self) -> list[TransactionMetadata]:
        """Every id held, by transactional id (an expiring one is not shown, as Kafka hides Dead)."""
        return [m for _, m in sorted(self.transactions.items()) if m.state is not DEAD]
