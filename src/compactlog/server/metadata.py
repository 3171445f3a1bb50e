"""ApiVersions, Metadata, DescribeCluster and FindCoordinator: what a client asks before anything else.

One node is the whole cluster: it is every partition's leader, its only replica and in-sync replica,
the controller, and the coordinator of every group. Every partition reports leader epoch 0, the epoch
the storage stamps on every stored batch.

Topics are created on Metadata when the client allows it and ``auto.create.topics.enable`` is on
(Kafka's default, and librdkafka producers ask for it), with ``num.partitions`` partitions.
"""

from __future__ import annotations

import uuid

from ..errors import CompactLogError, shown
from ..partition import LEADER_EPOCH
from ..topics import INTERNAL_TOPICS
from .acls import authorized_operations, cluster_operations
from .broker import NO_THROTTLE, Broker, Session, error_code
from .entities import make, response, schema
from .protocol import Request
from .topic_ids import ZERO_UUID, topic_text
from .topic_ids import topic_uuid as uuid_of
from .versions import SERVED

NOT_COMPUTED = -(2**31)  # authorized operations "not computed" (INT32_MIN)


def epoch_problem(current: int) -> int:
    """The error for a client's current leader epoch (Fetch v9+, ListOffsets v4+, OffsetForLeaderEpoch):
    newer than ours UNKNOWN_LEADER_EPOCH (75), older FENCED_LEADER_EPOCH (74); -1 asks for no check."""
    if current < 0 or current == LEADER_EPOCH:
        return 0
    return 75 if current > LEADER_EPOCH else 74


async def api_versions(broker: Broker, req: Request, session: Session):
    s = schema(req)
    keys = tuple(make(s.ApiVersion, api_key=r.key, min_version=r.min_version, max_version=r.max_version)
                 for r in SERVED.values() if r.key in broker.handlers)
    return response(req, error_code=error_code(0), api_keys=keys, throttle_time=NO_THROTTLE)


async def metadata(broker: Broker, req: Request, session: Session):
    s = schema(req)
    body = req.body
    version = req.api_version
    asked = body.topics
    if asked is not None and version in (10, 11) and any(t.name is None or _has_id(t) for t in asked):
        return _refused(req, 42, asked)  # Kafka: topics by id from v12 on; before it, each needs a name
    topics = []
    by_id = asked is not None and any(_has_id(t) for t in asked)
    names: list[str]
    auto = False
    if asked is None or (version == 0 and not asked):
        names = [n for n in broker.cl.list_topics() if broker.authorize(session, "DESCRIBE", "TOPIC", n)]
        # (topics the client may not describe are left out, as Kafka does)
    elif by_id:  # v12: by id (then names are not looked at, as in Kafka); ids nobody has: UNKNOWN_TOPIC_ID
        names = []
        for t in asked:
            name = topic_with_uuid(broker, t.topic_id)
            if name is None:
                if _has_id(t):
                    topics.append(make(s.MetadataResponseTopic, error_code=error_code(100), name=None,
                                       topic_id=t.topic_id, is_internal=False, partitions=(),
                                       topic_authorized_operations=NOT_COMPUTED))
            elif not broker.authorize(session, "DESCRIBE", "TOPIC", name):  # ids are not secret: the id is kept
                topics.append(make(s.MetadataResponseTopic, error_code=error_code(29), name=None, topic_id=t.topic_id,
                                   is_internal=False, partitions=(), topic_authorized_operations=NOT_COMPUTED))
            else:
                names.append(name)
        names = list(dict.fromkeys(names))  # an id asked twice is answered once (a list scanned per id was quadratic)
    else:
        names = [t.name for t in asked]
        auto = bool(getattr(body, "allow_auto_topic_creation", True)) and broker.config.get("auto.create.topics.enable")
    with_ops = version >= 8 and bool(getattr(body, "include_topic_authorized_operations", False))
    for name in names:
        code = error_code(0)
        parts = ()
        if not broker.authorize(session, "DESCRIBE", "TOPIC", name):
            code = error_code(29)  # TOPIC_AUTHORIZATION_FAILED, whether it exists or not
        elif not broker.cl.has_topic(name):
            code = error_code(3)
            if auto and not (broker.authorize(session, "CREATE", "CLUSTER")
                             or broker.authorize(session, "CREATE", "TOPIC", name)):
                code = error_code(29)
            elif auto:
                try:  # an illegal name is INVALID_TOPIC_EXCEPTION (17), from create_topic's own check
                    await broker.blocking(broker.cl.create_topic, name)
                    code = error_code(0)
                except CompactLogError as exc:
                    if not broker.cl.has_topic(name):  # else another request created it meanwhile
                        code = error_code(exc)
        if code == 0:
            parts = tuple(
                make(s.MetadataResponsePartition, error_code=error_code(0), partition_index=p, leader_id=broker.node_id,
                     leader_epoch=LEADER_EPOCH, replica_nodes=(broker.node_id,), isr_nodes=(broker.node_id,),
                     offline_replicas=())
                for p in range(broker.cl.partitions_for(name))
            )
        ops = authorized_operations(broker, session, "TOPIC", name) if with_ops and code != 29 else NOT_COMPUTED
        topics.append(make(s.MetadataResponseTopic, error_code=code, name=name, is_internal=name in INTERNAL_TOPICS,
                           topic_id=topic_uuid(broker, name) if code != 29 else ZERO_UUID,
                           partitions=parts, topic_authorized_operations=ops))
    cluster_ops = NOT_COMPUTED  # v8-10 only: v11 left it to DescribeCluster
    if 8 <= version <= 10 and body.include_cluster_authorized_operations:
        cluster_ops = cluster_operations(broker, session)
    host, port = broker.address(session)
    brokers = (make(s.MetadataResponseBroker, node_id=broker.node_id, host=host, port=port, rack=None),)
    return response(req, throttle_time=NO_THROTTLE, brokers=brokers, cluster_id=broker.cluster_id,
                    controller_id=broker.node_id, topics=tuple(topics), cluster_authorized_operations=cluster_ops)


