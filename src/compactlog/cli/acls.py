"""``acls``: kafka-acls.sh over a data directory (``__security/acls.json``).

Works while ``compactlog serve`` runs on the directory: the broker reads the file again at its next
decision. The rules of the decision are in ``compactlog.security.acls``.
"""

from __future__ import annotations

import click

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


def _named(kind, text: str, flag: str):
    """``kind``'s member for a flag's text (any case, with or without underscores); a click refusal
    naming the flag, with a long value cut short, for anything else."""
    from ..errors import InvalidRequestError

    try:
        return parse_enum(kind, text)
    except InvalidRequestError:
        names = ", ".join(m.name for m in kind if m.value > 1)
        raise click.BadParameter(f"Unknown {kind.__name__} {shown(text)} (one of {names})", param_hint=f"'{flag}'") from None


def _resources(topics, groups, cluster: bool) -> list[tuple[ResourceType, str]]:
    out = [(ResourceType.TOPIC, t) for t in topics] + [(ResourceType.GROUP, g) for g in groups]
    if cluster:
        out.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return out


def _show(b: AclBinding) -> str:
    return (f"{b.resource_type.name}:{b.pattern_type.name}:{b.name}  {b.permission.name} {b.principal} "
            f"from host {b.host} to {b.operation.name}")


def _entries(principals, hosts, permission: Permission) -> list[tuple[str, str, Permission]]:
    """(principal, host, permission) for every principal and host given (every host: '*')."""
    return [(p, h, permission) for p in principals for h in (hosts or (WILDCARD,))]


def _remove_entries(store: AclStore, resources, pattern_type, allow_principal, allow_host, deny_principal,
                    deny_host, ops) -> None:
    """kafka-acls --remove as Kafka's tool reads it: the ACLs named exactly by --allow-principal and
    --deny-principal (their hosts, '*' when none is given) and --operation (All when none is given, as
    kafka-acls defaults it) on each resource flag."""
    if not resources:
        raise click.UsageError("--remove needs a resource (--topic, --group, --cluster) or --principal")
    entries = _entries(allow_principal, allow_host, Permission.ALLOW) + _entries(deny_principal, deny_host,
                                                                                 Permission.DENY)
    filters = [AclFilter(rt, name, pattern_type, principal, host, op, permission)
               for rt, name in resources for principal, host, permission in entries
               for op in (ops or [Operation.ALL])]
    for group in store.remove(filters):
        for b in group:
            click.echo(f"Removed {_show(b)}")


@click.command("acls")
@data_dir_option
@click.option("--add", is_flag=True, help="Add ACLs.")
@click.option("--remove", is_flag=True, help="Remove the ACLs the other flags match.")
@click.option("--list", "list_", is_flag=True, help="List ACLs (all, or those the other flags match).")
@click.option("--allow-principal", multiple=True,
              help="Principal allowed (User:alice, User:* for everyone). Repeatable.")
@click.option("--deny-principal", multiple=True, help="Principal denied. Repeatable.")
@click.option("--allow-host", multiple=True, help="Host (IP address) the allow applies from; * when not given.")
@click.option("--deny-host", multiple=True, help="Host (IP address) the deny applies from; * when not given.")
@click.option("--principal", "principals", multiple=True, help="With --list or --remove: only this principal's ACLs.")
@click.option("--operation", "operations", multiple=True,
              help="Read, Write, Create, Delete, Alter, Describe, DescribeConfigs, AlterConfigs, IdempotentWrite "
                   "or All (the default with --add). Repeatable.")
@click.option("--topic", "topics", multiple=True, help="Topic (* for every topic). Repeatable.")
@click.option("--group", "groups", multiple=True, help="Consumer group (* for every group). Repeatable.")
@click.option("--cluster", is_flag=True, help="The cluster resource.")
@click.option("--resource-pattern-type", "pattern", default="literal", show_default=True,
              help="literal or prefixed; with --list and --remove also any or match.")
@click.option("--producer", is_flag=True, help="With --add: what a producer needs (Write, Describe, Create on topics).")
@click.option("--consumer", is_flag=True,
              help="With --add: what a consumer needs (Read, Describe on topics, Read on groups).")
@click.option("--force", is_flag=True, help="Accepted as kafka-acls takes it with --remove (nothing here asks to confirm).")
@kafka_errors
def acls(data_dir, server_properties, add, remove, list_, allow_principal, deny_principal, allow_host, deny_host,
         principals, operations, topics, groups, cluster, pattern, producer, consumer, force):
    """Add, list and remove ACLs (kafka-acls).

    Example: compactlog acls --data-dir data --add --allow-principal User:alice --operation Read --topic prices
    """
    action = one_action({"add": add, "list": list_, "remove": remove})
    store = AclStore(data_dir)
    pattern_type = _named(PatternType, pattern, "--resource-pattern-type")
    resources = _resources(topics, groups, cluster)
    ops = [_named(Operation, o, "--operation") for o in operations]
    if action == "add":
        if not (allow_principal or deny_principal):
            raise click.UsageError("--add needs --allow-principal or --deny-principal")
        if pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise click.UsageError("--add takes --resource-pattern-type literal or prefixed")
        per_resource = []
        if producer or consumer:
            wanted = ([Operation.WRITE, Operation.DESCRIBE, Operation.CREATE] if producer else []) + \
                     ([Operation.READ, Operation.DESCRIBE] if consumer else [])
            per_resource += [((ResourceType.TOPIC, t), op) for t in topics for op in dict.fromkeys(wanted)]
            if consumer:
                per_resource += [((ResourceType.GROUP, g), Operation.READ) for g in groups]
        else:
            if not resources:
                raise click.UsageError("--add needs --topic, --group or --cluster")
            per_resource = [(r, op) for r in resources for op in (ops or [Operation.ALL])]
        entries = _entries(allow_principal, allow_host, Permission.ALLOW) + _entries(deny_principal, deny_host,
                                                                                     Permission.DENY)
        new = [AclBinding(rt, name, pattern_type if rt != ResourceType.CLUSTER else PatternType.LITERAL,
                          principal, host, op, permission)
               for (rt, name), op in per_resource for principal, host, permission in entries]
        store.add(new)
        for b in new:
            click.echo(f"Added {_show(b)}")
        return
    if action == "remove" and (allow_principal or deny_principal):
        return _remove_entries(store, resources, pattern_type, allow_principal, allow_host, deny_principal,
                               deny_host, ops)
    if allow_principal or deny_principal or allow_host or deny_host:
        raise click.UsageError(f"--{action} selects with --principal, --operation and the resource flags")
    if action == "remove" and not (resources or principals):
        raise click.UsageError("--remove needs a resource (--topic, --group, --cluster) or --principal")
    filters = [AclFilter(rt, name, pattern_type if resources else PatternType.ANY, p, None, op, Permission.ANY)
               for rt, name in (resources or [(ResourceType.ANY, None)])
               for p in (principals or [None]) for op in (ops or [Operation.ANY])]
    if action == "list":
        found = {b: None for f in filters for b in store.matching(f)}
        if not found:
            click.echo("No ACLs match.")
        for b in found:
            click.echo(_show(b))
        return
    for group in store.remove(filters):
        for b in group:
            click.echo(f"Removed {_show(b)}")
