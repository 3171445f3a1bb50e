"""ACLs through a running broker (``acls --bootstrap-server``), as kafka-acls manages them: CreateAcls,
DescribeAcls and DeleteAcls through librdkafka's admin client. ``WireAcls`` answers the same three calls
as :class:`compactlog.security.acls.AclStore` (``add``, ``matching``, ``remove``) with the same
``AclBinding`` and ``AclFilter`` values, so the command has one body for both targets.

A broker without an authorizer answers the three APIs with SECURITY_DISABLED (54), which becomes
``Error: No Authorizer is configured...`` in the broker's own words.
"""

from __future__ import annotations

from typing import Iterable

from ..security.acls import AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType
from .wire import WireClient, result


class WireAcls:
    """The ACLs of the broker behind ``bootstrap``."""

    def __init__(self, bootstrap: str) -> None:
        self.admin = WireClient(bootstrap).admin  # the one 'no broker answered' line every command gives

    def add(self, new: Iterable[AclBinding]) -> None:
        from confluent_kafka.admin import AclBinding as Binding

        bindings = [Binding(b.resource_type.value, b.name, b.pattern_type.value, b.principal, b.host,
                            b.operation.value, b.permission.value) for b in new]
        if not bindings:
            return
        for future in self.admin.create_acls(bindings).values():
            result(future, "Adding ACLs: ")

    def matching(self, flt: AclFilter) -> list[AclBinding]:
        return [_ours(b) for b in result(self.admin.describe_acls(_theirs(flt)), "Listing ACLs: ")]

    def remove(self, filters: Iterable[AclFilter]) -> list[list[AclBinding]]:
        """Per filter, what the broker removed (one request for all of them, as Kafka's tool sends)."""
        filters = list(filters)
        if not filters:
            return []
        theirs = [_theirs(f) for f in filters]
        futures = self.admin.delete_acls(theirs)
        return [[_ours(b) for b in result(futures[t], "Removing ACLs: ")] for t in theirs]


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