def _has_id(topic) -> bool:
    """Whether a Metadata request's topic names an id (kio reads the zero UUID, "no id", as None)."""
    u = getattr(topic, "topic_id", None)
    return u is not None and u.int != 0


def _refused(req: Request, code: int, asked) -> object:
    """Kafka's answer to a Metadata request it refuses whole: no brokers, every topic asked with ``code``."""
    s = schema(req)
    topics = tuple(make(s.MetadataResponseTopic, error_code=error_code(code), name=t.name or "", topic_id=t.topic_id,
                        is_internal=False, partitions=(), topic_authorized_operations=NOT_COMPUTED) for t in asked)
    return response(req, throttle_time=NO_THROTTLE, brokers=(), cluster_id=None, controller_id=-1, topics=topics,
                    cluster_authorized_operations=NOT_COMPUTED)


def topic_uuid(broker: Broker, name: str) -> uuid.UUID:
    """The topic's id as Metadata v10+ and Fetch v13+ carry it: the one in its ``partition.metadata``,
    which the console and ``topics --describe`` show (the zero UUID for no such topic)."""
    return uuid_of(broker.cl.topic_id(name))


def topic_with_uuid(broker: Broker, topic_id: uuid.UUID | None) -> str | None:
    """The name of the topic with this wire id, or None (no topic has it; the zero UUID names none)."""
    if topic_id is None or not topic_id.int:
        return None
    return broker.cl.topic_with_id(topic_text(topic_id))


BROKER_ENDPOINT, CONTROLLER_ENDPOINT = 1, 2  # DescribeCluster v1's endpoint types (KIP-919)


async def describe_cluster(broker: Broker, req: Request, session: Session):
    """v1 asks which kind of endpoint it reached: this is a broker's; a client asking for a controller's
    (or an unknown kind) is told so, with Kafka's codes (INVALID_REQUEST at v0)."""
    s = schema(req)
    wanted = getattr(req.body, "endpoint_type", BROKER_ENDPOINT)
    if wanted != BROKER_ENDPOINT:
        known = wanted == CONTROLLER_ENDPOINT
        code = 42 if req.api_version == 0 else (114 if known else 115)  # MISMATCHED / UNSUPPORTED_ENDPOINT_TYPE
        message = ("The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER"
                   if known else f"Unsupported endpoint type {wanted}")
        return response(req, throttle_time=NO_THROTTLE, error_code=error_code(code), error_message=message,
                        endpoint_type=BROKER_ENDPOINT, cluster_id="", controller_id=-1, brokers=(),
                        cluster_authorized_operations=NOT_COMPUTED)
    host, port = broker.address(session)
    ops = NOT_COMPUTED
    if req.body.include_cluster_authorized_operations:
        ops = cluster_operations(broker, session)
    return response(req, throttle_time=NO_THROTTLE, error_code=error_code(0), error_message=None,
                    endpoint_type=BROKER_ENDPOINT, cluster_id=broker.cluster_id, controller_id=broker.node_id,
                    brokers=(make(s.DescribeClusterBroker, broker_id=broker.node_id, host=host, port=port,
                                  rack=None),),
                    cluster_authorized_operations=ops)


async def find_coordinator(broker: Broker, req: Request, session: Session):
    """This node coordinates every group and every transactional id (key type 1).
    v4+ ask for several keys at once and get an answer (and an error) for each."""
    b = req.body
    key_type = getattr(b, "key_type", 0)
    if req.api_version >= 4:
        s = schema(req)
        found = [(key, *_coordinator_of(broker, session, key_type, key)) for key in b.coordinator_keys]
        return response(req, throttle_time=NO_THROTTLE, coordinators=tuple(
            make(s.Coordinator, key=key, node_id=node, host=host, port=port, error_code=error_code(code),
                 error_message=message) for key, code, message, node, host, port in found))
    code, message, node, host, port = _coordinator_of(broker, session, key_type, b.key)
    return response(req, throttle_time=NO_THROTTLE, error_code=error_code(code), error_message=message,
                    node_id=node, host=host, port=port)


def _coordinator_of(broker: Broker, session: Session, key_type: int, key: str) -> tuple:
    """(error, message, node id, host, port) of the coordinator of ``key``."""
    if key_type == 1:  # a transactional id: this node's transaction coordinator (txn_coordinator.py)
        if not broker.authorize(session, "DESCRIBE", "TRANSACTIONAL_ID", key):  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            return 53, f"Not authorized to describe transactional id {shown(key)}", -1, "", -1
        transactions = broker.extras.get("transactions")
        if transactions is None:
            return 15, "the transaction coordinator is not running", -1, "", -1
        transactions.prepare_topic()  # Kafka creates __transaction_state at the first FindCoordinator
        host, port = broker.address(session)
        return 0, None, broker.node_id, host, port
    if key_type != 0:  # INVALID_REQUEST, as Kafka answers a key type it does not know
        return 42, f"unknown coordinator key type {key_type} (0 is a group, 1 a transactional id)", -1, "", -1
    if not key:
        return 24, "the group id is empty", -1, "", -1
    if not broker.authorize(session, "DESCRIBE", "GROUP", key):  # GROUP_AUTHORIZATION_FAILED
        return 30, f"Not authorized to describe group {shown(key)}", -1, "", -1
    host, port = broker.address(session)
    return 0, None, broker.node_id, host, port


HANDLERS = {18: api_versions, 3: metadata, 60: describe_cluster, 10: find_coordinator}
