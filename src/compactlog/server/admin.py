"""CreateTopics, DeleteTopics, CreatePartitions and DeleteRecords: Kafka's topic admin on one node.

Each request is checked here for what only the wire can get wrong (a replication factor, a manual
assignment, a name asked for twice), then handed to the same ``CompactLog`` calls the CLI and the
Python API use, so a topic made over the wire is the topic ``compactlog topics --create`` makes, with
the same checks of names, counts, configs and ``max.broker.partitions``.

One node is the whole cluster, so the only replication factor is 1 (or -1, the default) and a manual
assignment may name only this node, one replica per partition. Every answer of an error carries a
message saying what was wrong, as Kafka's do from CreateTopics v1 and CreatePartitions v0 on.

Each topic is authorized first, as in Kafka (CREATE on the cluster or the topic; DELETE to delete a
topic or its records; ALTER to add partitions); a refused one is answered TOPIC_AUTHORIZATION_FAILED.
All disk work of a request runs in one worker thread. Deleting a topic or moving a log start offset
wakes parked fetches: they then answer with UNKNOWN_TOPIC_OR_PARTITION or OFFSET_OUT_OF_RANGE at once
instead of at the end of their wait. Creating topics or partitions wakes nobody: no fetch can be
parked on a partition that did not exist.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any, Callable, Iterable, NamedTuple, Sequence

from ..errors import (
    CompactLogError,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    UnknownTopicOrPartitionError,
    shown,
)
from ..storage.log_config import LogConfig
from ..topics import check_deletable, replication_refusal
from .broker import NO_THROTTLE, Broker, Session, error_code
from .configs import SOURCE_NUMBERS
from .coordinator import running_group_coordinator
from .entities import make, response, schema
from .protocol import Request
from .metadata import topic_uuid as id_of_topic
from .metadata import topic_with_uuid
from .topic_ids import ZERO_UUID, topic_uuid

log = logging.getLogger(__name__)

DEFAULT = -1  # num_partitions / replication_factor: the broker's default (CreateTopics v4+)

Outcome = tuple[int, str | None]  # (Kafka error code, message); (0, None) when done
TOPIC_AUTHORIZATION_FAILED, INVALID_REQUEST, UNKNOWN_TOPIC_ID = 29, 42, 100


class Created(NamedTuple):
    """A topic CreateTopics made (or, validating only, would make)."""

    partitions: int
    topic_id: str | None  # None: validated only
    config: LogConfig


def _refused(broker: Broker, session: Session, operation: str, names: Iterable[str], cluster_too: bool = False) -> set[str]:
    """The topics ``session`` may not do ``operation`` on (``cluster_too``: the right on the cluster covers
    every topic, as CREATE does)."""
    if cluster_too and broker.authorize(session, operation, "CLUSTER"):
        return set()
    return {n for n in set(names) if not broker.authorize(session, operation, "TOPIC", n)}


def _not_allowed(operation: str, name: str) -> Outcome:
    return TOPIC_AUTHORIZATION_FAILED, f"Not authorized to {operation.lower()} topic {shown(name)}."


def _outcome(exc: CompactLogError | None) -> Outcome:
    return (0, None) if exc is None else (int(error_code(exc)), str(exc))


def _repeated(names: Iterable[str]) -> set[str]:
    """Names a request lists more than once: Kafka refuses each of them rather than guess which entry wins."""
    return {name for name, n in Counter(names).items() if n > 1}


def _twice(what: str, name: str) -> InvalidRequestError:
    return InvalidRequestError(f"The request lists {what} {shown(name)} more than once; list each once.")


# CreateTopics -------------------------------------------------------------------------------------

def _check_replication(rf: int, node_id: int) -> None:
    if rf == DEFAULT or rf == 1:
        return
    if rf <= 0:
        raise InvalidReplicationFactorError(
            f"Replication factor must be at least 1 (or -1 for the broker's default), got {rf}.")
    raise InvalidReplicationFactorError(replication_refusal(rf))


def _check_assignment(topic: str, node_id: int, assigned: Sequence[tuple[int, Sequence[int]]]) -> None:
    """A manual assignment ((partition, broker ids) pairs) this node can hold: each partition on this
    node alone, partitions numbered from 0 without gaps or repeats."""
    indexes = sorted(p for p, _ in assigned)
    if indexes != list(range(len(indexes))):
        raise InvalidReplicaAssignmentError(
            f"The partitions assigned for topic {shown(topic)} must be numbered 0 to {len(indexes) - 1} with no gap or "
            f"repeat, got {indexes}.")
    for p, brokers in assigned:
        _check_replicas(topic, p, brokers, node_id)


def _check_replicas(topic: str, partition: int, brokers: Sequence[int], node_id: int) -> None:
    where = f"Partition {partition} of topic {shown(topic)}"
    if not brokers:
        raise InvalidReplicaAssignmentError(f"{where} is assigned to no broker; assign it to broker {node_id}.")
    if len(set(brokers)) != len(brokers):
        raise InvalidReplicaAssignmentError(f"{where} lists a broker twice among its replicas {list(brokers)}.")
    strangers = [b for b in brokers if b != node_id]
    if strangers:
        raise InvalidReplicaAssignmentError(
            f"{where} is assigned to broker {strangers[0]}, but the cluster's only broker is {node_id}.")


def _topic_configs(topic: str, configs) -> dict[str, str]:
    out: dict[str, str] = {}
    for c in configs:
        if c.value is None:
            raise InvalidConfigError(f"Config {c.name} of topic {shown(topic)} has no value (null); give one or leave it out.")
        out[c.name] = c.value
    return out


def create_one(broker: Broker, t, validate_only: bool) -> Created:
    """Check one CreatableTopic in Kafka's order (name and existence first) and create it unless
    ``validate_only``; what CreateTopics v5+ answers of it (a topic only validated has no id yet)."""
    cl = broker.cl
    cl.check_name_free(t.name)
    if t.assignments:
        if t.num_partitions != DEFAULT or t.replication_factor != DEFAULT:
            raise InvalidRequestError(
                f"Topic {shown(t.name)} gives a manual assignment and also a partition count or replication factor; "
                f"give one or the other (set both counts to -1 with an assignment).")
        _check_assignment(t.name, broker.node_id, [(a.partition_index, tuple(a.broker_ids)) for a in t.assignments])
        count: int | None = len(t.assignments)
    else:
        _check_replication(t.replication_factor, broker.node_id)
        if t.num_partitions != DEFAULT and t.num_partitions <= 0:
            raise InvalidPartitionsError(
                f"Number of partitions must be larger than 0 (or -1 for num.partitions), got {t.num_partitions}.")
        count = None if t.num_partitions == DEFAULT else t.num_partitions
    configs = _topic_configs(t.name, t.configs)
    if validate_only:
        n = cl.check_new_topic(t.name, count, configs)
        return Created(n, None, LogConfig(configs, broker.config))
    made = cl.create_topic(t.name, count, configs)
    return Created(len(made.partitions), made.topic_id, made.config)


def _name(topic) -> str:
    return topic.name


def _for_each(items, name_of: Callable[[Any], str], operation: str, denied: set[str],
              action: Callable[[Any], Any], *, unique: bool = True, done: list | None = None) -> list[Outcome]:
    """Run ``action`` on every item of a request: a name the principal may not touch, a name given twice
    (when ``unique``) and our typed errors become that item's outcome, and the others go on. What each
    action returns is appended to ``done`` (None for an item that failed)."""
    twice = _repeated(name_of(i) for i in items) if unique else set()
    out = []
    for item in items:
        name = name_of(item)
        result = None
        if name in denied:
            out.append(_not_allowed(operation, name))
        else:
            try:
                if name in twice:
                    raise _twice("topic", name)
                result = action(item)
                out.append(_outcome(None))
            except CompactLogError as exc:
                out.append(_outcome(exc))
        if done is not None:
            done.append(result)
    return out


def _create_all(broker: Broker, topics, validate_only: bool, denied: set[str]) -> tuple[list[Outcome], list]:
    done: list[Created | None] = []
    outcomes = _for_each(topics, _name, "CREATE", denied, lambda t: create_one(broker, t, validate_only), done=done)
    return outcomes, done


def _created_configs(s, config: LogConfig) -> tuple:
    """CreateTopics v5+: every config of the new topic, with its value and source, as Kafka lists them."""
    if not hasattr(s, "CreatableTopicConfigs"):  # before v5
        return ()
    return tuple(make(s.CreatableTopicConfigs, name=row.name, value=row.value, read_only=row.read_only,
                      config_source=SOURCE_NUMBERS[row.source], is_sensitive=False)
                 for row in config.describe())


async def create_topics(broker: Broker, req: Request, session: Session):
    s = schema(req)
    body = req.body
    denied = _refused(broker, session, "CREATE", (t.name for t in body.topics), cluster_too=True)
    outcomes, done = await broker.blocking(_create_all, broker, body.topics, body.validate_only, denied)
    return response(req, throttle_time=NO_THROTTLE, topics=tuple(
        make(s.CreatableTopicResult, name=t.name, error_code=error_code(code), error_message=message,
             topic_id=topic_uuid(made.topic_id if made else None),
             num_partitions=made.partitions if made else -1, replication_factor=1 if made else -1,
             configs=_created_configs(s, made.config) if made else (), topic_config_error_code=0)
        for t, (code, message), made in zip(body.topics, outcomes, done)))


# DeleteTopics -------------------------------------------------------------------------------------

def delete_one(broker: Broker, name: str) -> None:
    check_deletable(name)
    broker.cl.delete_topic(name)


def _delete_all(broker: Broker, names: Sequence[str], denied: set[str]) -> list[Outcome]:
    return _for_each(names, str, "DELETE", denied, lambda n: delete_one(broker, n), unique=False)


def _resolve(broker: Broker, req: Request) -> list[tuple[str | None, Any, Outcome | None]]:
    """(name, id given, refusal) of each topic a DeleteTopics request names: by name (v1-5, and v6 with
    no id) or by id (v6), not both, each once; Kafka's rules and messages. An id is resolved to its name."""
    if req.api_version >= 6:
        entries = [(t.name, t.topic_id if t.topic_id not in (None, ZERO_UUID) else None) for t in req.body.topics]
    else:
        entries = [(n, None) for n in req.body.topic_names]
    names = Counter(n for n, i in entries if i is None and n is not None)
    ids = Counter(i for n, i in entries if i is not None and n is None)
    out: list[tuple[str | None, Any, Outcome | None]] = []
    for name, given in entries:
        if name is not None and given is not None:
            out.append((name, given, (INVALID_REQUEST, "You may not specify both topic name and topic id.")))
        elif given is not None:
            found = topic_with_uuid(broker, given)
            if ids[given] > 1:
                out.append((None, given, (INVALID_REQUEST, "Duplicate topic id.")))
            elif found is None:
                out.append((None, given, (UNKNOWN_TOPIC_ID, "This server does not host this topic ID.")))
            else:
                out.append((found, given, None))
        elif name is None:
            out.append((None, None, (INVALID_REQUEST, "Neither topic name nor id were specified.")))
        elif names[name] > 1:
            out.append((name, None, (INVALID_REQUEST, "Duplicate topic name.")))
        else:
            out.append((name, None, None))
    twice = _repeated(n for n, _i, refused in out if refused is None)  # a name and the id of the same topic
    return [(n, i, (INVALID_REQUEST, "The provided topic name maps to an ID that was already supplied."))
            if refused is None and n in twice else (n, i, refused) for n, i, refused in out]


