"""ListOffsets and OffsetForLeaderEpoch: where a consumer starts, and the check after a leader change.

ListOffsets: timestamp -2 is the log start offset (``earliest``), -1 the last offset a consumer of the
request's isolation level may read (``latest``: the high watermark for read_uncommitted, the last stable
offset for read_committed, v2+), -3 the record with the largest timestamp (v7,
KIP-734: its timestamp and offset), -4 the earliest offset kept locally (v8, KIP-405), which without
tiered storage is the log start offset; any other value (negative ones too, as in Kafka) the first offset
whose record timestamp is at or after it, or offset -1 when no record is that recent. A record found by
timestamp (-3 included) at or above that same bound (the LSO for read_committed) is not answered (offset -1),
as Kafka answers only offsets the consumer asking may fetch. As in Kafka, the
broker takes -3 and -4 at any version (clients send them only at v7 and v8). Every partition has leader
epoch 0 (``metadata.py``), so OffsetForLeaderEpoch answers epoch 0 ending at the log end offset.
"""

from __future__ import annotations

from ..errors import CompactLogError
from ..partition import LEADER_EPOCH
from .broker import NO_THROTTLE, Broker, Session, error_code
from .entities import make, response, schema
from .metadata import epoch_problem
from .protocol import Request

EARLIEST, LATEST, MAX_TIMESTAMP, EARLIEST_LOCAL = -2, -1, -3, -4


def _lookup(broker: Broker, topics, read_committed: bool = False) -> list[list[tuple]]:
    """(partition, error, timestamp, offset) per partition asked for, per topic; ``read_committed`` bounds
    what is answered by the last stable offset instead of the high watermark."""
    find = broker.cl.find_partition
    asked: dict[tuple[str, int], int] = {}
    for t in topics:
        for p in t.partitions:
            asked[t.name, p.partition_index] = asked.get((t.name, p.partition_index), 0) + 1
    out = []
    for t in topics:
        rows = []
        for p in t.partitions:
            part = find(t.name, p.partition_index)
            if asked[t.name, p.partition_index] > 1:  # Kafka: a partition asked for twice is INVALID_REQUEST
                rows.append((p.partition_index, 42, -1, -1))
                continue
            if part is None:
                rows.append((p.partition_index, 3, -1, -1))
                continue
            problem = epoch_problem(getattr(p, "current_leader_epoch", -1))
            if problem:
                rows.append((p.partition_index, problem, -1, -1))
            elif p.timestamp in (EARLIEST, EARLIEST_LOCAL):  # all of a log is local: there is no tiered storage
                rows.append((p.partition_index, 0, -1, part.log_start_offset))
            else:
                try:  # the LSO may load the producer state, and a search reads batches: either may meet damage
                    fetchable = part.last_stable_offset if read_committed else part.high_watermark
                    if p.timestamp == LATEST:
                        rows.append((p.partition_index, 0, -1, fetchable))
                        continue
                    found = part.max_timestamp() if p.timestamp == MAX_TIMESTAMP else part.offset_for_timestamp(p.timestamp)
                except CompactLogError as exc:
                    rows.append((p.partition_index, exc.code, -1, -1))
                    continue
                if found is not None and found[1] >= fetchable:  # Kafka: only offsets this consumer may read
                    found = None
                rows.append((p.partition_index, 0, *found) if found else (p.partition_index, 0, -1, -1))
        out.append(rows)
    return out


async def list_offsets(broker: Broker, req: Request, session: Session):
    s = schema(req)
    isolation = getattr(req.body, "isolation_level", 0)  # the field is v2+; v1 reads uncommitted
    if isolation not in (0, 1):  # neither read_uncommitted nor read_committed: INVALID_REQUEST for each partition
        return response(req, throttle_time=NO_THROTTLE, topics=tuple(
            make(s.ListOffsetsTopicResponse, name=t.name, partitions=tuple(
                make(s.ListOffsetsPartitionResponse, partition_index=p.partition_index, error_code=error_code(42),
                     timestamp=-1, offset=-1, leader_epoch=-1) for p in t.partitions))
            for t in req.body.topics))
    read_committed = isolation == 1
    results = await broker.blocking(_lookup, broker, req.body.topics, read_committed)
    results = [rows if broker.authorize(session, "DESCRIBE", "TOPIC", t.name) else  # else 29, TOPIC_AUTHORIZATION_FAILED
               [(p.partition_index, 29, -1, -1) for p in t.partitions] for t, rows in zip(req.body.topics, results)]
    topics = tuple(
        make(s.ListOffsetsTopicResponse, name=t.name, partitions=tuple(
            make(s.ListOffsetsPartitionResponse, partition_index=index, error_code=error_code(code), timestamp=ts,
                 offset=offset, leader_epoch=LEADER_EPOCH if code == 0 and offset >= 0 else -1)
            for index, code, ts, offset in rows))
        for t, rows in zip(req.body.topics, results)
    )
    return response(req, throttle_time=NO_THROTTLE, topics=topics)


async def offset_for_leader_epoch(broker: Broker, req: Request, session: Session):
    s = schema(req)
    find = broker.cl.find_partition
    topics = []
    for t in req.body.topics:
        parts = []
        described = broker.authorize(session, "DESCRIBE", "TOPIC", t.topic)
        for p in t.partitions:
            part = find(t.topic, p.partition)
            code = 29 if not described else 3 if part is None else epoch_problem(p.current_leader_epoch)
            if code == 0 and p.leader_epoch > LEADER_EPOCH:
                parts.append(make(s.EpochEndOffset, error_code=error_code(0), partition=p.partition,
                                  leader_epoch=-1, end_offset=-1))  # Kafka: an epoch it never had is undefined
            elif code:
                parts.append(make(s.EpochEndOffset, error_code=error_code(code), partition=p.partition))
            else:
                parts.append(make(s.EpochEndOffset, error_code=error_code(0), partition=p.partition,
                                  leader_epoch=LEADER_EPOCH, end_offset=part.log_end_offset))
        topics.append(make(s.OffsetForLeaderTopicResult, topic=t.topic, partitions=tuple(parts)))
    return response(req, throttle_time=NO_THROTTLE, topics=tuple(topics))


HANDLERS = {2: list_offsets, 23: offset_for_leader_epoch}
