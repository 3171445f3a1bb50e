"""Consumer groups: the list, one group's members, assignments, committed offsets and lag, and resetting
its offsets as ``kafka-consumer-groups --reset-offsets`` does.

The group coordinator's state belongs to the broker's event loop, so every view of a group is built in
the handler coroutine, from memory (groups, members, committed offsets and high watermarks are all
attributes), through ``server.state_views``: plain copies, the console never touching the coordinator's
objects. Only resolving new offsets (log start, log end, the offset for a timestamp) reads the disk,
on the console's threads. A reset commits through the coordinator's own OffsetCommit path
(``state_views.reset_group_offsets``: generation -1 and no member, which is what an admin client's
AlterConsumerGroupOffsets sends), so the offsets land in ``__consumer_offsets`` exactly as a client's do.

The partition table means what ``kafka-consumer-groups --describe`` prints (``cli/groups.py``): the
committed offset, the log end offset (high watermark), lag = end - committed, and the member whose
assignment holds the partition; as Kafka does, assignments are shown only while the group is Stable.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from aiohttp import web

from ...errors import CompactLogError, InvalidRequestError, error_for
from ...offset_reset import RESET_TARGETS, new_offset, parse_datetime  # the reset rule, shared with the CLI
from ...server import state_views
from ...server.state_views import CONSUMER_PROTOCOL_TYPE, DEAD, EMPTY, STABLE, GroupStateView
from ...topics import is_internal
from ..fields import INT_MAX, FieldError, read_integer, shown, whole_number
from ..handlers import console, group_url, page, path_name, require, see_other, topic_url, viewer

routes = web.RouteTableDef()
TopicPartition = tuple[str, int]
INACTIVE = (EMPTY, DEAD)  # states whose offsets may be reset: no member would overwrite them
FORM_FIELDS = ("topic", "to", "offset", "datetime")  # the reset form's fields
NOT_CONSUMER = "not a consumer assignment"
MAX_DATETIME_CHARS = 64  # longer than any date-time the reset reads (its message quotes what was typed)


@dataclass(frozen=True)
class GroupSummary:
    group_id: str
    state: str
    protocol_type: str
    members: int
    partitions: int  # partitions with a committed offset
    lag: int  # sum over those partitions of (high watermark - committed offset), never below 0
    protocol_name: str = ""  # the chosen assignor, shown while Stable (as DescribeGroups shows it)


def log_end(broker, tp: TopicPartition) -> int | None:
    """The partition's high watermark; None when its topic is gone (a group may keep such commits)."""
    part = broker.cl.find_partition(*tp)
    return None if part is None else part.high_watermark


def partition_lag(committed: int | None, end: int | None) -> int | None:
    """Kafka's lag: log end - committed offset, unknown when either is."""
    return None if committed is None or end is None else end - committed


def summaries(broker, visible: Callable[[str], bool] = lambda topic: True) -> list[GroupSummary]:
    """Every group the coordinator holds, with its total lag over the topics ``visible`` lets the viewer
    describe (as OffsetFetch leaves out the others). Runs on the event loop, which owns the
    coordinator's state; reads only in-memory figures (the log end offsets are attributes)."""
    out = []
    for g in state_views.groups(broker):
        offsets = [(tp, v) for tp, v in g.offsets.items() if visible(tp[0])]
        lags = (partition_lag(v.offset, log_end(broker, tp)) for tp, v in offsets)
        lag = sum(max(0, x) for x in lags if x is not None)
        out.append(GroupSummary(g.group_id, g.state, g.protocol_type, len(g.members), len(offsets), lag,
                                g.protocol_name))
    return out


# the consumer protocol's assignment ----------------------------------------------------------------

class _Truncated(Exception):
    pass


