"""ACLs and the authorizer's decision, with Kafka's resource types, operations and numbering.

An ACL binding says: ``principal`` connecting from ``host`` is ALLOWed (or DENYed) ``operation`` on the
resources a pattern names (a TOPIC, GROUP or CLUSTER; LITERAL: that name or every name for '*';
PREFIXED: every name starting with it). The decision for one request (``Authorizer.authorize``):

1. super users (``super.users``) may do anything;
2. while no ACL exists at all, everyone may do anything (a fresh broker works without setup);
3. a matching DENY wins over any ALLOW;
4. a matching ALLOW of the operation, of ALL, or of an operation that implies it (READ, WRITE,
   DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS) allows;
5. otherwise denied, unless ``allow.everyone.if.no.acl.found`` is on and no ACL names the resource.

Bindings live in ``__security/acls.json`` (``store.py``), written by the CreateAcls/DeleteAcls APIs and
``compactlog acls``; the broker sees every change at its next decision.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass
from typing import Iterable

from ..errors import InvalidRequestError, shown
from ..storage import files
from .store import JsonFile

CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource's name, as Kafka names it
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
VERSION = 1


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# An ALLOW of a key also allows the operations listed (Kafka's implied operations).
IMPLIED_BY = {
    Operation.DESCRIBE: {Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER},
    Operation.DESCRIBE_CONFIGS: {Operation.ALTER_CONFIGS},
}


def parse_enum(kind: type[enum.IntEnum], text: str | int) -> enum.IntEnum:
    """``kind``'s member from a number or a name in any case, with or without underscores
    (``DescribeConfigs``, ``describe_configs``, ``DESCRIBE-CONFIGS``), as kafka-acls.sh reads them."""
    if isinstance(text, int):
        try:
            return kind(text)
        except ValueError:
            return kind(0)
    wanted = text.replace("_", "").replace("-", "").upper()
    for member in kind:
        if member.name.replace("_", "") == wanted:
            return member
    names = ", ".join(m.name for m in kind if m.value > 1)
    raise InvalidRequestError(f"Unknown {kind.__name__} {shown(text)} (one of {names})")


@dataclass(frozen=True)
class AclBinding:
    """One ACL: a resource pattern and an access control entry."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def check(self) -> None:
        """Kafka's rules for a binding that can be stored (InvalidRequestError otherwise)."""
        if self.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
            raise InvalidRequestError(f"Invalid resource type {self.resource_type.name} for an ACL")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise InvalidRequestError(f"Invalid pattern type {self.pattern_type.name}: LITERAL or PREFIXED")
        if self.operation in (Operation.UNKNOWN, Operation.ANY):
            raise InvalidRequestError(f"Invalid operation {self.operation.name} for an ACL")
        if self.permission not in (Permission.ALLOW, Permission.DENY):
            raise InvalidRequestError(f"Invalid permission {self.permission.name}: ALLOW or DENY")
        if not self.name:
            raise InvalidRequestError("The resource name must not be empty")
        if self.resource_type == ResourceType.CLUSTER and (self.name != CLUSTER_NAME or
                                                           self.pattern_type != PatternType.LITERAL):
            raise InvalidRequestError(f"The cluster resource is LITERAL {CLUSTER_NAME}")
        kind, sep, who = self.principal.partition(":")
        if not sep or not kind or not who:
            raise InvalidRequestError(f"Invalid principal {shown(self.principal)}: expected Type:name, as in User:alice")
        if not self.host:
            raise InvalidRequestError("The host must not be empty ('*' for every host)")

    def names_resource(self, resource_type: ResourceType, name: str) -> bool:
        """Whether this binding's pattern covers the resource ``resource_type``/``name``."""
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.LITERAL:
            return self.name == name or self.name == WILDCARD
        return self.pattern_type == PatternType.PREFIXED and name.startswith(self.name)

    def to_json(self) -> dict:
        return {"resource_type": self.resource_type.name, "name": self.name, "pattern_type": self.pattern_type.name,
                "principal": self.principal, "host": self.host, "operation": self.operation.name,
                "permission": self.permission.name}

    @classmethod
    def from_json(cls, d: dict) -> "AclBinding":
        return cls(ResourceType[d["resource_type"]], d["name"], PatternType[d["pattern_type"]], d["principal"],
                   d["host"], Operation[d["operation"]], Permission[d["permission"]])


