"""The group APIs on the wire: kio request entities in, the coordinator's answers out as kio responses.

JoinGroup (11), SyncGroup (14), Heartbeat (12), LeaveGroup (13), OffsetCommit (8), OffsetFetch (9),
OffsetDelete (47), ListGroups (16), DescribeGroups (15), DeleteGroups (42), TxnOffsetCommit (28). The rules live in
``coordinator.py``; this module only reads fields (some exist from a version on) and lays out each
version's response. FindCoordinator is in ``metadata.py``: this node coordinates every group.

Access is checked as Kafka checks it (``Broker.authorize``): READ on the group for JoinGroup, SyncGroup,
Heartbeat, LeaveGroup and OffsetCommit, DESCRIBE for OffsetFetch and DescribeGroups, DELETE for
DeleteGroups and OffsetDelete, refused with GROUP_AUTHORIZATION_FAILED (30) (TxnOffsetCommit first needs
WRITE on its transactional id: TRANSACTIONAL_ID_AUTHORIZATION_FAILED, 53); then READ (commit, delete) or
DESCRIBE (fetch) on each topic, refused per partition with TOPIC_AUTHORIZATION_FAILED (29). ListGroups
lists every group to those who may DESCRIBE the cluster, else the groups they may DESCRIBE.

``setup`` registers the coordinator as a broker service, so the broker starts it (replaying
``__consumer_offsets``) and stops it with the server.
"""

from __future__ import annotations

import datetime
from collections import defaultdict

from ..broker import NO_THROTTLE, Broker, Session, error_code
from ..entities import make, response, schema
from ..acls import GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED, authorized_operations
from ..metadata import NOT_COMPUTED
from ..protocol import Request
from .codes import (
    COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE,
    UNKNOWN_TOPIC_OR_PARTITION,
    UNSTABLE_OFFSET_COMMIT,
)
from . import GROUP_COORDINATOR
from .coordinator import GroupCoordinator
from ...group_records import OffsetCommitValue
from .state import DEAD

EXTRA = GROUP_COORDINATOR
DEFAULT_RETENTION = -1  # OffsetCommit v2-v4 retention_time: the broker's offsets.retention.minutes
CLASSIC_GROUP = "classic"  # ListGroups v5's type of every group here (no KIP-848 consumer groups)
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53


def setup(broker: Broker) -> None:
    coordinator = GroupCoordinator(broker)
    broker.extras[EXTRA] = coordinator
    broker.services.append(coordinator)


def _coordinator(broker: Broker) -> GroupCoordinator:
    return broker.extras[EXTRA]


def _ms(value: datetime.timedelta) -> int:
    return value // datetime.timedelta(milliseconds=1)


def _exists(broker: Broker, topic: str, partition: int) -> bool:
    return broker.cl.find_partition(topic, partition) is not None


def _may(broker: Broker, session: Session, operation: str, group_id: str) -> bool:
    return broker.authorize(session, operation, "GROUP", group_id)


def _topic_errors(broker: Broker, session: Session, operation: str, topics, partitions_of) -> dict:
    """TOPIC_AUTHORIZATION_FAILED, else UNKNOWN_TOPIC_OR_PARTITION, for the partitions that get one."""
    errors = {}
    for t in topics:
        allowed = broker.authorize(session, operation, "TOPIC", t.name)
        for p in partitions_of(t):
            if not allowed:
                errors[(t.name, p)] = TOPIC_AUTHORIZATION_FAILED
            elif not _exists(broker, t.name, p):
                errors[(t.name, p)] = UNKNOWN_TOPIC_OR_PARTITION
    return errors


def _nullable_from(req: Request, version: int, value: str | None) -> str | None:
    """A name that is nullable from ``version`` on (where an empty one is sent as null, as Kafka's
    JoinGroupResponse does) and an empty string before it."""
    return (value or None) if req.api_version >= version else value or ""