def decode_assignment(data: bytes) -> tuple[TopicPartition, ...] | None:
    """The partitions of a ConsumerProtocolAssignment, or None when the bytes are not one.

    Every version starts the same way (later versions only add fields after these)::

        version int16, assigned_partitions [topic string(int16 length), partitions [int32]], user_data bytes

    Empty bytes are no assignment at all (a member that has not synced yet). Every count is checked
    against the bytes left, so a hostile length cannot make a long loop.
    """
    if not data:
        return ()
    view = memoryview(bytes(data))
    pos = 0

    def take(n: int) -> memoryview:
        nonlocal pos
        if n < 0 or pos + n > len(view):
            raise _Truncated
        chunk = view[pos:pos + n]
        pos += n
        return chunk

    def count(item_size: int) -> int:
        n = struct.unpack(">i", take(4))[0]
        if n < 0 or n * item_size > len(view) - pos:
            raise _Truncated
        return n

    try:
        if struct.unpack(">h", take(2))[0] < 0:
            return None
        out = []
        for _ in range(count(6)):  # a topic takes at least its length and its partition count
            topic = bytes(take(struct.unpack(">h", take(2))[0])).decode("utf-8")
            n = count(4)
            out.extend((topic, p) for p in struct.unpack(f">{n}i", take(4 * n)))
        user_data = struct.unpack(">i", take(4))[0]
        if user_data >= 0:
            take(user_data)
        elif user_data != -1:
            return None
        return tuple(out)
    except (_Truncated, struct.error, UnicodeDecodeError):
        return None


def by_topic(partitions: Iterable[TopicPartition]) -> list[tuple[str, list[int]]]:
    """``[(topic, [partition, ...])]`` in order, for showing an assignment compactly."""
    out: dict[str, list[int]] = {}
    for topic, p in sorted(partitions):
        out.setdefault(topic, []).append(p)
    return list(out.items())


# one group, as the page shows it -------------------------------------------------------------------

@dataclass(frozen=True)
class MemberView:
    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    leader: bool
    partitions: tuple[TopicPartition, ...]
    note: str  # why no partitions are shown ("not a consumer assignment", a rebalance), or ""


@dataclass(frozen=True)
class PartitionRow:
    topic: str
    partition: int
    committed: int | None
    end: int | None
    lag: int | None
    member: MemberView | None
    commit_timestamp: int | None
    metadata: str


@dataclass(frozen=True)
class GroupView:
    group_id: str
    state: str
    generation: int
    protocol_type: str
    protocol_name: str
    leader_id: str
    members: tuple[MemberView, ...]
    rows: tuple[PartitionRow, ...]

    @property
    def total_lag(self) -> int:
        """As the overview counts it: the lag of every committed partition, none below 0."""
        return sum(max(0, r.lag) for r in self.rows if r.lag is not None)

    @property
    def committed_partitions(self) -> int:
        return sum(1 for r in self.rows if r.committed is not None)

    @property
    def committed_topics(self) -> list[str]:
        return sorted({r.topic for r in self.rows if r.committed is not None})


def _member_view(group: GroupStateView, m: state_views.MemberStateView) -> MemberView:
    partitions: tuple[TopicPartition, ...] = ()
    note = ""
    if group.state != STABLE:
        note = f"({group.state}: the assignment is being made)"
    elif group.protocol_type != CONSUMER_PROTOCOL_TYPE:
        note = NOT_CONSUMER
    else:
        decoded = decode_assignment(m.assignment)
        if decoded is None:
            note = NOT_CONSUMER
        else:
            partitions = decoded
    return MemberView(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.member_id == group.leader_id,
                      partitions, note)


def group_view(broker, group: GroupStateView, visible: Callable[[str], bool] = lambda topic: True) -> GroupView:
    """The group as ``kafka-consumer-groups --describe`` shows it, from memory (call on the event loop).

    Partition rows only for topics ``visible`` lets the viewer describe: OffsetFetch and ListOffsets
    ask DESCRIBE on each topic. Members' assignments are shown whole, as DescribeGroups returns them."""
    members = tuple(_member_view(group, m) for m in group.members)
    owners = {tp: m for m in members for tp in m.partitions}
    rows = []
    for tp in sorted(tp for tp in set(group.offsets) | set(owners) if visible(tp[0])):
        value = group.offsets.get(tp)
        committed = None if value is None else value.offset
        end = log_end(broker, tp)
        rows.append(PartitionRow(tp[0], tp[1], committed, end, partition_lag(committed, end), owners.get(tp),
                                 None if value is None else value.commit_timestamp,
                                 "" if value is None else value.metadata))
    return GroupView(group.group_id, group.state, group.generation_id, group.protocol_type,
                     group.protocol_name, group.leader_id, members, tuple(rows))