@dataclass(frozen=True)
class AclFilter:
    """Which bindings DescribeAcls lists and DeleteAcls removes (None and ANY match everything)."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def check(self) -> None:
        for value in (self.resource_type, self.pattern_type, self.operation, self.permission):
            if value == 0:
                raise InvalidRequestError(f"Invalid {type(value).__name__} filter UNKNOWN")

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and b.resource_type != self.resource_type:
            return False
        if self.pattern_type == PatternType.MATCH:
            if self.name is not None and not b.names_resource(b.resource_type, self.name):
                return False
        elif self.pattern_type == PatternType.ANY:
            if self.name is not None and b.name != self.name:
                return False
        elif b.pattern_type != self.pattern_type or (self.name is not None and b.name != self.name):
            return False
        return ((self.principal is None or b.principal == self.principal)
                and (self.host is None or b.host == self.host)
                and (self.operation == Operation.ANY or b.operation == self.operation)
                and (self.permission == Permission.ANY or b.permission == self.permission))


class AclStore:
    """The bindings of one data directory (``__security/acls.json``)."""

    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        self.file = JsonFile(data_dir, files.ACLS_FILE, lambda: {"version": VERSION, "acls": []})
        self._doc: dict | None = None
        self._bindings: tuple[AclBinding, ...] = ()
        self._literal: dict[tuple[ResourceType, str], list[AclBinding]] = {}  # also '*' under its own name
        self._prefixed: dict[ResourceType, list[AclBinding]] = {}

    def bindings(self) -> tuple[AclBinding, ...]:
        doc = self.file.read()
        if doc is not self._doc:  # parsed and indexed again only when the file changed
            self._bindings = tuple(AclBinding.from_json(d) for d in doc.get("acls", []))
            self._literal, self._prefixed = {}, {}
            for b in self._bindings:
                if b.pattern_type == PatternType.LITERAL:
                    self._literal.setdefault((b.resource_type, b.name), []).append(b)
                else:
                    self._prefixed.setdefault(b.resource_type, []).append(b)
            self._doc = doc
        return self._bindings

    def naming(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        """The bindings whose pattern covers one resource (what a decision looks at), from the index of the
        last ``bindings()`` call (one ``stat`` of the file per decision, not two)."""
        return (self._literal.get((resource_type, name), []) + self._literal.get((resource_type, WILDCARD), [])
                + [b for b in self._prefixed.get(resource_type, ()) if name.startswith(b.name)])

    def matching(self, flt: AclFilter) -> list[AclBinding]:
        return [b for b in self.bindings() if flt.matches(b)]

    def add(self, new: Iterable[AclBinding]) -> None:
        """Store bindings (each is checked first; one already there is not stored twice)."""
        new = list(new)
        for b in new:
            b.check()

        def change(doc: dict) -> None:
            acls = doc.setdefault("acls", [])
            for b in new:
                if b.to_json() not in acls:
                    acls.append(b.to_json())

        self.file.update(change)

    def remove(self, filters: Iterable[AclFilter]) -> list[list[AclBinding]]:
        """Remove every binding each filter matches; per filter, what it removed."""
        filters = list(filters)

        def change(doc: dict) -> list[list[AclBinding]]:
            current = [AclBinding.from_json(d) for d in doc.get("acls", [])]
            removed = [[b for b in current if f.matches(b)] for f in filters]
            gone = {b for group in removed for b in group}
            doc["acls"] = [b.to_json() for b in current if b not in gone]
            return removed

        return self.file.update(change)


def parse_super_users(text: str | None) -> frozenset[str]:
    """``super.users``: principals separated by ';' (User:admin;User:bob)."""
    return frozenset(p.strip() for p in (text or "").split(";") if p.strip())


class Authorizer:
    """The decision for one (principal, host, operation, resource), over the ACLs of one data directory."""

    def __init__(self, store: AclStore, super_users: frozenset[str] = frozenset(),
                 allow_if_no_acl_found: bool = False) -> None:
        self.store = store
        self.super_users = super_users
        self.allow_if_no_acl_found = allow_if_no_acl_found

    def authorize(self, principal: str, host: str, operation: Operation, resource_type: ResourceType,
                  name: str) -> bool:
        if principal in self.super_users:
            return True
        if not self.store.bindings():
            return True
        allowing = {operation, Operation.ALL} | IMPLIED_BY.get(operation, set())
        naming = self.store.naming(resource_type, name)
        allowed = False
        for b in naming:
            if b.principal not in (principal, WILDCARD_PRINCIPAL) or b.host not in (host, WILDCARD):
                continue
            if b.permission == Permission.DENY and b.operation in (operation, Operation.ALL):
                return False
            if b.permission == Permission.ALLOW and b.operation in allowing:
                allowed = True
        return allowed or (self.allow_if_no_acl_found and not naming)

    def authorize_any(self, principal: str, host: str, operation: Operation, resource_type: ResourceType) -> bool:
        """Whether ``operation`` is allowed on at least one resource of the type (no DENY of it for every
        name): how Kafka lets WRITE on any topic stand for IDEMPOTENT_WRITE on the cluster."""
        if principal in self.super_users or not self.store.bindings():
            return True
        allowing = {operation, Operation.ALL}
        ours = [b for b in self.store.bindings() if b.resource_type == resource_type
                and b.principal in (principal, WILDCARD_PRINCIPAL) and b.host in (host, WILDCARD)]
        if any(b.permission == Permission.DENY and b.operation in allowing and b.pattern_type == PatternType.LITERAL
               and b.name == WILDCARD for b in ours):
            return False
        return any(b.permission == Permission.ALLOW and b.operation in allowing for b in ours)
