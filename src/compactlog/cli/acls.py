"""``acls``: kafka-acls.sh, over a data directory (``__security/acls.json``) or through a running broker
(``--bootstrap-server``: CreateAcls, DescribeAcls, DeleteAcls, served by ``server/acls.py``).

The flags are read as Kafka's tool reads them: the resource flags give resource patterns (or, for
``--list`` and ``--remove``, pattern filters); ``--allow-principal``/``--deny-principal`` with their hosts
('*' when none is given) and ``--operation`` (All when none is given) give the entries, ``--producer`` and
``--consumer`` the entries those roles need. The output is Kafka's: ``Adding ACLs for resource
`ResourcePattern(...)`:`` then ``Current ACLs for resource ...`` after --add and --remove, and --remove asks
before removing anything unless ``--force`` is given.

Over a data directory it works while ``compactlog serve`` runs on it: the broker reads the file again at
its next decision. The rules of the decision are in ``compactlog.security.acls``.
"""

from __future__ import annotations

import click

from ..errors import CompactLogError
from ..security.acls import (
    CLUSTER_NAME,
    WILDCARD,
    AclBinding,
    AclFilter,
    AclStore,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    parse_enum,
)
from .common import data_dir_option, kafka_errors, shown
from .topics import one_action

Entry = tuple[str, str, Operation, Permission]  # principal, host, operation, permission
O = Operation
SUPPORTED = {  # the operations an ACL of each resource type may name besides All (Kafka's AclEntry)
    ResourceType.TOPIC: (O.READ, O.WRITE, O.CREATE, O.DESCRIBE, O.DELETE, O.ALTER, O.DESCRIBE_CONFIGS, O.ALTER_CONFIGS),
    ResourceType.GROUP: (O.READ, O.DESCRIBE, O.DELETE),
    ResourceType.CLUSTER: (O.CREATE, O.CLUSTER_ACTION, O.DESCRIBE_CONFIGS, O.ALTER_CONFIGS, O.IDEMPOTENT_WRITE, O.ALTER,
                           O.DESCRIBE),
}
NO_RESOURCE = ("You must provide at least one resource: --topic <topic> or --cluster or --group <group>")


def _named(kind, text: str, flag: str):
    """``kind``'s member for a flag's text (any case, with or without underscores); a click refusal
    naming the flag, with a long value cut short, for anything else."""
    from ..errors import InvalidRequestError

    try:
        return parse_enum(kind, text.strip())
    except InvalidRequestError:
        names = ", ".join(m.name for m in kind if m.value > 1)
        raise click.BadParameter(f"Unknown {kind.__name__} {shown(text)} (one of {names})", param_hint=f"'{flag}'") from None


def _principal(text: str, flag: str) -> str:
    """A principal in Kafka's ``Type:name`` form (as SecurityUtils.parseKafkaPrincipal insists)."""
    kind, sep, name = text.strip().partition(":")
    if not (sep and kind and name):
        raise click.BadParameter(f"expected a principal in the form principalType:principalName (User:alice), "
                                 f"got {shown(text)}", param_hint=f"'{flag}'")
    return f"{kind}:{name}"


def _host(text: str, flag: str) -> str:
    host = text.strip()
    if not host:
        raise click.BadParameter("a host must not be empty ('*' for every host)", param_hint=f"'{flag}'")
    return host


def pattern_text(resource_type: ResourceType, name: str | None, pattern_type: PatternType) -> str:
    """Kafka's ResourcePattern (and ResourcePatternFilter) as its toString writes it."""
    return (f"ResourcePattern(resourceType={resource_type.name}, name={'<any>' if name is None else name}, "
            f"patternType={pattern_type.name})")


def entry_text(e: Entry) -> str:
    """Kafka's AccessControlEntry as its toString writes it."""
    principal, host, op, permission = e
    return f"(principal={principal}, host={host}, operation={op.name}, permissionType={permission.name})"


def _block(head: str, entries) -> str:
    """Kafka's tool's way of printing entries under a heading: a line each, tab first, a space at both ends."""
    return f"{head} \n " + "\n".join("\t" + entry_text(e) for e in entries) + " \n"


Resource = tuple[ResourceType, str, PatternType]


def _resources(topics, groups, cluster: bool, pattern_type: PatternType) -> list[Resource]:
    """The resource patterns (or filters) the flags name, in Kafka's order (the cluster only when literal)."""
    out = [(ResourceType.TOPIC, t.strip(), pattern_type) for t in topics]
    if cluster and pattern_type == PatternType.LITERAL:
        out.append((ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL))
    out += [(ResourceType.GROUP, g.strip(), pattern_type) for g in groups]
    return list(dict.fromkeys(out))