def find_group(broker, group_id: str) -> GroupStateView | None:
    """The live group, after Kafka's checks (an empty id, a coordinator still loading raise their errors)."""
    return state_views.group(broker, group_id)


# resetting offsets -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class ResetSpec:
    """What the form asks: the topic (None: every topic the group has commits for) and the target."""

    topic: str | None
    to: str
    value: int | None  # the offset, or the time in ms since the epoch


@dataclass(frozen=True)
class PlannedOffset:
    topic: str
    partition: int
    current: int | None
    start: int
    end: int
    new: int


def parse_reset(form) -> ResetSpec:
    """The reset form's fields, checked; errors say what to type instead."""
    to = form.get("to", "")
    if to not in RESET_TARGETS:
        raise FieldError("to", "Choose where to reset to: earliest, latest, an offset or a date-time.")
    value = None
    if to == "offset":  # any long, as --to-offset takes it; the reset rule keeps it within the log
        value = whole_number(form.get("offset", ""), "offset")
    elif to == "datetime":
        text = form.get("datetime", "")
        if len(text) > MAX_DATETIME_CHARS:
            raise FieldError("datetime", f"The date-time {shown(text)} is not a date and time like 2026-01-01T00:00:00.000.")
        value = parse_datetime(text)
    return ResetSpec(form.get("topic") or None, to, value)


def inactive_error(group_id: str, state: str) -> str | None:
    """Kafka's refusal to reset the offsets of a group that still has members (or is rebalancing)."""
    if state in INACTIVE:
        return None
    return f"Assignments can only be reset if the group {shown(group_id)} is inactive, but the current state is {state}."


def plan_reset(cl, spec: ResetSpec, committed: dict[TopicPartition, int]) -> list[PlannedOffset]:
    """The new offsets (disk reads: run on the console's threads). ``committed`` is the group's current
    commits, read on the event loop; they also name the partitions of an all-topics reset."""
    if spec.topic is None:
        partitions = sorted(committed)
    else:
        partitions = [(spec.topic, p) for p in range(cl.partitions_for(spec.topic))]
    out = []
    for tp in partitions:
        part = cl.partition(*tp)
        found = None
        if spec.to == "datetime":
            hit = part.offset_for_timestamp(spec.value)
            found = None if hit is None else hit[1]
        start, end = part.log_start_offset, part.high_watermark
        out.append(PlannedOffset(tp[0], tp[1], committed.get(tp), start, end,
                                 new_offset(spec.to, spec.value, start, end, found)))
    return out


# pages -----------------------------------------------------------------------------------------------

@routes.get("/groups")
async def list_groups(request: web.Request) -> web.Response:
    c = console(request)
    v = viewer(request)
    groups = [g for g in summaries(c.broker, v.describes_topic) if v.can("DESCRIBE", "GROUP", g.group_id)]
    return page(request, "groups.html", groups=groups, group_url=group_url,
                loading=state_views.groups_loading(c.broker))


def _not_found(request: web.Request, group_id: str) -> web.Response:
    return page(request, "error.html", status=404, title="Not found",
                message=f"Consumer group {shown(group_id)} does not exist.")


@routes.get("/groups/{group}")
async def describe_group(request: web.Request) -> web.Response:
    return await _describe(request, "group.html")


@routes.get("/groups/{group}/live")
async def describe_group_live(request: web.Request) -> web.Response:
    """The live part of the group page, which the page fetches again every few seconds."""
    return await _describe(request, "group_live.html")


async def _describe(request: web.Request, template: str) -> web.Response:
    c = console(request)
    group_id = path_name(request, "group")
    require(request, "DESCRIBE", "GROUP", group_id)
    group = find_group(c.broker, group_id)
    if group is None:
        return _not_found(request, group_id)
    reset = request.query.get("reset")
    return page(request, template, g=group_view(c.broker, group, viewer(request).describes_topic), group_url=group_url, topic_url=topic_url,
                by_topic=by_topic, reset_count=_count(reset))


def _count(text: str | None) -> int | None:
    """The ``reset=N`` the page says after a reset; anything else (``²``, 5000 digits) is no count."""
    n = read_integer(text or "")
    return n if n is not None and 0 <= n <= INT_MAX else None