async def join_group(broker: Broker, req: Request, session: Session):
    """v7+ name the protocol type in the answer (null, as the protocol name, when there is none yet);
    v8+ carry the client's reason, which goes to the log; v9+ let a restarted static leader of a Stable
    group skip the assignment (``skip_assignment``)."""
    b = req.body
    if not _may(broker, session, "READ", b.group_id):
        return response(req, throttle_time=NO_THROTTLE, error_code=error_code(GROUP_AUTHORIZATION_FAILED),
                        protocol_type=None, protocol_name=_nullable_from(req, 7, None), leader="",
                        member_id="", members=())
    session_ms = _ms(b.session_timeout)
    rebalance = getattr(b, "rebalance_timeout", None)  # v0: the session timeout is both
    result = await _coordinator(broker).join_group(
        b.group_id, b.member_id, getattr(b, "group_instance_id", None), req.client_id or "",
        f"/{session.client_host}", session_ms, session_ms if rebalance is None else _ms(rebalance),
        b.protocol_type, [(p.name, p.metadata) for p in b.protocols], require_known_member_id=req.api_version >= 4,
        reason=getattr(b, "reason", None), may_skip_assignment=req.api_version >= 9)
    s = schema(req)
    members = tuple(make(s.JoinGroupResponseMember, member_id=m, group_instance_id=i, metadata=meta)
                    for m, i, meta in result.members)
    return response(req, throttle_time=NO_THROTTLE, error_code=error_code(result.error),
                    generation_id=result.generation_id, protocol_type=result.protocol_type,
                    protocol_name=_nullable_from(req, 7, result.protocol_name), leader=result.leader_id,
                    skip_assignment=result.skip_assignment, member_id=result.member_id, members=members)


async def sync_group(broker: Broker, req: Request, session: Session):
    """v5+: the protocol type and name the client names must be the group's (else
    INCONSISTENT_GROUP_PROTOCOL), and a success names them back."""
    b = req.body
    if not _may(broker, session, "READ", b.group_id):
        return response(req, throttle_time=NO_THROTTLE, error_code=error_code(GROUP_AUTHORIZATION_FAILED),
                        protocol_type=None, protocol_name=None, assignment=b"")
    result = await _coordinator(broker).sync_group(
        b.group_id, b.generation_id, b.member_id, getattr(b, "group_instance_id", None),
        {a.member_id: a.assignment for a in b.assignments}, getattr(b, "protocol_type", None),
        getattr(b, "protocol_name", None))
    return response(req, throttle_time=NO_THROTTLE, error_code=error_code(result.error),
                    protocol_type=result.protocol_type, protocol_name=result.protocol_name,
                    assignment=result.assignment)


async def heartbeat(broker: Broker, req: Request, session: Session):
    b = req.body
    if not _may(broker, session, "READ", b.group_id):
        return response(req, throttle_time=NO_THROTTLE, error_code=error_code(GROUP_AUTHORIZATION_FAILED))
    code = _coordinator(broker).heartbeat(b.group_id, b.generation_id, b.member_id,
                                          getattr(b, "group_instance_id", None))
    return response(req, throttle_time=NO_THROTTLE, error_code=error_code(code))


async def leave_group(broker: Broker, req: Request, session: Session):
    b = req.body
    if req.api_version >= 3:  # v5+: each with the client's reason (for the log)
        leaving = [(m.member_id, m.group_instance_id, getattr(m, "reason", None)) for m in b.members]
    else:
        leaving = [(b.member_id, None, None)]
    if not _may(broker, session, "READ", b.group_id):
        code, errors = GROUP_AUTHORIZATION_FAILED, []
    else:
        code, errors = await _coordinator(broker).leave_group(b.group_id, leaving)
    if req.api_version < 3:  # one member: its error is the request's
        return response(req, throttle_time=NO_THROTTLE, error_code=error_code(code or (errors[0] if errors else 0)))
    s = schema(req)
    members = tuple(make(s.MemberResponse, member_id=m, group_instance_id=i, error_code=error_code(e))
                    for (m, i, _), e in zip(leaving, errors))
    return response(req, throttle_time=NO_THROTTLE, error_code=error_code(code), members=members)