def _entries(allow, allow_hosts, deny, deny_hosts, ops) -> list[Entry]:
    """Every (principal, host, operation) of the allow flags, then of the deny flags (hosts: '*' by default)."""
    out = [(p, h, op, Permission.ALLOW) for p in allow for op in ops for h in (allow_hosts or (WILDCARD,))]
    out += [(p, h, op, Permission.DENY) for p in deny for op in ops for h in (deny_hosts or (WILDCARD,))]
    return list(dict.fromkeys(out))


def _resource_entries(resources: list[Resource], entries_for, producer: bool, consumer: bool) -> dict[Resource, list[Entry]]:
    """kafka-acls' map of resource to entries: the flags' own, or those of --producer and --consumer."""
    if not (producer or consumer):
        return {r: entries_for(None) for r in resources}
    out: dict[Resource, list[Entry]] = {}
    if producer:
        out.update({r: entries_for([Operation.WRITE, Operation.DESCRIBE, Operation.CREATE])
                    for r in resources if r[0] == ResourceType.TOPIC})
    if consumer:
        for r in resources:
            if r[0] in (ResourceType.TOPIC, ResourceType.GROUP):
                wanted = [Operation.READ, Operation.DESCRIBE] if r[0] == ResourceType.TOPIC else [Operation.READ]
                out[r] = list(dict.fromkeys(entries_for(wanted) + out.get(r, [])))
    return out


def _list(store, filters: list[Resource], principals: list[str]) -> None:
    """kafka-acls --list: the ACLs of each resource the filters match (all of them without a filter),
    grouped by resource pattern; with --principal, under each principal, only theirs."""
    flts = [AclFilter(rt, name, pt) for rt, name, pt in filters] or [AclFilter()]
    found: dict[Resource, list[Entry]] = {}
    for flt in flts:
        for b in store.matching(flt):
            entries = found.setdefault((b.resource_type, b.name, b.pattern_type), [])
            entry = (b.principal, b.host, b.operation, b.permission)
            if entry not in entries:
                entries.append(entry)

    def show(resource_entries: dict[Resource, list[Entry]]) -> None:
        for r, entries in resource_entries.items():
            click.echo(_block(f"Current ACLs for resource `{pattern_text(*r)}`:", entries))

    if not principals:
        return show(found)
    for p in principals:
        click.echo(f"ACLs for principal `{p}`")
        show({r: mine for r, entries in found.items() if (mine := [e for e in entries if e[0] == p])})


def _confirm(force: bool, question: str) -> bool:
    """Kafka's tool asks on standard output and reads a line: 'y' (any case) removes. With nothing to
    read (no terminal, standard input at its end) it fails, as Kafka's does, before removing anything."""
    if force:
        return True
    click.echo(question)
    line = click.get_text_stream("stdin").readline()
    if not line:
        raise CompactLogError("no answer to the question on standard input (give --force to remove without asking)")
    return line.strip().lower() == "y"


@click.command("acls")
@data_dir_option(wire=True)
@click.option("--add", is_flag=True, help="Add ACLs.")
@click.option("--remove", is_flag=True, help="Remove the ACLs the other flags name (asks first, unless --force).")
@click.option("--list", "list_", is_flag=True, help="List ACLs (all, or those of the resource flags).")
@click.option("--allow-principal", multiple=True,
              help="Principal allowed, in Type:name form (User:alice, User:* for everyone). Repeatable.")
@click.option("--deny-principal", multiple=True, help="Principal denied, in Type:name form. Repeatable.")
@click.option("--allow-host", multiple=True, help="Host (IP address) the allow applies from; * when not given.")
@click.option("--deny-host", multiple=True, help="Host (IP address) the deny applies from; * when not given.")
@click.option("--principal", "principals", multiple=True, help="With --list: only this principal's ACLs. Repeatable.")
@click.option("--operation", "operations", multiple=True,
              help="Read, Write, Create, Delete, Alter, Describe, DescribeConfigs, AlterConfigs, IdempotentWrite, "
                   "ClusterAction or All (the default). Repeatable.")
@click.option("--topic", "topics", multiple=True, help="Topic (* for every topic). Repeatable.")
@click.option("--group", "groups", multiple=True, help="Consumer group (* for every group). Repeatable.")
@click.option("--cluster", is_flag=True, help="The cluster resource.")
@click.option("--resource-pattern-type", "pattern", default="literal", show_default=True,
              help="literal or prefixed; with --list and --remove also any or match.")
@click.option("--producer", is_flag=True, help="What a producer needs (Write, Describe, Create on topics).")
@click.option("--consumer", is_flag=True,
              help="What a consumer needs (Read, Describe on topics, Read on groups).")
