"""ListTransactions and DescribeTransactions (``kafka-transactions list`` / ``describe``).

compactlog has no transaction coordinator yet, so it answers as a Kafka 3.7 coordinator that holds no
transactional id: ListTransactions an empty list, DescribeTransactions TRANSACTIONAL_ID_NOT_FOUND for each
id asked. The checks Kafka makes before that are kept, so tools see the same errors:

- a state filter that names no transaction state Kafka knows is returned in ``unknown_state_filters``
  (the request itself succeeds); producer-id filters need no check, there is nothing to match;
- each transactional id needs DESCRIBE on it (TRANSACTIONAL_ID_AUTHORIZATION_FAILED otherwise), and an
  empty one is INVALID_REQUEST, in that order.
"""

from __future__ import annotations

import datetime

from ..transactions.state import TransactionState
from .broker import NO_THROTTLE, Broker, Session, error_code
from .entities import make, response, schema
from .protocol import Request

INVALID_REQUEST, TRANSACTIONAL_ID_AUTHORIZATION_FAILED, TRANSACTIONAL_ID_NOT_FOUND = 42, 53, 105

# The states of Kafka's transaction coordinator, by the names ListTransactions filters on.
STATES = frozenset(state.value for state in TransactionState)
EPOCH_START = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)  # 0 ms: the field's default


def _unknown_states(filters) -> tuple[str, ...]:
    """The filters Kafka reports back as unknown, each once, in the order asked."""
    return tuple(dict.fromkeys(f for f in filters if f not in STATES))


async def list_transactions(broker: Broker, req: Request, session: Session):
    return response(req, throttle_time=NO_THROTTLE, error_code=error_code(0),
                    unknown_state_filters=_unknown_states(req.body.state_filters), transaction_states=())


def _describe_code(broker: Broker, session: Session, transactional_id: str) -> int:
    if not broker.authorize(session, "DESCRIBE", "TRANSACTIONAL_ID", transactional_id):
        return TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if not transactional_id:
        return INVALID_REQUEST
    return TRANSACTIONAL_ID_NOT_FOUND


async def describe_transactions(broker: Broker, req: Request, session: Session):
    s = schema(req)
    return response(req, throttle_time=NO_THROTTLE, transaction_states=tuple(
        make(s.TransactionState, error_code=error_code(_describe_code(broker, session, tid)), transactional_id=tid,
             transaction_state="", transaction_timeout=NO_THROTTLE, transaction_start_time=EPOCH_START,
             producer_id=0, producer_epoch=0, topics=())
        for tid in req.body.transactional_ids))


HANDLERS = {65: describe_transactions, 66: list_transactions}
