"""The authorizer on the broker, and the ACL APIs: DescribeAcls (29), CreateAcls (30), DeleteAcls (31).

``BrokerAuthorizer.authorize(session, operation, resource_type, name)`` is the one check every API
module makes (through ``Broker.authorize``), with Kafka's operation and resource names as strings
(``"READ"``, ``"TOPIC"``). Which check each API makes, and the error it answers with, is Kafka's:

| API | check | refused with |
|---|---|---|
| Produce | WRITE topic | TOPIC_AUTHORIZATION_FAILED (29) per partition |
| Fetch | READ topic | 29 per partition |
| Metadata | DESCRIBE topic (CREATE topic or cluster to auto-create) | 29 per topic; left out when listing all |
| ListOffsets, OffsetForLeaderEpoch | DESCRIBE topic | 29 per partition |
| InitProducerId | IDEMPOTENT_WRITE cluster, or WRITE on any topic | CLUSTER_AUTHORIZATION_FAILED (31) |
| FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup | DESCRIBE / READ group | GROUP_AUTHORIZATION_FAILED (30) |
| OffsetCommit / OffsetFetch | READ group, then READ / DESCRIBE topic | 30, then 29 per partition |
| CreateTopics / DeleteTopics | CREATE (cluster or topic) / DELETE topic | 29 per topic |
| DescribeConfigs / AlterConfigs | DESCRIBE_CONFIGS / ALTER_CONFIGS topic or cluster | 29 or 31 per resource |
| DescribeAcls / CreateAcls, DeleteAcls | DESCRIBE / ALTER cluster | 31 |

The ACLs themselves and the decision are in ``compactlog.security.acls``.
"""

from __future__ import annotations

from functools import lru_cache

from ..errors import CompactLogError, InvalidRequestError
from ..security.acls import (
    CLUSTER_NAME,
    AclBinding,
    AclFilter,
    AclStore,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    parse_super_users,
)
from .broker import NO_THROTTLE, Broker, Session, error_code
from .entities import make, response, schema
from .protocol import Request

TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED = 29, 30, 31
INVALID_REQUEST = 42


@lru_cache(maxsize=None)
def _operation(name: str | Operation) -> Operation:
    return name if isinstance(name, Operation) else Operation[name.upper()]


@lru_cache(maxsize=None)
def _resource_type(name: str | ResourceType) -> ResourceType:
    return name if isinstance(name, ResourceType) else ResourceType[name.upper()]


class BrokerAuthorizer:
    """The authorizer seen from a request: a session's principal and address against the ACLs."""

    def __init__(self, store: AclStore, config) -> None:
        self.decide = Authorizer(store, parse_super_users(config.get("super.users")),
                                 config.get("allow.everyone.if.no.acl.found"))

    def authorize(self, session: Session, operation: str, resource_type: str, name: str = CLUSTER_NAME) -> bool:
        return self.decide.authorize(session.principal, session.client_host, _operation(operation),
                                     _resource_type(resource_type), name)

    def authorize_any(self, session: Session, operation: str, resource_type: str) -> bool:
        """Allowed on at least one resource of the type (WRITE on some topic stands for IDEMPOTENT_WRITE)."""
        return self.decide.authorize_any(session.principal, session.client_host, _operation(operation),
                                         _resource_type(resource_type))


def authorizer(broker: Broker) -> BrokerAuthorizer:
    return broker.extras["authorizer"]


def may_write_idempotently(broker: Broker, session: Session) -> bool:
    """InitProducerId without a transactional id: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic."""
    a = authorizer(broker)
    return a.authorize(session, "IDEMPOTENT_WRITE", "CLUSTER") or a.authorize_any(session, "WRITE", "TOPIC")


