"""``__transaction_state`` for the transaction coordinator: its creation, the appends, the replay at start.

Kafka's ``TransactionStateManager`` has the same job; the group coordinator's ``manager.py`` does it for
``__consumer_offsets``. The topic is an ordinary compacted topic of the data directory, created the first
time a transactional producer looks for its coordinator, with Kafka's settings for it:
``transaction.state.log.num.partitions`` partitions, ``cleanup.policy=compact``, ``segment.bytes`` from
``transaction.state.log.segment.bytes`` and no compression (Kafka writes these records uncompressed).

Every change of a transactional id is one record (``transactions.metadata.log_record``) in its own batch,
appended through the embedded API's ``Partition.append``, on the event loop once the topic exists (a
small record costs less than the hop to a worker thread; the first append, which may create it, runs in one). Appends to one partition are
serialised, and the coordinator adopts the new state (``apply``) under the same lock right after the
append returns, so memory and log see the changes in the same order; only then is the client answered.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from ..errors import CompactLogError
from ..records.batch import build_batch
from ..transactions.coordinator import TRANSACTION_STATE_TOPIC, transaction_partition
from ..transactions.load import LoadedTransactions, load_partition
from .coordinator_topic import CoordinatorTopic
from .server_config import ServerConfig

log = logging.getLogger(__name__)

TOPIC = TRANSACTION_STATE_TOPIC

# Kafka's codes for a write of the coordinator that failed (TransactionStateManager.appendTransactionToLog).
COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, UNKNOWN_SERVER_ERROR = 15, 16, -1
_UNKNOWN_TOPIC_OR_PARTITION, _NOT_ENOUGH_REPLICAS, _KAFKA_STORAGE_ERROR, _NOT_LEADER = 3, 19, 56, 6


class TransactionStateLog(CoordinatorTopic):
    """The coordinator's reads and writes of ``__transaction_state`` (uncompressed, as Kafka writes it)."""

    TOPIC = TOPIC
    PARTITIONS_SETTING = "transaction.state.log.num.partitions"
    SEGMENT_BYTES_SETTING = "transaction.state.log.segment.bytes"
    COMPRESSION_TYPE = "uncompressed"

    def __init__(self, cl, config: ServerConfig) -> None:
        super().__init__(cl, config)
        self._locks: dict[int, asyncio.Lock] = {}
        self._exists = False  # the topic was there at an append (clients cannot delete an internal topic)

    # where ---------------------------------------------------------------------------------------
    def partition_for(self, transactional_id: str) -> int:
        return transaction_partition(transactional_id, self.partitions())

    # writing ------------------------------------------------------------------------------------
    def _append(self, partition: int, key: bytes, value: bytes | None) -> None:
        self.ensure_topic()
        self._exists = True
        self._write(partition, key, value)

    def _write(self, partition: int, key: bytes, value: bytes | None) -> None:
        batch = build_batch([key], [value], [self.cl.time.milliseconds()])
        self.cl.partition(TOPIC, partition).append(batch)

    async def append(self, transactional_id: str, key: bytes, value: bytes | None,
                     apply: Callable[[], None]) -> None:
        """Append one record to the id's partition, then ``apply`` (in log order). Raises the storage
        layer's error when the append fails (``apply`` is then not called)."""
        partition = self.partition_for(transactional_id)
        lock = self._locks.setdefault(partition, asyncio.Lock())
        async with lock:
            if self._exists:  # one small uncompressed record, no fsync: cheaper than the hop to a worker thread
                self._write(partition, key, value)
            else:  # the first append may create the topic
                await asyncio.to_thread(self._append, partition, key, value)
            apply()

    # loading ------------------------------------------------------------------------------------
    def load(self, now: int) -> list[LoadedTransactions]:
        """Replay every partition of the topic (blocking). Damaged records and batches are skipped with
        a warning naming the partition and the offset (``transactions/load.py``); only a failure to read
        the log at all raises."""
        if not self.cl.has_topic(TOPIC):
            return []
        return [load_partition(self.cl, p, now) for p in range(self.cl.partitions_for(TOPIC))]


def write_error(exc: BaseException) -> int:
    """The code a client gets when the coordinator could not store a change, as Kafka maps it: a missing
    partition or too few replicas COORDINATOR_NOT_AVAILABLE, a failed disk or lost leadership
    NOT_COORDINATOR (both make the client look for the coordinator again), anything else
    UNKNOWN_SERVER_ERROR."""
    code = exc.code if isinstance(exc, CompactLogError) else UNKNOWN_SERVER_ERROR
    if code in (_UNKNOWN_TOPIC_OR_PARTITION, _NOT_ENOUGH_REPLICAS):
        return COORDINATOR_NOT_AVAILABLE
    if code in (_KAFKA_STORAGE_ERROR, _NOT_LEADER):
        return NOT_COORDINATOR
    return UNKNOWN_SERVER_ERROR
