"""``consumer-groups``: kafka-consumer-groups against a running broker (groups live only there).

``--list`` the groups (``--state`` adds their states, or keeps those in the states given);
``--describe`` groups: per partition the committed offset, log end offset, lag and the member reading
it (``--offsets``, the default), or the members (``--members``, ``--verbose`` adds their partitions),
or the group's coordinator, strategy, state and size (``--state``); ``--reset-offsets`` of inactive
groups, to the earliest, latest or current offset, an offset, a shift, a date-time, a duration ago or
a plan from a CSV file, planned by default, stored with ``--execute``, written as CSV with ``--export``;
``--delete`` groups without members; ``--delete-offsets`` of some topics. The flag rules and the words
of the refusals are kafka-consumer-groups'. The calls are in ``wire_groups.py``; this module chooses,
and ``group_reports.py`` prints.
"""

from __future__ import annotations

import click

from .client_properties import command_config_option
from .common import INT_MAX, LONG_MAX, LONG_MIN, Number, host_ports, kafka_errors, parse_number, shown
from .group_reset import parse_topic
from .group_reports import OFFSETS_HEADER, STATE_HEADER, echo_table, member_lines, note_state, offset_rows, state_rows
from .topics import one_action

__all__ = ["consumer_groups", "parse_datetime", "parse_topic"]

SCENARIOS = ("--to-earliest", "--to-latest", "--to-current", "--to-offset", "--shift-by", "--to-datetime",
             "--by-duration", "--from-file")
# Kafka's ConsumerGroupState names a --state filter may use (any case), in Kafka's order.
STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty", "Assigning", "Reconciling")
ANY_STATE = "\0any"  # --state given without a value


def parse_datetime(text: str) -> int:
    """``--to-datetime`` in epoch milliseconds, read by the reset rule's parser (``offset_reset``: UTC
    unless the text names a zone, as kafka-consumer-groups reads it); a usage error when it is not one."""
    from ..errors import InvalidRequestError
    from ..offset_reset import DATETIME_EXAMPLE, parse_datetime as parse

    if len(text) > 40:  # longer than any date-time with a zone: said without repeating it whole
        raise click.BadParameter(f"{shown(text)} is not a date and time like {DATETIME_EXAMPLE}",
                                 param_hint="'--to-datetime'")
    try:
        return parse(text)
    except InvalidRequestError as exc:
        raise click.BadParameter(str(exc), param_hint="'--to-datetime'") from None


def parse_states(text: str) -> set[str]:
    """``--list --state stable,empty``: Kafka's state names, in any case."""
    by_lower = {s.lower(): s for s in STATES}
    chosen = {by_lower.get(s.strip().lower()) for s in text.split(",")}
    if None in chosen:
        raise click.BadParameter(f"Invalid state list {shown(text)}. Valid states are: {', '.join(STATES)}",
                                 param_hint="'--state'")
    return chosen  # type: ignore[return-value]


@click.command("consumer-groups")
@click.option("--bootstrap-server", "bootstrap_server", required=True, metavar="HOST:PORT", callback=host_ports,
              help="The running broker (compactlog serve) whose groups to work on.")
@command_config_option
@click.option("--list", "list_", is_flag=True, help="List the groups.")
@click.option("--describe", is_flag=True, help="Offsets, log end offsets, lag and members of groups.")
@click.option("--reset-offsets", is_flag=True, help="Move the committed offsets of inactive groups.")
@click.option("--delete", is_flag=True, help="Delete groups and their offsets (they must have no members).")
@click.option("--delete-offsets", is_flag=True, help="Delete --group's committed offsets of --topic.")
@click.option("--group", "groups", multiple=True, help="A consumer group; repeatable.")
@click.option("--all-groups", is_flag=True, help="Every group (with --describe, --delete, --reset-offsets).")
@click.option("--topic", "topics", multiple=True,
              help="With --reset-offsets or --delete-offsets: TOPIC or TOPIC:P,P; repeatable.")