async def delete_topics(broker: Broker, req: Request, session: Session):
    s = schema(req)
    resolved = _resolve(broker, req)
    names = [n for n, _i, refused in resolved if refused is None]
    ids = {n: id_of_topic(broker, n) for n in names}  # before they go
    done = iter(await broker.blocking(_delete_all, broker, names, _refused(broker, session, "DELETE", names)))
    outcomes = [refused or next(done) for _n, _i, refused in resolved]
    coordinator = running_group_coordinator(broker)
    if coordinator is not None:
        for (name, _i, _refused_), (code, _message) in zip(resolved, outcomes):
            if code == 0:
                await coordinator.offsets.delete_topic_offsets(name)
    broker.data_arrived()  # fetches parked on a deleted partition answer UNKNOWN_TOPIC_OR_PARTITION now
    return response(req, throttle_time=NO_THROTTLE, responses=tuple(
        make(s.DeletableTopicResult, name=name, topic_id=ids.get(name) or given or ZERO_UUID,
             error_code=error_code(code), error_message=message)
        for (name, given, _refused_), (code, message) in zip(resolved, outcomes)))


# CreatePartitions ---------------------------------------------------------------------------------

def grow_one(broker: Broker, t, validate_only: bool) -> None:
    cl = broker.cl
    have = cl.partitions_for(t.name)  # UNKNOWN_TOPIC_OR_PARTITION first, as Kafka answers
    if t.assignments is not None:
        if len(t.assignments) != t.count - have:
            raise InvalidReplicaAssignmentError(
                f"Growing topic {shown(t.name)} from {have} to {t.count} partitions needs {max(t.count - have, 0)} "
                f"assignments, got {len(t.assignments)}.")
        for i, a in enumerate(t.assignments):
            _check_replicas(t.name, have + i, tuple(a.broker_ids), broker.node_id)
    cl.create_partitions(t.name, t.count, validate_only)