async def offset_commit(broker: Broker, req: Request, session: Session):
    b = req.body
    now = broker.cl.time.milliseconds()
    retention = getattr(b, "retention_time", None)
    retention_ms = DEFAULT_RETENTION if retention is None else _ms(retention)
    expire = now + retention_ms if retention_ms >= 0 else -1  # v2-v4 may ask for their own retention
    offsets: dict[tuple[str, int], OffsetCommitValue] = {}
    if not _may(broker, session, "READ", b.group_id):
        errors = {(t.name, p.partition_index): GROUP_AUTHORIZATION_FAILED for t in b.topics for p in t.partitions}
    else:
        errors = _topic_errors(broker, session, "READ", b.topics, lambda t: [p.partition_index for p in t.partitions])
    for t in b.topics:
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            if tp not in errors:
                offsets[tp] = OffsetCommitValue(p.committed_offset, getattr(p, "committed_leader_epoch", -1),
                                                p.committed_metadata or "", now, expire)
    if offsets:
        errors.update(await _coordinator(broker).commit_offsets(
            b.group_id, b.generation_id_or_member_epoch, b.member_id, getattr(b, "group_instance_id", None), offsets))
    s = schema(req)
    topics = tuple(
        make(s.OffsetCommitResponseTopic, name=t.name, partitions=tuple(
            make(s.OffsetCommitResponsePartition, partition_index=p.partition_index,
                 error_code=error_code(errors[(t.name, p.partition_index)]))
            for p in t.partitions))
        for t in b.topics
    )
    return response(req, throttle_time=NO_THROTTLE, topics=topics)


def _group_offsets(broker: Broker, session: Session, group_id: str, topics,
                   require_stable: bool = False) -> tuple[int, list[tuple]]:
    """OffsetFetch of one group: (the group's error, [(topic, partition, committed value or None,
    error)]). ``topics`` None asks for every committed partition, less those of topics the client may
    not describe; named partitions of such topics get TOPIC_AUTHORIZATION_FAILED and no offset. With a
    group error every named partition carries it too (v0-1 have nowhere else to put it).
    ``require_stable``: a partition whose offset is pending (in a transaction) gets
    UNSTABLE_OFFSET_COMMIT and no offset; without it, the committed offset is answered."""
    wanted = None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
    if not _may(broker, session, "DESCRIBE", group_id):
        code, rows = GROUP_AUTHORIZATION_FAILED, []
    else:
        code, rows = _coordinator(broker).fetch_offsets(group_id, wanted)
    if code:
        return code, [(t, p, None, code) for t, p in wanted or ()]
    if require_stable:
        unstable = _coordinator(broker).unstable_offsets(group_id, wanted)
        rows = [(tp, None if tp in unstable else v) for tp, v in rows]
    else:
        unstable = set()
    rows = [(tp, v, UNSTABLE_OFFSET_COMMIT if tp in unstable else 0) for tp, v in rows]
    if wanted is None:
        return code, [(t, p, v, e) for (t, p), v, e in rows if broker.authorize(session, "DESCRIBE", "TOPIC", t)]
    allowed = {t.name: broker.authorize(session, "DESCRIBE", "TOPIC", t.name) for t in topics}
    return code, [(t, p, v, e) if allowed[t] else (t, p, None, TOPIC_AUTHORIZATION_FAILED) for (t, p), v, e in rows]


def _offset_topics(topic_cls: type, partition_cls: type, rows: list[tuple]) -> tuple:
    by_topic: dict[str, list] = defaultdict(list)
    for topic, partition, value, code in rows:
        by_topic[topic].append(make(
            partition_cls, partition_index=partition,
            committed_offset=-1 if value is None else value.offset,
            committed_leader_epoch=-1 if value is None else value.leader_epoch,
            metadata="" if value is None else value.metadata, error_code=error_code(code)))
    return tuple(make(topic_cls, name=name, partitions=tuple(parts)) for name, parts in by_topic.items())