@click.option("--all-topics", is_flag=True, help="With --reset-offsets: every partition the group has committed.")
@click.option("--to-earliest", is_flag=True, help="Reset to each partition's log start offset.")
@click.option("--to-latest", is_flag=True, help="Reset to each partition's log end offset.")
@click.option("--to-current", is_flag=True, help="Reset to the committed offset (the log end where none is).")
@click.option("--to-offset", type=Number(LONG_MIN, LONG_MAX), help="Reset to this offset (kept within each log).")
@click.option("--shift-by", type=Number(LONG_MIN, LONG_MAX),
              help="Move each committed offset by N (negative: back), kept within each log.")
@click.option("--to-datetime", help="Reset to the first record at or after this time (2026-01-01T00:00:00.000).")
@click.option("--by-duration", metavar="PnDTnHnMnS",
              help="Reset to the first record at or after this long ago (ISO-8601: P1DT2H, PT30M).")
@click.option("--from-file", type=click.Path(dir_okay=False),
              help="Reset to the offsets in this CSV (topic,partition,offset; as --export writes it).")
@click.option("--dry-run", is_flag=True, help="Only show the new offsets (the default).")
@click.option("--execute", is_flag=True, help="Store the new offsets.")
@click.option("--export", is_flag=True, help="Print the new offsets as CSV (for --from-file) instead of a table.")
@click.option("--offsets", is_flag=True, help="With --describe: the partitions and their lag (the default).")
@click.option("--members", is_flag=True, help="With --describe: the members and their partition counts.")
@click.option("--state", "state", is_flag=False, flag_value=ANY_STATE, default=None, metavar="[STATES]",
              help="With --describe: the group's coordinator, strategy, state and size. With --list: each "
                   "group's state, or only groups in these states (stable,empty).")
@click.option("--timeout", "timeout_ms", type=Number(1, INT_MAX), default=None, metavar="MS",
              help="How long each call to the broker may take, in milliseconds (default 30000).")
@click.option("--verbose", is_flag=True,
              help="With --describe: more detail where there is some (--members: each member's partitions).")
@kafka_errors
def consumer_groups(bootstrap_server, list_, describe, reset_offsets, delete, delete_offsets, groups, all_groups,
                    topics, all_topics, to_earliest, to_latest, to_current, to_offset, shift_by, to_datetime,
                    by_duration, from_file, dry_run, execute, export, offsets, members, state, timeout_ms, verbose):
    """List, describe, reset and delete consumer groups of a running broker (kafka-consumer-groups).

    Example: compactlog consumer-groups --bootstrap-server 127.0.0.1:9092 --describe --group cache

    Example: compactlog consumer-groups --bootstrap-server 127.0.0.1:9092 --reset-offsets --group cache --topic prices --shift-by -10 --execute
    """
    action = one_action({"list": list_, "describe": describe, "delete": delete, "reset-offsets": reset_offsets,
                         "delete-offsets": delete_offsets})
    scenarios = {"--to-earliest": to_earliest, "--to-latest": to_latest, "--to-current": to_current,
                 "--to-offset": to_offset is not None, "--shift-by": shift_by is not None,
                 "--to-datetime": to_datetime is not None, "--by-duration": by_duration is not None,
                 "--from-file": from_file is not None}
    chosen = [flag for flag in SCENARIOS if scenarios[flag]]
    _check_flags(action, groups, all_groups, topics, all_topics, chosen, dry_run, execute, export, offsets, members,
                 state, verbose)
    target = _target(chosen, to_offset, shift_by, to_datetime, by_duration) if action == "reset-offsets" else None
    wanted = parse_states(state) if action == "list" and state not in (None, ANY_STATE) else None
    from .wire_groups import GroupAdmin

    with GroupAdmin(bootstrap_server, *([] if timeout_ms is None else [timeout_ms / 1000])) as admin:
        names = list(dict.fromkeys(groups)) if not all_groups else admin.list_groups()
        if action == "list":
            _list(admin, state is not None, wanted)
        elif action == "describe":
            _describe(admin, names, "members" if members else "state" if state else "offsets", verbose)
        elif action == "delete":
            _delete(admin, names)
        elif action == "delete-offsets":
            _delete_offsets(admin, bootstrap_server, names[0], topics)
        else:
            from .group_reset import reset

            reset(admin, names, topics, all_topics, target, from_file, execute, export, with_group=len(groups) != 1,
                  asked_dry_run=dry_run)


