"""ACLs through a running broker (``acls --bootstrap-server``), as kafka-acls manages them: CreateAcls,
DescribeAcls and DeleteAcls through librdkafka's admin client. ``WireAcls`` answers the same three calls
as :class:`compactlog.security.acls.AclStore` (``add``, ``matching``, ``remove``) with the same
``AclBinding`` and ``AclFilter`` values, so the command has one body for both targets.

A broker without an authorizer answers the three APIs with SECURITY_DISABLED (54), which becomes
``Error: No Authorizer is configured...`` in the broker's own words. librdkafka (2.16) drops DescribeAcls'
top-level error (it reads it, then answers with an empty list), so a refusal would list no ACLs at all:
DescribeAcls goes over a socket of ours (``sasl_client``, logged in as ``--command-config`` says), and its
error becomes ours.
"""

from __future__ import annotations

from typing import Iterable

from ..errors import CompactLogError, error_for
from ..security.acls import AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType
from .wire import TIMEOUT_S, WireClient, result

MAX_ANSWER = 64 << 20  # every ACL of a cluster, in one answer


class WireAcls:
    """The ACLs of the broker behind ``bootstrap``."""

    def __init__(self, bootstrap: str) -> None:
        client = WireClient(bootstrap)  # the one 'no broker answered' line every command gives
        self.admin = client.admin
        brokers = {b.id: (b.host, b.port) for b in client.brokers()}
        self.broker = brokers.get(client.node_id) or next(iter(brokers.values()))

    def add(self, new: Iterable[AclBinding]) -> None:
        from confluent_kafka.admin import AclBinding as Binding

        bindings = [Binding(b.resource_type.value, b.name, b.pattern_type.value, b.principal, b.host,
                            b.operation.value, b.permission.value) for b in new]
        if not bindings:
            return
        for future in self.admin.create_acls(bindings).values():
            result(future)

    def matching(self, flt: AclFilter) -> list[AclBinding]:
        """DescribeAcls v1 by hand (see the module's docstring)."""
        from kio.schema.describe_acls.v1.request import DescribeAclsRequest
        from kio.schema.describe_acls.v1.response import DescribeAclsResponse

        from .sasl_client import ask, connect

        body = DescribeAclsRequest(
            resource_type_filter=flt.resource_type.value, resource_name_filter=flt.name,
            pattern_type_filter=flt.pattern_type.value, principal_filter=flt.principal, host_filter=flt.host,
            operation=flt.operation.value, permission_type=flt.permission.value)
        host, port = self.broker
        try:
            with connect(host, port, TIMEOUT_S) as sock:
                answer = ask(sock, body, DescribeAclsResponse, MAX_ANSWER, f"{host}:{port}")
        except OSError as exc:
            raise CompactLogError(f"no answer to DescribeAcls from {host}:{port}: {exc}") from None
        if answer.error_code != 0:
            raise error_for(int(answer.error_code), answer.error_message or None)
        return [AclBinding(_member(ResourceType, r.resource_type), r.resource_name, _member(PatternType, r.pattern_type),
                           a.principal, a.host, _member(Operation, a.operation), _member(Permission, a.permission_type))
                for r in answer.resources for a in r.acls]

    def remove(self, filters: Iterable[AclFilter]) -> list[list[AclBinding]]:
        """Per filter, what the broker removed (one request for all of them, as Kafka's tool sends)."""
        filters = list(filters)
        if not filters:
            return []
        theirs = [_theirs(f) for f in filters]
        futures = self.admin.delete_acls(theirs)
        return [[_ours(b) for b in result(futures[t])] for t in theirs]


def _theirs(f: AclFilter):
    from confluent_kafka.admin import AclBindingFilter

    return AclBindingFilter(f.resource_type.value, f.name, f.pattern_type.value, f.principal, f.host,
                            f.operation.value, f.permission.value)


def _ours(b) -> AclBinding:
    return AclBinding(_member(ResourceType, b.restype), b.name, _member(PatternType, b.resource_pattern_type),
                      b.principal, b.host, _member(Operation, b.operation), _member(Permission, b.permission_type))


def _member(kind, value):
    """Our member for librdkafka's (same numbers: Kafka's); one we do not know is UNKNOWN."""
    try:
        return kind(int(getattr(value, "value", value)))
    except ValueError:
        return kind(0)
