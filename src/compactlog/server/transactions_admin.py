"""ListTransactions and DescribeTransactions (``kafka-transactions list`` / ``describe``), from the
transaction coordinator's state (``txn_coordinator.py``), as Kafka 3.7's coordinator answers them:

- ListTransactions (v0; the duration filter is v1, Kafka 3.8's) lists every transactional id held, with
  its producer id and state name, filtered by the producer ids and the state names asked for (both
  when both are given). A state filter that names no state Kafka knows is returned in
  ``unknown_state_filters`` and matches nothing; the request itself succeeds. Only the ids the
  principal may DESCRIBE are listed. While ``__transaction_state`` is loading the answer is
  COORDINATOR_LOAD_IN_PROGRESS, and COORDINATOR_NOT_AVAILABLE once the coordinator has stopped.
- DescribeTransactions, per id: DESCRIBE on it (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), an empty one
  INVALID_REQUEST, one not held TRANSACTIONAL_ID_NOT_FOUND; else its state, timeout, start time,
  producer id and epoch and the partitions of its transaction (those the principal may DESCRIBE; while
  the markers are written, those still without one).
"""

from __future__ import annotations

import datetime

from ..transactions.state import TransactionState
from .broker import NO_THROTTLE, Broker, Session, error_code, ms
from .entities import make, response, schema
from .protocol import Request

INVALID_REQUEST, TRANSACTIONAL_ID_AUTHORIZATION_FAILED, TRANSACTIONAL_ID_NOT_FOUND = 42, 53, 105
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE = 14, 15

# The states of Kafka's transaction coordinator, by the names ListTransactions filters on.
STATES = frozenset(state.value for state in TransactionState)
UTC = datetime.timezone.utc
EPOCH_START = datetime.datetime(1970, 1, 1, tzinfo=UTC)  # 0 ms: the field's default


def _coordinator(broker: Broker):
    return broker.extras.get("transactions")


def _unknown_states(filters) -> tuple[str, ...]:
    """The filters Kafka reports back as unknown, each once, in the order asked."""
    return tuple(dict.fromkeys(f for f in filters if f not in STATES))


async def list_transactions(broker: Broker, req: Request, session: Session):
    b = req.body
    s = schema(req)
    unknown = _unknown_states(b.state_filters)
    txn = _coordinator(broker)
    if txn is None or not txn.active or txn.loading:  # Kafka: not running, or still loading its partitions
        busy = COORDINATOR_LOAD_IN_PROGRESS if txn is not None and txn.active else COORDINATOR_NOT_AVAILABLE
        return response(req, throttle_time=NO_THROTTLE, error_code=error_code(busy), unknown_state_filters=(),
                        transaction_states=())
    held = txn.listed()
    producers, states = set(b.producer_id_filters), set(b.state_filters)
    listed = tuple(
        make(s.TransactionState, transactional_id=m.transactional_id, producer_id=m.producer_id,
             transaction_state=m.state.value)
        for m in held
        if (not producers or m.producer_id in producers) and (not states or m.state.value in states)
        and broker.authorize(session, "DESCRIBE", "TRANSACTIONAL_ID", m.transactional_id))
    return response(req, throttle_time=NO_THROTTLE, error_code=error_code(0), unknown_state_filters=unknown,
                    transaction_states=listed)


def _describe(broker: Broker, session: Session, s, transactional_id: str):
    empty = dict(transaction_state="", transaction_timeout=NO_THROTTLE, transaction_start_time=EPOCH_START,
                 producer_id=0, producer_epoch=0, topics=())
    txn = _coordinator(broker)
    if not broker.authorize(session, "DESCRIBE", "TRANSACTIONAL_ID", transactional_id):
        code = TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif txn is None or not txn.active:
        code = COORDINATOR_NOT_AVAILABLE
    elif not transactional_id:
        code = INVALID_REQUEST
    elif txn.loading:
        code = COORDINATOR_LOAD_IN_PROGRESS
    else:
        meta = txn.transactions.get(transactional_id)
        if meta is None or meta.state is TransactionState.DEAD:
            code = TRANSACTIONAL_ID_NOT_FOUND
        else:
            topics: dict[str, list[int]] = {}
            for topic, p in sorted(meta.partitions):
                if broker.authorize(session, "DESCRIBE", "TOPIC", topic):
                    topics.setdefault(topic, []).append(p)
            start = datetime.datetime.fromtimestamp(meta.start_timestamp / 1000, UTC)  # -1 with none open
            return make(s.TransactionState, error_code=error_code(0), transactional_id=transactional_id,
                        transaction_state=meta.state.value, transaction_timeout=ms(meta.timeout_ms),
                        transaction_start_time=start, producer_id=meta.producer_id,
                        producer_epoch=meta.producer_epoch,
                        topics=tuple(make(s.TopicData, topic=t, partitions=tuple(ps)) for t, ps in topics.items()))
    return make(s.TransactionState, error_code=error_code(code), transactional_id=transactional_id, **empty)


async def describe_transactions(broker: Broker, req: Request, session: Session):
    s = schema(req)
    return response(req, throttle_time=NO_THROTTLE, transaction_states=tuple(
        _describe(broker, session, s, tid) for tid in req.body.transactional_ids))


HANDLERS = {65: describe_transactions, 66: list_transactions}