@click.option("--force", is_flag=True, help="With --remove: remove without asking.")
@kafka_errors
def acls(data_dir, server_properties, bootstrap_server, add, remove, list_, allow_principal, deny_principal,
         allow_host, deny_host, principals, operations, topics, groups, cluster, pattern, producer, consumer, force):
    """Add, list and remove ACLs (kafka-acls).

    Example: compactlog acls --bootstrap-server localhost:9092 --add --allow-principal User:alice --operation Read --topic prices
    """
    action = one_action({"list": list_, "add": add, "remove": remove})
    pattern_type = _named(PatternType, pattern, "--resource-pattern-type")
    ops = [_named(Operation, o, "--operation") for o in operations] or [Operation.ALL]
    for op in ops:
        if op in (Operation.UNKNOWN, Operation.ANY):
            raise click.BadParameter(f"Unknown Operation {shown(op.name)}", param_hint="'--operation'")
    allow = list(dict.fromkeys(_principal(p, "--allow-principal") for p in allow_principal))
    deny = list(dict.fromkeys(_principal(p, "--deny-principal") for p in deny_principal))
    allow_hosts = list(dict.fromkeys(_host(h, "--allow-host") for h in allow_host))
    deny_hosts = list(dict.fromkeys(_host(h, "--deny-host") for h in deny_host))
    listed = [_principal(p, "--principal") for p in principals]
    _check_flags(action, producer, consumer, allow, deny, allow_host, deny_host, operations, principals, topics,
                 groups, cluster)
    resources = _resources(topics, groups, cluster, pattern_type)

    def entries_for(wanted):
        return _entries(allow, allow_hosts, deny, deny_hosts, wanted or ops)

    if bootstrap_server is not None:
        from .wire_acls import WireAcls

        store = WireAcls(bootstrap_server)
    else:
        store = AclStore(data_dir)
    if action == "list":
        return _list(store, resources, listed)
    if not resources:
        raise click.UsageError(NO_RESOURCE)
    per_resource = _resource_entries(resources, entries_for, producer, consumer)
    _check_operations(per_resource)
    if action == "add":
        if pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise click.UsageError(f"A '--resource-pattern-type' value of '{pattern_type.name}' is not valid when "
                                   "adding acls.")
        if any(not entries for entries in per_resource.values()):
            raise click.UsageError("You must specify one of: --allow-principal, --deny-principal when trying to add "
                                   "ACLs.")
        for r, entries in per_resource.items():
            click.echo(_block(f"Adding ACLs for resource `{pattern_text(*r)}`:", entries))
            store.add(AclBinding(*r, *e) for e in entries)
    else:
        for r, entries in per_resource.items():
            where = pattern_text(*r)
            if not entries:
                if _confirm(force, f"Are you sure you want to delete all ACLs for resource filter `{where}`? (y/n)"):
                    store.remove([AclFilter(*r)])
            elif _confirm(force, _block("Are you sure you want to remove ACLs:", entries)
                          + f" from resource filter `{where}`? (y/n)"):
                store.remove([AclFilter(*r, *e) for e in entries])
    _list(store, resources, [])


def _pascal(op: Operation) -> str:
    return "".join(word.capitalize() for word in op.name.split("_"))


def _check_operations(per_resource: dict[Resource, list[Entry]]) -> None:
    """kafka-acls refuses an operation the resource type has no use for (Write on a group), before asking
    the broker, which would store it."""
    for (rt, _name, _pt), entries in per_resource.items():
        valid = (*SUPPORTED[rt], Operation.ALL)
        if any(e[2] not in valid for e in entries):
            raise click.UsageError(f"ResourceType {rt.name} only supports operations {', '.join(map(_pascal, valid))}")


def _check_flags(action, producer, consumer, allow, deny, allow_host, deny_host, operations, principals, topics,
                 groups, cluster) -> None:
    """kafka-acls' refusals of flags that do not go together."""
    if action == "list":
        given = [name for name, on in (("--producer", producer), ("--consumer", consumer),
                                       ("--allow-host", allow_host), ("--allow-principal", allow),
                                       ("--deny-host", deny_host), ("--deny-principal", deny)) if on]
        if given:
            raise click.UsageError(f"--list cannot be used with {given[0]}")
    for role, on in (("--producer", producer), ("--consumer", consumer)):
        clash = [name for name, given in (("--operation", operations), ("--deny-principal", deny),
                                          ("--deny-host", deny_host)) if given]
        if on and clash:
            raise click.UsageError(f"{role} cannot be used with {clash[0]}")
    if principals and action != "list":
        raise click.UsageError("The --principal option is only available if --list is set")
    if producer and not topics:
        raise click.UsageError("With --producer you must specify a --topic")
    if consumer and (not topics or not groups or (not producer and cluster)):
        raise click.UsageError("With --consumer you must specify a --topic and a --group and no --cluster option "
                               "should be specified.")
