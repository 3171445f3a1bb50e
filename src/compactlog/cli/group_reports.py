"""What ``consumer-groups --list`` and ``--describe`` print: kafka-consumer-groups' tables (the same
columns, ``-`` for a value that does not exist) in plain aligned columns that ``awk`` can read, and its
notes about a group (no active members, rebalancing) on standard error, so standard output holds only
the tables."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ..errors import shown

if TYPE_CHECKING:
    from .wire_groups import GroupView

OFFSETS_HEADER = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                  "CLIENT-ID")
MEMBERS_HEADER = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
STATE_HEADER = ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")
RESET_HEADER = ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")
REBALANCING = frozenset({"PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"})


def table(header: tuple[str, ...], rows: list[tuple]) -> list[str]:
    """Left-aligned columns, two spaces apart; ``-`` stands for a value that does not exist."""
    cells = [tuple("-" if v is None else str(v) for v in row) for row in [header, *rows]]
    widths = [max(len(c[i]) for c in cells) for i in range(len(header))]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]


def echo_table(header: tuple[str, ...], rows: list[tuple]) -> None:
    for line in table(header, rows):
        click.echo(line)


def note_state(view: GroupView) -> None:
    """kafka-consumer-groups' note on a group without members or in a rebalance (standard error)."""
    if view.state in ("Empty", "Dead") or not view.members:
        click.echo(f"Consumer group {shown(view.group_id)} has no active members.", err=True)
    elif view.state in REBALANCING:
        click.echo(f"Warning: Consumer group {shown(view.group_id)} is rebalancing.", err=True)


def offset_rows(view: GroupView, ends: dict) -> list[tuple]:
    """One row per partition the group reads or has committed: committed offset, log end, lag, owner."""
    assigned = {tp for m in view.members for tp in m.assignment}
    rows = []
    for tp in sorted(set(view.committed) | assigned):
        current, end, owner = view.committed.get(tp), ends.get(tp), view.owner(tp)
        rows.append((view.group_id, tp[0], tp[1], current, end,
                     None if current is None or end is None else end - current,
                     owner and owner.member_id, owner and owner.host, owner and owner.client_id))
    return rows


def member_lines(views: list[GroupView], verbose: bool) -> list[str]:
    """``--describe --members``: one row per member with its partition count (and, ``verbose``, its
    partitions as topic(0,1)); GROUP-INSTANCE-ID appears when a member is static."""
    static = any(m.group_instance_id for v in views for m in v.members)
    header = MEMBERS_HEADER[:2] + (("GROUP-INSTANCE-ID",) if static else ()) + MEMBERS_HEADER[2:]
    header += ("ASSIGNMENT",) if verbose else ()
    rows = []
    for view in views:
        for m in view.members:
            row = (view.group_id, m.member_id) + ((m.group_instance_id or None,) if static else ())
            row += (m.host, m.client_id, len(m.assignment))
            rows.append(row + ((assignment_text(m.assignment),) if verbose else ()))
    return table(header, rows)


def assignment_text(assignment: tuple) -> str | None:
    """A member's partitions as ``topic(0,1), other(2)``; None (printed ``-``) for none."""
    by_topic: dict[str, list[int]] = {}
    for topic, p in assignment:
        by_topic.setdefault(topic, []).append(p)
    if not by_topic:
        return None
    return ", ".join(f"{t}({','.join(map(str, sorted(ps)))})" for t, ps in sorted(by_topic.items()))


def state_rows(views: list[GroupView]) -> list[tuple]:
    return [(v.group_id, v.coordinator or None, v.assignor or None, v.state, len(v.members)) for v in views]