# The operations Kafka reports as "authorized operations" of each resource type (KIP-430), in its order.
SUPPORTED_OPERATIONS = {
    "TOPIC": ("READ", "WRITE", "CREATE", "DESCRIBE", "DELETE", "ALTER", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"),
    "GROUP": ("READ", "DESCRIBE", "DELETE"),
    "CLUSTER": ("CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "ALTER", "DESCRIBE"),
}


def authorized_operations(broker: Broker, session: Session, resource_type: str, name: str = CLUSTER_NAME) -> int:
    """The bit field (bit n for operation code n) of the operations ``session`` may do on the resource, as
    Metadata, DescribeCluster and DescribeGroups answer when a client asks for authorized operations."""
    bits = 0
    for op in SUPPORTED_OPERATIONS[resource_type]:
        if broker.authorize(session, op, resource_type, name):
            bits |= 1 << _operation(op)
    return bits


def cluster_operations(broker: Broker, session: Session) -> int:
    """The cluster's authorized operations as Metadata v8-10 and DescribeCluster answer them: 0 for a
    caller who may not describe the cluster, as Kafka answers."""
    if not broker.authorize(session, "DESCRIBE", "CLUSTER"):
        return 0
    return authorized_operations(broker, session, "CLUSTER")


# The ACL APIs -------------------------------------------------------------------------------------------

def _filter(f) -> AclFilter:
    flt = AclFilter(_enum(ResourceType, f.resource_type_filter), f.resource_name_filter,
                    _enum(PatternType, f.pattern_type_filter), f.principal_filter, f.host_filter,
                    _enum(Operation, f.operation), _enum(Permission, f.permission_type))
    flt.check()
    return flt


def _enum(kind, value: int):
    try:
        return kind(value)
    except ValueError:
        return kind(0)


async def create_acls(broker: Broker, req: Request, session: Session):
    s = schema(req)
    creations = req.body.creations
    if not authorizer(broker).authorize(session, "ALTER", "CLUSTER"):
        results = [(CLUSTER_AUTHORIZATION_FAILED, "Not allowed to alter ACLs (ALTER on the cluster)")] * len(creations)
    else:
        results, good = [], []
        for c in creations:
            try:
                b = AclBinding(_enum(ResourceType, c.resource_type), c.resource_name,
                               _enum(PatternType, c.resource_pattern_type), c.principal, c.host,
                               _enum(Operation, c.operation), _enum(Permission, c.permission_type))
                b.check()
                good.append(b)
                results.append((0, None))
            except CompactLogError as exc:
                results.append((exc.code, str(exc)))
        if good:
            try:
                await broker.blocking(broker.extras["acls"].add, good)
            except CompactLogError as exc:
                results = [(exc.code, str(exc)) if code == 0 else (code, msg) for code, msg in results]
    return response(req, throttle_time=NO_THROTTLE, results=tuple(
        make(s.AclCreationResult, error_code=error_code(code), error_message=msg) for code, msg in results))


async def describe_acls(broker: Broker, req: Request, session: Session):
    s = schema(req)

    def answer(code: int, message: str | None, resources=()):
        return response(req, throttle_time=NO_THROTTLE, error_code=error_code(code), error_message=message,
                        resources=tuple(resources))

    if not authorizer(broker).authorize(session, "DESCRIBE", "CLUSTER"):
        return answer(CLUSTER_AUTHORIZATION_FAILED, "Not allowed to describe ACLs (DESCRIBE on the cluster)")
    try:
        flt = _filter(req.body)
    except InvalidRequestError as exc:
        return answer(INVALID_REQUEST, str(exc))
    groups: dict[tuple, list[AclBinding]] = {}
    for b in broker.extras["acls"].matching(flt):
        groups.setdefault((b.resource_type, b.name, b.pattern_type), []).append(b)
    resources = [
        make(s.DescribeAclsResource, resource_type=rt.value, resource_name=name, pattern_type=pt.value, acls=tuple(
            make(s.AclDescription, principal=b.principal, host=b.host, operation=b.operation.value,
                 permission_type=b.permission.value) for b in bindings))
        for (rt, name, pt), bindings in groups.items()
    ]
    return answer(0, None, resources)


async def delete_acls(broker: Broker, req: Request, session: Session):
    s = schema(req)
    filters = req.body.filters
    if not authorizer(broker).authorize(session, "ALTER", "CLUSTER"):
        return response(req, throttle_time=NO_THROTTLE, filter_results=tuple(
            make(s.DeleteAclsFilterResult, error_code=error_code(CLUSTER_AUTHORIZATION_FAILED),
                 error_message="Not allowed to delete ACLs (ALTER on the cluster)", matching_acls=())
            for _ in filters))
    parsed: list[AclFilter | str] = []
    for f in filters:
        try:
            parsed.append(_filter(f))
        except InvalidRequestError as exc:
            parsed.append(str(exc))
    valid = [f for f in parsed if isinstance(f, AclFilter)]
    removed = iter(await broker.blocking(broker.extras["acls"].remove, valid) if valid else [])
    results = []
    for f in parsed:
        if isinstance(f, str):
            results.append(make(s.DeleteAclsFilterResult, error_code=error_code(INVALID_REQUEST), error_message=f,
                                matching_acls=()))
            continue
        results.append(make(s.DeleteAclsFilterResult, error_code=error_code(0), error_message=None, matching_acls=tuple(
            make(s.DeleteAclsMatchingAcl, error_code=error_code(0), error_message=None,
                 resource_type=b.resource_type.value, resource_name=b.name, pattern_type=b.pattern_type.value,
                 principal=b.principal, host=b.host, operation=b.operation.value, permission_type=b.permission.value)
            for b in next(removed))))
    return response(req, throttle_time=NO_THROTTLE, filter_results=tuple(results))


def setup(broker: Broker) -> None:
    store = AclStore(broker.cl.data_dir)
    broker.extras["acls"] = store
    broker.extras["authorizer"] = BrokerAuthorizer(store, broker.config)


HANDLERS = {29: describe_acls, 30: create_acls, 31: delete_acls}