async def offset_fetch(broker: Broker, req: Request, session: Session):
    """v8+ ask for several groups at once, each answered with its own error. v7+'s ``require_stable``
    asks for UNSTABLE_OFFSET_COMMIT (retriable) instead of the committed offset where one is pending in
    a transaction; v9's member id and epoch belong to the KIP-848 consumer protocol, and a classic
    group's fetch ignores them, as Kafka's."""
    b = req.body
    s = schema(req)
    stable = bool(getattr(b, "require_stable", False))
    if req.api_version >= 8:
        groups = []
        for g in b.groups:
            code, rows = _group_offsets(broker, session, g.group_id, g.topics, stable)
            topics = () if code else _offset_topics(s.OffsetFetchResponseTopics, s.OffsetFetchResponsePartitions, rows)
            groups.append(make(s.OffsetFetchResponseGroup, group_id=g.group_id, topics=topics,
                               error_code=error_code(code)))
        return response(req, throttle_time=NO_THROTTLE, groups=tuple(groups))
    code, rows = _group_offsets(broker, session, b.group_id, b.topics, stable)
    if code and req.api_version >= 2:  # the request's error says it all
        return response(req, throttle_time=NO_THROTTLE, topics=(), error_code=error_code(code))
    return response(req, throttle_time=NO_THROTTLE, error_code=error_code(code),
                    topics=_offset_topics(s.OffsetFetchResponseTopic, s.OffsetFetchResponsePartition, rows))


