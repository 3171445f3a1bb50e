"""``consumer-groups``: kafka-consumer-groups against a running broker (groups live only there).

``--list`` the groups, ``--describe`` one (per partition: committed offset, log end offset, lag and the
member reading it), ``--reset-offsets`` of an inactive group (planned by default, stored with
``--execute``), ``--delete`` an empty one. The calls are in ``wire_groups.py``; this module chooses and
prints, in plain aligned columns that ``awk`` can read, as Kafka's tool prints them.
"""

from __future__ import annotations

import click

from .common import host_ports, kafka_errors
from .topics import one_action

DESCRIBE_HEADER = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                   "CLIENT-ID")
RESET_HEADER = ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")


def table(header: tuple[str, ...], rows: list[tuple]) -> list[str]:
    """Left-aligned columns, two spaces apart; ``-`` stands for a value that does not exist."""
    cells = [tuple("-" if v is None else str(v) for v in row) for row in [header, *rows]]
    widths = [max(len(c[i]) for c in cells) for i in range(len(header))]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]


def parse_datetime(text: str) -> int:
    """``--to-datetime`` in epoch milliseconds, read by the reset rule's parser (``offset_reset``: UTC
    unless the text names a zone, as kafka-consumer-groups reads it); a usage error when it is not one."""
    from ..errors import InvalidRequestError
    from ..offset_reset import parse_datetime as parse

    try:
        return parse(text)
    except InvalidRequestError as exc:
        raise click.BadParameter(str(exc), param_hint="'--to-datetime'") from None


def parse_topic(spec: str) -> tuple[str, list[int] | None]:
    """``--topic T`` (every partition) or ``T:0,2`` (those partitions)."""
    name, sep, parts = spec.partition(":")
    if not sep:
        return name, None
    try:
        chosen = [int(p) for p in parts.split(",") if p.strip()]
    except ValueError:
        chosen = []
    if not name or not chosen:  # "T:" or ":0" would reset nothing, or a topic named ""
        raise click.BadParameter(f"{spec!r}: give TOPIC or TOPIC:PARTITION,PARTITION", param_hint="'--topic'")
    return name, chosen


@click.command("consumer-groups")
@click.option("--bootstrap-server", "bootstrap_server", required=True, metavar="HOST:PORT", callback=host_ports,
              help="The running broker (compactlog serve) whose groups to work on.")
@click.option("--list", "list_", is_flag=True, help="List the groups.")
@click.option("--describe", is_flag=True, help="Offsets, log end offsets, lag and members of --group.")
@click.option("--reset-offsets", is_flag=True, help="Move --group's committed offsets of --topic (group must be inactive).")
@click.option("--delete", is_flag=True, help="Delete --group and its offsets (it must have no members).")
@click.option("--group", help="The consumer group.")
@click.option("--topic", "topics", multiple=True, help="With --reset-offsets: TOPIC or TOPIC:P,P; repeatable.")
@click.option("--to-earliest", is_flag=True, help="Reset to each partition's log start offset.")
@click.option("--to-latest", is_flag=True, help="Reset to each partition's log end offset.")
@click.option("--to-offset", type=click.IntRange(min=0), help="Reset to this offset (kept within each partition's range).")
@click.option("--to-datetime", help="Reset to the first record at or after this time (2026-01-01T00:00:00.000).")
@click.option("--dry-run", is_flag=True, help="Only show the new offsets (the default).")
@click.option("--execute", is_flag=True, help="Store the new offsets.")
@kafka_errors
def consumer_groups(bootstrap_server, list_, describe, reset_offsets, delete, group, topics, to_earliest, to_latest,
                    to_offset, to_datetime, dry_run, execute):
    """List, describe, reset and delete consumer groups of a running broker (kafka-consumer-groups).

    Example: compactlog consumer-groups --bootstrap-server 127.0.0.1:9092 --describe --group cache

    Example: compactlog consumer-groups --bootstrap-server 127.0.0.1:9092 --reset-offsets --group cache --topic prices --to-earliest --execute
    """
    action = one_action({"list": list_, "describe": describe, "reset-offsets": reset_offsets, "delete": delete})
    if action != "list" and not group:
        raise click.UsageError(f"--{action} needs --group")
    targets = {"--to-earliest": to_earliest, "--to-latest": to_latest, "--to-offset": to_offset is not None,
               "--to-datetime": to_datetime is not None}
    chosen = [flag for flag, on in targets.items() if on]
    if action != "reset-offsets":
        if chosen or topics or dry_run or execute:
            raise click.UsageError("--topic, --to-*, --dry-run and --execute only go with --reset-offsets")
    else:
        if len(chosen) != 1:
            raise click.UsageError("--reset-offsets needs exactly one of --to-earliest, --to-latest, --to-offset "
                                   "and --to-datetime")
        if not topics:
            raise click.UsageError("--reset-offsets needs --topic")
        if dry_run and execute:
            raise click.UsageError("--dry-run and --execute cannot be given together")
    from .wire_groups import GroupAdmin

    with GroupAdmin(bootstrap_server) as admin:
        if action == "list":
            for name in admin.list_groups():
                click.echo(name)
        elif action == "describe":
            _describe(admin, group)
        elif action == "delete":
            admin.delete_group(group)
            click.echo(f"Deleted consumer group '{group}'.")
        else:
            to, value = ("earliest", None) if to_earliest else ("latest", None) if to_latest else \
                ("offset", to_offset) if to_offset is not None else ("datetime", parse_datetime(to_datetime))
            _reset(admin, group, topics, to, value, execute)


def _describe(admin, group: str) -> None:
    view = admin.describe_group(group)
    assigned = {tp for m in view.members for tp in m.assignment}
    partitions = sorted(set(view.committed) | assigned)
    ends = admin.end_offsets(partitions)
    rows = []
    for tp in partitions:
        current = view.committed.get(tp)
        owner = view.owner(tp)
        end = ends.get(tp)
        rows.append((group, tp[0], tp[1], current, end, None if current is None or end is None else end - current,
                     owner and owner.member_id, owner and owner.host, owner and owner.client_id))
    if not view.members:
        click.echo(f"Consumer group '{group}' has no active members.")
        click.echo()
    for line in table(DESCRIBE_HEADER, rows):
        click.echo(line)


def _reset(admin, group: str, topics: tuple[str, ...], to: str, value: int | None, execute: bool) -> None:
    view = admin.describe_group_or_new(group)
    partitions = [tp for spec in topics for tp in admin.topic_partitions(*parse_topic(spec))]
    plan = admin.reset_plan(view, partitions, to, value)
    if execute:
        admin.commit(group, plan)
    for line in table(RESET_HEADER, [(group, t, p, o) for (t, p), o in sorted(plan.items())]):
        click.echo(line)
    if not execute:
        click.echo("(dry run: nothing was changed; add --execute to store these offsets)", err=True)