def _check_flags(action, groups, all_groups, topics, all_topics, chosen, dry_run, execute, export, offsets, members,
                 state, verbose) -> None:
    """kafka-consumer-groups' rules of which flags go together."""
    if groups and all_groups:
        raise click.UsageError("--group and --all-groups cannot be given together")
    if action in ("describe", "delete", "reset-offsets") and not (groups or all_groups):
        raise click.UsageError(f"Option --{action} takes one of these options: --group, --all-groups")
    if action == "list" and (groups or all_groups):
        raise click.UsageError("--group and --all-groups do not go with --list")
    if action == "delete-offsets":
        if len(groups) != 1 or all_groups or not topics:
            raise click.UsageError("Option --delete-offsets takes the following options: --group (one), --topic")
    if action == "delete" and topics:
        raise click.UsageError("The consumer does not support topic-specific offset deletion from a consumer group.")
    if action == "describe":
        if offsets + members + (state is not None) > 1:
            raise click.UsageError("Option --describe takes at most one of these options: --members, --offsets, --state")
        if state not in (None, ANY_STATE):
            raise click.UsageError("Option --describe does not take a value for --state")
    else:
        for flag, on in (("--offsets", offsets), ("--members", members), ("--verbose", verbose)):
            if on:
                raise click.UsageError(f"{flag} only goes with --describe")
        if state is not None and action != "list":
            raise click.UsageError("--state only goes with --describe or --list")
    if action in ("list", "describe") and topics:
        raise click.UsageError(f"--topic does not go with --{action}")
    if action == "reset-offsets":
        if len(chosen) != 1:
            raise click.UsageError(f"--reset-offsets takes exactly one of {', '.join(SCENARIOS)}"
                                   + (f" (got {' and '.join(chosen)})" if chosen else ""))
        if dry_run and execute:
            raise click.UsageError("Option --reset-offsets only accepts one of --execute and --dry-run")
        if topics and all_topics:
            raise click.UsageError("--topic and --all-topics cannot be given together")
        if not (topics or all_topics) and chosen != ["--from-file"]:
            raise click.UsageError("One of the reset scopes should be defined: --all-topics, --topic.")
    elif chosen or dry_run or execute or export or all_topics:
        given = [*chosen] + [f for f, on in (("--dry-run", dry_run), ("--execute", execute), ("--export", export),
                                              ("--all-topics", all_topics)) if on]
        raise click.UsageError(f"{given[0]} only goes with --reset-offsets")


def _target(chosen: list[str], to_offset, shift_by, to_datetime, by_duration) -> tuple[str, int | None]:
    """The reset scenario as (target, value), its text checked before any broker is asked."""
    flag = chosen[0]
    if flag == "--to-datetime":
        return "datetime", parse_datetime(to_datetime)
    if flag == "--by-duration":
        import time

        from .group_reset import parse_duration

        try:
            ago = parse_duration(by_duration)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="'--by-duration'") from None
        # a negative duration looks ahead: no record is that recent, so the log end; kept within a long
        return "datetime", min(LONG_MAX, max(0, int(time.time() * 1000) - ago))
    return {"--to-earliest": ("earliest", None), "--to-latest": ("latest", None), "--to-current": ("current", None),
            "--to-offset": ("offset", to_offset), "--shift-by": ("shift", shift_by),
            "--from-file": ("file", None)}[flag]