async def txn_offset_commit(broker: Broker, req: Request, session: Session):
    """TxnOffsetCommit (a transactional producer's ``send_offsets_to_transaction``): WRITE on the
    transactional id, READ on the group, then per topic READ and existence, as Kafka checks them; the
    rest is ``txn_offsets.py``. v2+ carry the leader epoch, v3+ the consumer's member id, generation and
    instance id (KIP-447). v0-1 get COORDINATOR_NOT_AVAILABLE for COORDINATOR_LOAD_IN_PROGRESS, which
    clients before Kafka 2.0 did not expect."""
    b = req.body
    now = broker.cl.time.milliseconds()
    pairs = [(t.name, p.partition_index) for t in b.topics for p in t.partitions]
    if not broker.authorize(session, "WRITE", "TRANSACTIONAL_ID", b.transactional_id):
        errors = dict.fromkeys(pairs, TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    elif not _may(broker, session, "READ", b.group_id):
        errors = dict.fromkeys(pairs, GROUP_AUTHORIZATION_FAILED)
    else:
        errors = _topic_errors(broker, session, "READ", b.topics, lambda t: [p.partition_index for p in t.partitions])
        offsets = {(t.name, p.partition_index): OffsetCommitValue(p.committed_offset, getattr(p, "committed_leader_epoch", -1),
                                                                  p.committed_metadata or "", now, -1)
                   for t in b.topics for p in t.partitions if (t.name, p.partition_index) not in errors}
        if offsets:
            errors.update(await _coordinator(broker).commit_txn_offsets(
                b.group_id, b.transactional_id, b.producer_id, b.producer_epoch, getattr(b, "member_id", ""),
                getattr(b, "group_instance_id", None), getattr(b, "generation_id", -1), offsets))
    if req.api_version < 2:
        errors = {tp: COORDINATOR_NOT_AVAILABLE if e == COORDINATOR_LOAD_IN_PROGRESS else e for tp, e in errors.items()}
    s = schema(req)
    by_topic: dict[str, list] = defaultdict(list)
    for t in b.topics:
        for p in t.partitions:
            by_topic[t.name].append(make(s.TxnOffsetCommitResponsePartition, partition_index=p.partition_index,
                                         error_code=error_code(errors[(t.name, p.partition_index)])))
    topics = tuple(make(s.TxnOffsetCommitResponseTopic, name=name, partitions=tuple(parts))
                   for name, parts in by_topic.items())
    return response(req, throttle_time=NO_THROTTLE, topics=topics)


async def offset_delete(broker: Broker, req: Request, session: Session):
    b = req.body
    if not _may(broker, session, "DELETE", b.group_id):
        code, results, errors = GROUP_AUTHORIZATION_FAILED, {}, {}
    else:
        errors = _topic_errors(broker, session, "READ", b.topics, lambda t: [p.partition_index for p in t.partitions])
        wanted = [(t.name, p.partition_index) for t in b.topics for p in t.partitions
                  if (t.name, p.partition_index) not in errors]
        code, results = await _coordinator(broker).delete_offsets(b.group_id, wanted)
    s = schema(req)
    if code:
        return response(req, error_code=error_code(code), throttle_time=NO_THROTTLE, topics=())
    errors.update(results)
    topics = tuple(
        make(s.OffsetDeleteResponseTopic, name=t.name, partitions=tuple(
            make(s.OffsetDeleteResponsePartition, partition_index=p.partition_index,
                 error_code=error_code(errors[(t.name, p.partition_index)]))
            for p in t.partitions))
        for t in b.topics
    )
    return response(req, error_code=error_code(0), throttle_time=NO_THROTTLE, topics=topics)


async def list_groups(broker: Broker, req: Request, session: Session):
    """v4+ answer each group's state and may ask for some states only; v5+ answer each group's type and
    may ask for some types only: every group here is a classic group. Both filters ignore case, as
    Kafka's (3.8); an empty filter keeps everything."""
    b = req.body
    states = {state.lower() for state in getattr(b, "states_filter", ())}
    types = {kind.lower() for kind in getattr(b, "types_filter", ())}
    code, groups = _coordinator(broker).list_groups()
    groups = [(g, t, state) for g, t, state in groups
              if (not states or state.lower() in states) and (not types or CLASSIC_GROUP in types)]
    if not broker.authorize(session, "DESCRIBE", "CLUSTER"):
        groups = [row for row in groups if _may(broker, session, "DESCRIBE", row[0])]
    s = schema(req)
    listed = tuple(make(s.ListedGroup, group_id=g, protocol_type=t, group_state=state, group_type=CLASSIC_GROUP)
                   for g, t, state in groups)
    return response(req, throttle_time=NO_THROTTLE, error_code=error_code(code), groups=listed)


async def describe_groups(broker: Broker, req: Request, session: Session):
    """v3+ may ask for the operations the client may do on each group: computed for the groups described
    without error, "not computed" (INT32_MIN) for the others and when not asked, as Kafka answers."""
    s = schema(req)
    coordinator = _coordinator(broker)
    asked = getattr(req.body, "include_authorized_operations", False)
    described = []
    for group_id in req.body.groups:
        if not _may(broker, session, "DESCRIBE", group_id):
            code, group = GROUP_AUTHORIZATION_FAILED, None
        else:
            code, group = coordinator.describe_group(group_id)
        operations = authorized_operations(broker, session, "GROUP", group_id) if asked and not code else NOT_COMPUTED
        if code or group is None or group.is_(DEAD):
            described.append(make(s.DescribedGroup, error_code=error_code(code), group_id=group_id,
                                  group_state="" if code else DEAD.value, protocol_type="", protocol_data="",
                                  members=(), authorized_operations=operations))
            continue
        stable = group.described_protocol()
        members = tuple(
            make(s.DescribedGroupMember, member_id=m.member_id, group_instance_id=m.group_instance_id,
                 client_id=m.client_id, client_host=m.client_host,
                 member_metadata=m.metadata(stable) if stable else b"",
                 member_assignment=m.assignment if stable else b"")
            for m in group.members.values()
        )
        described.append(make(s.DescribedGroup, error_code=error_code(0), group_id=group_id,
                              group_state=group.state.value, protocol_type=group.protocol_type or "",
                              protocol_data=stable, members=members, authorized_operations=operations))
    return response(req, throttle_time=NO_THROTTLE, groups=tuple(described))


async def delete_groups(broker: Broker, req: Request, session: Session):
    s = schema(req)
    names = list(req.body.groups_names)
    allowed = [g for g in names if _may(broker, session, "DELETE", g)]
    results = dict.fromkeys(names, GROUP_AUTHORIZATION_FAILED)
    results.update(await _coordinator(broker).delete_groups(allowed))
    return response(req, throttle_time=NO_THROTTLE, results=tuple(
        make(s.DeletableGroupResult, group_id=g, error_code=error_code(results[g])) for g in names))


HANDLERS = {11: join_group, 14: sync_group, 12: heartbeat, 13: leave_group, 8: offset_commit, 9: offset_fetch,
            47: offset_delete, 16: list_groups, 15: describe_groups, 42: delete_groups, 28: txn_offset_commit}