@routes.get("/groups/{group}/reset")
async def reset_form(request: web.Request) -> web.Response:
    """The reset form; with a target in the query, the dry run: the planned offsets and an Execute button."""
    group_id = path_name(request, "group")
    require(request, "READ", "GROUP", group_id)
    form = {k: request.query.get(k, "") for k in FORM_FIELDS}
    if "to" not in request.query:
        return await _reset_page(request, group_id, form)
    status = 200
    try:
        spec = parse_reset(request.query)
        plan, error = await _plan(request, group_id, spec)
    except (CompactLogError, FieldError) as exc:  # a value the form cannot take, or Kafka refuses
        plan, error, status = [], str(exc), 400
    return await _reset_page(request, group_id, form, plan, error, dry_run=True, status=status)


@routes.post("/groups/{group}/reset")
async def reset_execute(request: web.Request) -> web.Response:
    """Execute: the offsets are planned again (the logs moved on since the dry run, as Kafka's tool
    plans again with --execute) and committed through the coordinator's OffsetCommit path."""
    group_id = path_name(request, "group")
    require(request, "READ", "GROUP", group_id)
    posted = await request.post()
    form = {k: str(posted.get(k, "")) for k in FORM_FIELDS}
    status = 409  # the group is not inactive
    try:
        plan, error = await _plan(request, group_id, parse_reset(form))
        if error is None:
            await _commit(console(request), group_id, plan)
    except (CompactLogError, FieldError) as exc:
        plan, error, status = [], str(exc), 400
    if error is not None:
        return await _reset_page(request, group_id, form, plan, error, status=status)
    raise see_other(group_url(group_id) + f"?reset={len(plan)}")


async def _commit(c, group_id: str, plan: list[PlannedOffset]) -> None:
    """OffsetCommit outside any generation (generation -1, no member id), as an admin client sends it;
    call it with no await since the last state check, so no member can have joined in between."""
    if not plan:
        return
    results = await state_views.reset_group_offsets(c.broker, group_id, {(p.topic, p.partition): p.new for p in plan})
    failed = sorted((tp, code) for tp, code in results.items() if code)
    if failed:
        (topic, partition), code = failed[0]
        raise error_for(code, doing=f"{topic}-{partition}: ")  # with Kafka's meaning of the code


async def _plan(request: web.Request, group_id: str, spec: ResetSpec) -> tuple[list[PlannedOffset], str | None]:
    """The planned offsets, or Kafka's refusal when the group is not inactive (checked again after the
    disk reads, which let the event loop run: a consumer may have joined meanwhile)."""
    c = console(request)
    if not state_views.has_group_coordinator(c.broker):
        raise InvalidRequestError("This broker has no group coordinator.")
    group = find_group(c.broker, group_id)
    refusal = inactive_error(group_id, _state(group))
    if refusal is not None:
        return [], refusal
    committed = {} if group is None else {tp: v.offset for tp, v in group.offsets.items()}
    topics = [spec.topic] if spec.topic is not None else sorted({t for t, _ in committed})
    for t in topics:  # what OffsetCommit asks of each topic
        require(request, "READ", "TOPIC", t)
    plan = await c.run(plan_reset, c.cl, spec, committed)
    return plan, inactive_error(group_id, _state(find_group(c.broker, group_id)))


def _state(group: GroupStateView | None) -> str:
    return DEAD if group is None else group.state


async def _reset_page(request: web.Request, group_id: str, form: dict[str, str], plan: Sequence[PlannedOffset] = (),
                      error: str | None = None, dry_run: bool = False, status: int = 200) -> web.Response:
    c = console(request)
    v = viewer(request)
    group = find_group(c.broker, group_id)
    committed_topics = [] if group is None else sorted({t for t, _ in group.offsets})
    readable = [t for t in await c.run(c.cl.list_topics) if not is_internal(t) and v.can("READ", "TOPIC", t)]
    return page(request, "group_reset.html", status=status, group_id=group_id, group_url=group_url,
                state=_state(group), committed_topics=committed_topics,
                topics=sorted(set(readable) | set(committed_topics)), plan=list(plan), error=error, form=form,
                dry_run=dry_run and error is None)
