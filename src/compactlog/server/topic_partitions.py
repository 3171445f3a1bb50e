"""DescribeTopicPartitions (KIP-966): topics and their partitions, page by page.

What ``kafka-topics --describe`` and the newest admin clients ask instead of Metadata: each topic's id,
whether it is internal, the operations the caller may do on it, and its partitions (leader, epoch,
replicas, in-sync and eligible replicas; on one node, this broker for all of them). Kafka's paging is
kept to the letter: topics go in name order, starting at the cursor's topic and partition; the answer
holds at most ``response_partition_limit`` partitions (capped by ``max.request.partition.size.limit``,
at least one), and when it is cut the next cursor names where to go on, a topic cut in the middle
included.

An empty topic list asks for every topic the caller may describe (the others are left out unseen);
named topics the caller may not describe are answered TOPIC_AUTHORIZATION_FAILED with no id, at the
end, and named topics that do not exist UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an
illegal name). A cursor whose topic is not among the named ones, or whose partition is negative, makes
the whole request INVALID_REQUEST.
"""

from __future__ import annotations

from ..errors import CompactLogError
from ..partition import LEADER_EPOCH
from ..topics import INTERNAL_TOPICS, check_topic_name
from .acls import authorized_operations
from .broker import NO_THROTTLE, Broker, Session, error_code
from .entities import make, response, schema
from .protocol import Request
from .metadata import NOT_COMPUTED, topic_uuid
from .topic_ids import ZERO_UUID

UNKNOWN_TOPIC_OR_PARTITION, TOPIC_AUTHORIZATION_FAILED, INVALID_REQUEST = 3, 29, 42
def _unknown(name: str) -> int:
    try:
        check_topic_name(name)
    except CompactLogError as exc:
        return int(error_code(exc))
    return UNKNOWN_TOPIC_OR_PARTITION


def _invalid(req: Request, s, names: list[str]):
    return response(req, throttle_time=NO_THROTTLE, next_cursor=None, topics=tuple(
        make(s.DescribeTopicPartitionsResponseTopic, error_code=error_code(INVALID_REQUEST), name=n,
             topic_id=ZERO_UUID, is_internal=False, partitions=(), topic_authorized_operations=NOT_COMPUTED)
        for n in names))


async def describe_topic_partitions(broker: Broker, req: Request, session: Session):
    s = schema(req)
    body = req.body
    cl = broker.cl
    every = not body.topics
    cursor = body.cursor
    start_name = cursor.topic_name if cursor is not None else ""
    names = sorted({n for n in (cl.list_topics() if every else [t.name for t in body.topics]) if n >= start_name})
    if cursor is not None and ((not every and cursor.topic_name not in names) or cursor.partition_index < 0):
        return _invalid(req, s, [t.name for t in body.topics])
    refused = [n for n in names if not broker.authorize(session, "DESCRIBE", "TOPIC", n)]
    shut = set(refused)  # (a list scanned per name was quadratic in a request naming many topics)
    limit = max(min(broker.config.get("max.request.partition.size.limit"), body.response_partition_limit), 1)
    remaining = limit
    topics = []
    next_cursor = None
    for name in (n for n in names if n not in shut):
        if remaining == 0:
            next_cursor = make(s.Cursor, topic_name=name, partition_index=0)
            break
        count = cl.partitions_for(name) if cl.has_topic(name) else None
        if count is None:
            if not every:
                topics.append(make(s.DescribeTopicPartitionsResponseTopic, error_code=error_code(_unknown(name)),
                                   name=name, topic_id=ZERO_UUID, is_internal=name in INTERNAL_TOPICS, partitions=(),
                                   topic_authorized_operations=authorized_operations(broker, session, "TOPIC", name)))
            continue
        first = cursor.partition_index if cursor is not None and name == start_name else 0
        upper = min(count, first + remaining)
        topics.append(make(
            s.DescribeTopicPartitionsResponseTopic, error_code=error_code(0), name=name,
            topic_id=topic_uuid(broker, name), is_internal=name in INTERNAL_TOPICS,
            topic_authorized_operations=authorized_operations(broker, session, "TOPIC", name), partitions=tuple(
                make(s.DescribeTopicPartitionsResponsePartition, error_code=error_code(0), partition_index=p,
                     leader_id=broker.node_id, leader_epoch=LEADER_EPOCH, replica_nodes=(broker.node_id,),
                     isr_nodes=(broker.node_id,), eligible_leader_replicas=(), last_known_elr=(),
                     offline_replicas=())
                for p in range(first, upper))))
        if upper < count:
            next_cursor = make(s.Cursor, topic_name=name, partition_index=upper)
            break
        remaining -= max(upper - first, 0)
    if not every:
        topics.extend(make(s.DescribeTopicPartitionsResponseTopic, error_code=error_code(TOPIC_AUTHORIZATION_FAILED),
                           name=n, topic_id=ZERO_UUID, is_internal=False, partitions=(),
                           topic_authorized_operations=NOT_COMPUTED) for n in refused)
    return response(req, throttle_time=NO_THROTTLE, topics=tuple(topics), next_cursor=next_cursor)


HANDLERS = {75: describe_topic_partitions}