def _grow_all(broker: Broker, topics, validate_only: bool, denied: set[str]) -> list[Outcome]:
    return _for_each(topics, _name, "ALTER", denied, lambda t: grow_one(broker, t, validate_only))


async def create_partitions(broker: Broker, req: Request, session: Session):
    s = schema(req)
    body = req.body
    denied = _refused(broker, session, "ALTER", (t.name for t in body.topics))
    outcomes = await broker.blocking(_grow_all, broker, body.topics, body.validate_only, denied)
    return response(req, throttle_time=NO_THROTTLE, results=tuple(
        make(s.CreatePartitionsTopicResult, name=t.name, error_code=error_code(code), error_message=message)
        for t, (code, message) in zip(body.topics, outcomes)))


# DeleteRecords ------------------------------------------------------------------------------------

def _delete_records(broker: Broker, topics, denied: set[str]) -> list[list[tuple[int, int, int]]]:
    """Per topic, per partition: (partition, error code, low watermark). One checkpoint for them all."""
    cl = broker.cl
    out = []
    moved = False
    for t in topics:
        rows = []
        for p in t.partitions:
            if t.name in denied:
                rows.append((p.partition_index, TOPIC_AUTHORIZATION_FAILED, -1))
                continue
            try:
                if cl.find_partition(t.name, p.partition_index) is None:
                    raise UnknownTopicOrPartitionError(f"{shown(t.name, '')}-{p.partition_index} does not exist")
                low = cl.delete_records(t.name, p.partition_index, p.offset, checkpoint=False)
                rows.append((p.partition_index, 0, low))
                moved = True
            except CompactLogError as exc:
                rows.append((p.partition_index, exc.code, -1))
        out.append(rows)
    if moved:
        try:
            cl.checkpoint()
        except CompactLogError as exc:  # the moves stand in memory; the next checkpoint that works keeps them
            log.warning("DeleteRecords: the log start offsets could not be checkpointed: %s", exc)
    return out


async def delete_records(broker: Broker, req: Request, session: Session):
    s = schema(req)
    topics = req.body.topics
    denied = _refused(broker, session, "DELETE", (t.name for t in topics))
    results = await broker.blocking(_delete_records, broker, topics, denied)
    broker.data_arrived()  # fetches parked below the new log start answer OFFSET_OUT_OF_RANGE now
    return response(req, throttle_time=NO_THROTTLE, topics=tuple(
        make(s.DeleteRecordsTopicResult, name=t.name, partitions=tuple(
            make(s.DeleteRecordsPartitionResult, partition_index=index, low_watermark=low, error_code=error_code(code))
            for index, code, low in rows))
        for t, rows in zip(topics, results)))


HANDLERS = {19: create_topics, 20: delete_topics, 37: create_partitions, 21: delete_records}
