"""The transactional producer's APIs on the wire: AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26).

The meaning is the transaction coordinator's (``txn_coordinator.py``); this module checks access as
Kafka's KafkaApis does, reads the fields and answers each version's layout. InitProducerId with a
transactional id is in ``producer_ids.py`` (it shares the API with idempotent producers), FindCoordinator
in ``metadata.py``, WriteTxnMarkers in ``txn_markers.py``.

Only the classic flow is served: AddPartitionsToTxn v0-3 (v4 batches transactions between brokers, for
their verification; Kafka's clients send v3 and below) and EndTxn v0-3 (v4 is Kafka 4.0's, v5 its
Transactions V2 that bumps the epoch at every commit). PRODUCER_FENCED is answered as
INVALID_PRODUCER_EPOCH below the version that knows it (``transactions.coordinator.answered_error``).

Access, in Kafka's order: WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, 53);
AddPartitionsToTxn then WRITE on each topic (internal topics are never authorized there: TOPIC_
AUTHORIZATION_FAILED) and the partition must exist (UNKNOWN_TOPIC_OR_PARTITION), any such failure
answering OPERATION_NOT_ATTEMPTED for the other partitions; AddOffsetsToTxn then READ on the group
(GROUP_AUTHORIZATION_FAILED, 30).

``setup`` creates the coordinator at ``broker.extras["transactions"]`` and registers it as a broker
service, so the broker starts it (replaying ``__transaction_state``) and stops it with the server.
"""

from __future__ import annotations

from ..topics import is_internal
from ..transactions.coordinator import answered_error
from .broker import NO_THROTTLE, Broker, Session, error_code
from .entities import make, response, schema
from .protocol import Request
from .txn_coordinator import EXTRA, TransactionCoordinatorService

UNKNOWN_TOPIC_OR_PARTITION, TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED = 3, 29, 30
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, OPERATION_NOT_ATTEMPTED = 53, 55


def setup(broker: Broker) -> None:
    service = TransactionCoordinatorService(broker)
    broker.extras[EXTRA] = service
    broker.services.append(service)


def coordinator(broker: Broker) -> TransactionCoordinatorService:
    return broker.extras[EXTRA]


def _partition_errors(broker: Broker, session: Session, topics) -> tuple[list[tuple[str, int]], dict]:
    """The partitions asked for (each once, in order) and the errors of those refused before the
    coordinator sees them."""
    asked = list(dict.fromkeys((t.name, p) for t in topics for p in t.partitions))
    allowed = {name: not is_internal(name) and broker.authorize(session, "WRITE", "TOPIC", name)
               for name in dict.fromkeys(name for name, _ in asked)}
    errors = {}
    for name, p in asked:
        if not allowed[name]:
            errors[(name, p)] = TOPIC_AUTHORIZATION_FAILED
        elif broker.cl.find_partition(name, p) is None:
            errors[(name, p)] = UNKNOWN_TOPIC_OR_PARTITION
    if errors:
        errors = {tp: errors.get(tp, OPERATION_NOT_ATTEMPTED) for tp in asked}
    return asked, errors


async def add_partitions_to_txn(broker: Broker, req: Request, session: Session):
    b = req.body
    tid = b.v3_and_below_transactional_id
    asked, errors = _partition_errors(broker, session, b.v3_and_below_topics)
    if not broker.authorize(session, "WRITE", "TRANSACTIONAL_ID", tid):
        errors = {tp: TRANSACTIONAL_ID_AUTHORIZATION_FAILED for tp in asked}
    elif not errors:
        code = await coordinator(broker).add_partitions(tid, b.v3_and_below_producer_id,
                                                        b.v3_and_below_producer_epoch, asked)
        code = answered_error(req.api_key, req.api_version, code)
        errors = {tp: code for tp in asked}
    s = schema(req)
    by_topic: dict[str, list] = {}
    for (name, p) in asked:
        by_topic.setdefault(name, []).append(make(s.AddPartitionsToTxnPartitionResult, partition_index=p,
                                                  partition_error_code=error_code(errors[(name, p)])))
    return response(req, throttle_time=NO_THROTTLE, results_by_topic_v3_and_below=tuple(
        make(s.AddPartitionsToTxnTopicResult, name=name, results_by_partition=tuple(parts))
        for name, parts in by_topic.items()))


async def add_offsets_to_txn(broker: Broker, req: Request, session: Session):
    b = req.body
    if not broker.authorize(session, "WRITE", "TRANSACTIONAL_ID", b.transactional_id):
        code = TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not broker.authorize(session, "READ", "GROUP", b.group_id):
        code = GROUP_AUTHORIZATION_FAILED
    else:
        code = await coordinator(broker).add_offsets(b.transactional_id, b.producer_id, b.producer_epoch, b.group_id)
        code = answered_error(req.api_key, req.api_version, code)
    return response(req, throttle_time=NO_THROTTLE, error_code=error_code(code))


async def end_txn(broker: Broker, req: Request, session: Session):
    b = req.body
    if not broker.authorize(session, "WRITE", "TRANSACTIONAL_ID", b.transactional_id):
        code = TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    else:
        code = await coordinator(broker).end_txn(b.transactional_id, b.producer_id, b.producer_epoch, b.committed)
        code = answered_error(req.api_key, req.api_version, code)
    return response(req, throttle_time=NO_THROTTLE, error_code=error_code(code))


HANDLERS = {24: add_partitions_to_txn, 25: add_offsets_to_txn, 26: end_txn}