def _list(admin, with_state: bool, wanted: set[str] | None) -> None:
    """The group names; ``with_state``, a table with their states, only those in ``wanted`` if given."""
    if not with_state:
        for name in admin.list_groups():
            click.echo(name)
        return
    listed = [(g, s) for g, s in admin.list_group_states().items() if wanted is None or s in wanted]
    echo_table(("GROUP", "STATE"), listed)


def _describe(admin, names: list[str], what: str, verbose: bool) -> None:
    """Each group's report; a group that does not exist is named (Kafka's words) and the others are
    still described; the command then ends with an error."""
    from ..errors import CompactLogError, GroupIdNotFoundError

    views, missing = [], []
    for name in names:
        try:
            views.append(admin.describe_group(name))
        except GroupIdNotFoundError as exc:
            missing.append(str(exc))
    if what == "state":
        if views:
            echo_table(STATE_HEADER, state_rows(views))
    elif what == "members":
        for view in views:
            note_state(view)
        if any(v.members for v in views):
            for line in member_lines(views, verbose):
                click.echo(line)
    else:
        rows = []
        for view in views:
            note_state(view)
            rows += offset_rows(view, admin.end_offsets(set(view.committed) | {tp for m in view.members
                                                                                for tp in m.assignment}))
        if rows:
            echo_table(OFFSETS_HEADER, rows)
    if missing:
        raise (GroupIdNotFoundError if len(missing) == 1 else CompactLogError)("\n".join(missing))


def _delete(admin, names: list[str]) -> None:
    from ..errors import CompactLogError

    done, failed = [], []
    for name in names:
        try:
            admin.delete_group(name)
            done.append(name)
        except CompactLogError as exc:
            failed.append((name, exc))
    if not failed:
        click.echo(f"Deletion of requested consumer groups ('{', '.join(done)}') was successful.")
        return
    if done:
        click.echo(f"These consumer groups were deleted successfully: '{', '.join(done)}'")
    if len(failed) == 1 and not done:
        raise failed[0][1]
    raise CompactLogError("Deletion of some consumer groups failed:\n" +
                          "\n".join(f"* Group {shown(g)} could not be deleted due to: {e}" for g, e in failed))


def _delete_offsets(admin, bootstrap: str, group: str, topics: tuple[str, ...]) -> None:
    """OffsetDelete for the partitions named (or every partition of a topic named alone), then one row
    per partition with its outcome, as kafka-consumer-groups prints it."""
    from ..errors import CompactLogError, error_for
    from .offset_delete import delete_offsets

    partitions = [tp for spec in topics for tp in admin.topic_partitions(*parse_topic(spec))]
    top, codes = delete_offsets(bootstrap, group, partitions)
    if top:
        error = error_for(top)
        messages = {69: f"Consumer group {shown(group)} does not exist.", 24: f"{shown(group)} is not valid.",
                    68: f"Deleting offsets of a consumer group {shown(group)} is forbidden if the group is not empty.",
                    30: f"Access to {shown(group)} is not authorized."}
        if top not in (3, 29, 86):  # partition-level refusals: the rows below say which
            raise type(error)(messages.get(top, f"{error}"))
    refused = top or any(codes.values())  # a partition refused (members read its topic) fails the request too,
    if refused:                           # as Kafka's admin client fails it with the partition's error
        click.echo("Error: some partitions were refused; see each one below:", err=True)
    else:
        click.echo(f"Request succeed for deleting offsets with topic {', '.join(topics)} group {group}")
    rows = [(t, p, "Successful" if not codes.get((t, p)) else f"Error: {error_for(codes[(t, p)])}")
            for t, p in sorted(partitions)]
    echo_table(("TOPIC", "PARTITION", "STATUS"), rows)
    if refused:
        raise CompactLogError(f"Offsets of group {shown(group)} were not deleted for every partition")
