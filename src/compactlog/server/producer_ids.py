"""InitProducerId: ids for idempotent producers, never handed out twice, even across restarts.

From v3 a producer may send the id and epoch it has, asking for a new epoch (KIP-360); without a
transactional id Kafka answers such a request, like any other, with a fresh id at epoch 0, and so do we.

Ids are taken in blocks: before the first id of a block is given, the end of the block is written (and
fsync'd) to ``producer-id-block`` in the data directory, so a restarted broker starts after every id it
may have given (Kafka's controller hands brokers blocks of 1000 ids the same way). Each id starts at
epoch 0.

A request with a transactional id is the transaction coordinator's (``txn_coordinator.py``): it needs
WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, 53), keeps one producer id per
transactional id and bumps its epoch at each InitProducerId, fencing the older producer. PRODUCER_FENCED
is answered as INVALID_PRODUCER_EPOCH before v4, as Kafka does.
"""

from __future__ import annotations

import datetime
import threading

from .. import broker_files
from ..errors import KafkaStorageError
from ..transactions.coordinator import answered_error
from .acls import may_write_idempotently
from .broker import NO_THROTTLE, Broker, Session, error_code
from .entities import response
from .protocol import Request

BLOCK = 1000


class ProducerIdManager:
    def __init__(self, data_dir) -> None:
        self.data_dir = data_dir
        self.path = broker_files.path_of(data_dir, broker_files.PRODUCER_ID_BLOCK)
        self.lock = threading.Lock()
        text = broker_files.read_text(data_dir, broker_files.PRODUCER_ID_BLOCK)
        text = "0" if text is None else text.strip()
        if not text.isdigit():  # starting again from 0 would hand out ids in use: a retry would be dropped
            raise KafkaStorageError(f"{self.path} does not hold a producer id ({text[:40]!r}); write the highest "
                                    f"producer id ever handed out plus one into it")
        self.next = int(text)
        self.end = self.next

    def allocate(self) -> int:
        with self.lock:
            if self.next >= self.end:
                self.end = self.next + BLOCK
                broker_files.write_text(self.data_dir, broker_files.PRODUCER_ID_BLOCK, f"{self.end}\n")
            pid = self.next
            self.next += 1
            return pid


def producer_id_manager(broker: Broker) -> ProducerIdManager:
    """The broker's one allocator of producer ids (idempotent and transactional producers share it)."""
    ids = broker.extras.get("producer_ids")
    if ids is None:
        ids = broker.extras["producer_ids"] = ProducerIdManager(broker.cl.data_dir)
    return ids


def _refused(req: Request, code: int):
    return response(req, throttle_time=NO_THROTTLE, error_code=error_code(code), producer_id=-1, producer_epoch=-1)


async def init_producer_id(broker: Broker, req: Request, session: Session):
    tid = req.body.transactional_id
    if tid is not None:
        if not broker.authorize(session, "WRITE", "TRANSACTIONAL_ID", tid):
            return _refused(req, 53)  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not may_write_idempotently(broker, session):  # CLUSTER_AUTHORIZATION_FAILED, as Kafka answers
        return _refused(req, 31)
    given = (getattr(req.body, "producer_id", -1), getattr(req.body, "producer_epoch", -1))  # v3+ (KIP-360)
    if (given[0] == -1) != (given[1] == -1):  # Kafka: an id without an epoch, or the reverse, is INVALID_REQUEST
        return _refused(req, 42)
    ids = producer_id_manager(broker)
    if tid is not None:
        timeout_ms = req.body.transaction_timeout // datetime.timedelta(milliseconds=1)
        code, pid, epoch = await broker.extras["transactions"].init_producer_id(
            tid, timeout_ms, None if given[0] == -1 else given, ids.allocate)
        return response(req, throttle_time=NO_THROTTLE, error_code=error_code(answered_error(22, req.api_version, code)),
                        producer_id=pid, producer_epoch=epoch)
    pid = await broker.blocking(ids.allocate)
    return response(req, throttle_time=NO_THROTTLE, error_code=error_code(0), producer_id=pid, producer_epoch=0)


HANDLERS = {22: init_producer_id}
