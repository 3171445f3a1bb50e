"""DescribeProducers: the idempotent producers writing to each partition (``kafka-transactions
describe-producers``).

Per partition, each producer the partition's producer state keeps (``Partition.producers()``: the
state the broker checks sequences and transactions with, loaded from its snapshot and the log's tail,
producers forgotten after ``producer.id.expiration.ms`` as Kafka forgets them): its id, epoch, last sequence,
the timestamp of its last batch, the coordinator epoch of its last transaction marker (-1 before any) and
the first offset of its open transaction (-1 when none is open), the fields Kafka's broker answers from
its ProducerStateManager. ``kafka-transactions describe-producers`` and ``find-hanging`` read them.

As in Kafka: READ on the topic is needed (refused: TOPIC_AUTHORIZATION_FAILED for each partition asked);
an illegal topic name is INVALID_TOPIC_EXCEPTION with the rule it breaks; a topic or partition that does
not exist is UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from ..errors import CompactLogError
from ..topics import check_topic_name
from .broker import NO_THROTTLE, Broker, Session, error_code
from .entities import make, response, schema
from .protocol import Request

UNKNOWN_TOPIC_OR_PARTITION, TOPIC_AUTHORIZATION_FAILED = 3, 29


def _topic_problem(broker: Broker, session: Session, name: str) -> tuple[int, str | None] | None:
    try:
        check_topic_name(name)
    except CompactLogError as exc:
        return int(error_code(exc)), str(exc)
    if not broker.authorize(session, "READ", "TOPIC", name):
        return TOPIC_AUTHORIZATION_FAILED, None
    if not broker.cl.has_topic(name):
        return UNKNOWN_TOPIC_OR_PARTITION, None
    return None


def _partition_states(broker: Broker, topics, problems) -> list[list[tuple[int, int, str | None, list]]]:
    """Per topic, per partition asked: (partition, error code, message, producers)."""
    out = []
    for t, problem in zip(topics, problems):
        rows = []
        for index in t.partition_indexes:
            if problem is not None:
                rows.append((index, problem[0], problem[1], []))
                continue
            part = broker.cl.find_partition(t.name, index)
            if part is None:
                rows.append((index, UNKNOWN_TOPIC_OR_PARTITION, None, []))
            else:
                try:  # loads the producer state, which can meet damage: named for this partition alone
                    rows.append((index, 0, None, part.producers()))
                except CompactLogError as exc:
                    rows.append((index, int(error_code(exc)), str(exc), []))
        out.append(rows)
    return out


async def describe_producers(broker: Broker, req: Request, session: Session):
    s = schema(req)
    topics = req.body.topics
    problems = [_topic_problem(broker, session, t.name) for t in topics]
    states = await broker.blocking(_partition_states, broker, topics, problems)
    return response(req, throttle_time=NO_THROTTLE, topics=tuple(
        make(s.TopicResponse, name=t.name, partitions=tuple(
            make(s.PartitionResponse, partition_index=index, error_code=error_code(code), error_message=message,
                 active_producers=tuple(
                     make(s.ProducerState, producer_id=p.producer_id, producer_epoch=p.producer_epoch,
                          last_sequence=p.last_sequence, last_timestamp=p.last_timestamp,
                          coordinator_epoch=p.coordinator_epoch, current_txn_start_offset=p.current_txn_start_offset)
                     for p in producers))
            for index, code, message, producers in rows))
        for t, rows in zip(topics, states)))


HANDLERS = {61: describe_producers}
