"""What ``consumer-groups --reset-offsets`` reads and writes besides flags: an ISO-8601 duration
(``--by-duration``), a reset plan in CSV (``--from-file``) and the plan written as CSV (``--export``).

The CSV is kafka-consumer-groups' own: ``topic,partition,offset`` per line when one group is named with
``--group``, ``group,topic,partition,offset`` otherwise, no header; what ``--export`` writes,
``--from-file`` reads back. Every number in a file is parsed with the command line's bounds and a bad
line is named by its number, so a hand-edited plan fails with one line, not a traceback.
"""

from __future__ import annotations

import csv
import io
import re
from typing import TYPE_CHECKING, Mapping

import click

from .client_properties import read_bounded
from .common import INT_MAX, LONG_MAX, parse_number, shown

if TYPE_CHECKING:
    from .wire import TopicPartitionKey

# Java's Duration.parse: an optional sign, P, days, then T and hours, minutes, seconds (with up to nine
# decimals, after '.' or ','); each amount signed; letters in either case; at least one amount.
_DURATION = re.compile(
    r"(?P<sign>[-+]?)P(?:(?P<d>[-+]?\d+)D)?"
    r"(?P<t>T(?:(?P<h>[-+]?\d+)H)?(?:(?P<m>[-+]?\d+)M)?(?:(?P<s>[-+]?\d+)(?:[.,](?P<f>\d{0,9}))?S)?)?",
    re.IGNORECASE | re.ASCII)
_MS_PER = {"d": 86_400_000, "h": 3_600_000, "m": 60_000, "s": 1000}
MAX_PLAN_BYTES = 64 << 20  # a reset plan of a million partitions is ~40 MB


def parse_topic(spec: str) -> tuple[str, list[int] | None]:
    """``--topic T`` (every partition) or ``T:0,2`` (those partitions)."""
    name, sep, parts = spec.partition(":")
    if not sep:
        return name, None
    try:
        chosen = [parse_number(p.strip(), 0, INT_MAX) for p in parts.split(",") if p.strip()]
    except ValueError as exc:
        raise click.BadParameter(f"{shown(spec)}: {exc}", param_hint="'--topic'") from None
    if not name or not chosen:  # "T:" or ":0" would reset nothing, or a topic named ""
        raise click.BadParameter(f"{shown(spec)}: give TOPIC or TOPIC:PARTITION,PARTITION", param_hint="'--topic'")
    return name, chosen


def parse_duration(text: str) -> int:
    """``PnDTnHnMn.nS`` in milliseconds, as Java's Duration.parse reads it (``P1DT2H``, ``PT30M``,
    ``-PT6H``, ``PT0.5S``); ValueError for anything else or a duration beyond a long of seconds."""
    m = _DURATION.fullmatch(text)
    if m is None or not any(m[k] is not None for k in "dhms") or (m["t"] is not None and m["t"].upper() == "T"):
        raise ValueError(f"{shown(text)} is not a duration like PnDTnHnMnS (P1DT2H, PT30M, PT0.5S)")
    ms = 0
    for unit, per in _MS_PER.items():
        if m[unit] is not None:
            try:
                amount = parse_number(m[unit])
            except ValueError:
                raise ValueError(f"{shown(text)}: the duration is too long") from None
            ms += amount * per
    if m["f"]:
        fraction = int(m["f"][:3].ljust(3, "0"))
        ms += -fraction if m["s"].startswith("-") else fraction
    if abs(ms) // 1000 > LONG_MAX:
        raise ValueError(f"{shown(text)}: the duration is too long")
    return -ms if m["sign"] == "-" else ms


def read_plan(path: str, groups: list[str]) -> dict[str, dict[TopicPartitionKey, int]]:
    """A ``--from-file`` plan: group -> (topic, partition) -> offset. Lines of three fields belong to the
    one ``--group`` given; lines of four name their group. ValueError names the file's first bad line."""
    raw = read_bounded(path, MAX_PLAN_BYTES, "a reset plan")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path} is not UTF-8 text (byte {exc.start})") from None
    plan: dict[str, dict[TopicPartitionKey, int]] = {}
    rows = [(n, row) for n, row in enumerate(csv.reader(io.StringIO(text)), start=1) if row]
    for number, row in rows:
        if len(row) == 3 and len(groups) == 1:
            group, (topic, partition, offset) = groups[0], row
        elif len(row) == 4:
            group, topic, partition, offset = row
        else:
            wanted = "topic,partition,offset" if len(groups) == 1 else "group,topic,partition,offset"
            raise ValueError(f"{path} line {number}: expected {wanted}, got {shown(','.join(row))}")
        try:
            key = (topic, parse_number(partition.strip(), 0, INT_MAX))
            plan.setdefault(group, {})[key] = parse_number(offset.strip(), 0, LONG_MAX)
        except ValueError as exc:
            raise ValueError(f"{path} line {number}: {exc}") from None
        if not topic:
            raise ValueError(f"{path} line {number}: the topic is empty")
    if not rows:
        raise ValueError(f"{path} holds no offsets")
    return plan


def plan_csv(plans: Mapping[str, Mapping[TopicPartitionKey, int]], with_group: bool) -> str:
    """``--export``: the plan as the CSV ``--from-file`` reads (with the group column unless one
    ``--group`` was named)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for group, plan in plans.items():
        for (topic, partition), offset in sorted(plan.items()):
            writer.writerow([group, topic, partition, offset] if with_group else [topic, partition, offset])
    return out.getvalue()


def reset(admin, groups: list[str], topics: tuple[str, ...], all_topics: bool, target: tuple[str, int | None],
          from_file: str | None, execute: bool, export: bool, with_group: bool, asked_dry_run: bool = False) -> None:
    """``--reset-offsets`` for each group: plan, store with ``execute``, print a table or, ``export``, the CSV.
    A group with members is refused in kafka-consumer-groups' words and the others are still reset; the
    command then ends with the error."""
    from ..errors import CompactLogError
    from .group_reports import RESET_HEADER, echo_table

    to, value = target
    plan_file = None
    if from_file is not None:
        try:
            plan_file = read_plan(from_file, groups)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="'--from-file'") from None
    plans: dict[str, dict[TopicPartitionKey, int]] = {}
    refused: list[str] = []
    for group in groups:
        view = admin.describe_group_or_new(group)
        requested = None
        if plan_file is not None:
            requested = plan_file.get(group)
            if requested is None:
                refused.append(f"No reset plan for group {group} found")
                continue
            partitions = sorted(requested)
        elif all_topics:
            partitions = sorted(view.committed)
        else:
            partitions = list(dict.fromkeys(tp for spec in topics for tp in admin.topic_partitions(*parse_topic(spec))))
        try:
            plan = admin.reset_plan(view, partitions, to, value, requested)
        except CompactLogError as exc:
            if len(groups) == 1:
                raise
            refused.append(str(exc))
            continue
        if execute:
            admin.commit(group, plan)
        plans[group] = plan
    if export:
        click.echo(plan_csv(plans, with_group), nl=False)
    elif any(plans.values()):
        echo_table(RESET_HEADER, [(g, t, p, o) for g, plan in plans.items() for (t, p), o in sorted(plan.items())])
    if not execute and not asked_dry_run:  # a dry run by default: said, as Kafka's tool warns of it
        click.echo("(dry run: nothing was changed; add --execute to store these offsets, or --dry-run to say that a "
                   "plan is all you want)", err=True)
    if refused:
        raise CompactLogError("\n".join(refused))
