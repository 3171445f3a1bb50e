"""Consumer groups of a running broker, as kafka-consumer-groups sees them: ListGroups, DescribeGroups,
OffsetFetch, OffsetCommit, ListOffsets and DeleteGroups through librdkafka's admin client.

Groups live only in a broker (their offsets in its ``__consumer_offsets``), so there is no local
counterpart: ``compactlog consumer-groups`` always takes ``--bootstrap-server``. What the broker says
is kept as it says it; the command (``groups.py``) only chooses and prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

from ..errors import CompactLogError, GroupIdNotFoundError, InvalidRequestError, NonEmptyGroupError, shown
from ..offset_reset import DATETIME, EARLIEST, LATEST, OFFSET, RESET_TARGETS, new_offset
from .wire import TIMEOUT_S, TopicPartitionKey, WireClient, as_error, result

GROUP_ID_NOT_FOUND = GroupIdNotFoundError.code
# Kafka's names of group states (ConsumerGroupState's enum names are librdkafka's spelling).
STATE_NAMES = {"UNKNOWN": "Unknown", "PREPARING_REBALANCING": "PreparingRebalance",
               "COMPLETING_REBALANCING": "CompletingRebalance", "STABLE": "Stable", "DEAD": "Dead", "EMPTY": "Empty"}
SHIFT, CURRENT, FILE = "shift", "current", "file"  # the tool's targets beyond the reset rule's four
INACTIVE = frozenset({"Empty", "Dead"})  # states in which offsets may be reset (no member would overwrite them)


@dataclass(frozen=True)
class Member:
    member_id: str
    client_id: str
    host: str
    assignment: tuple[TopicPartitionKey, ...]
    group_instance_id: str = ""  # a static member's id (group.instance.id), "" for a dynamic one


@dataclass(frozen=True)
class GroupView:
    """One group: its state, members with their partitions, and committed offsets (next offset to read)."""

    group_id: str
    state: str
    members: tuple[Member, ...]
    committed: Mapping[TopicPartitionKey, int] = field(default_factory=dict)
    coordinator: str = ""  # "host:port  (id)", as kafka-consumer-groups --describe --state prints it
    assignor: str = ""  # the partition assignment strategy the members agreed on

    def owner(self, tp: TopicPartitionKey) -> Member | None:
        return next((m for m in self.members if tp in m.assignment), None)


class GroupAdmin(WireClient):
    """The group side of a broker (a ``WireClient`` with kafka-consumer-groups' calls). ``timeout_s``
    bounds each group call, as kafka-consumer-groups' ``--timeout`` does."""

    def __init__(self, bootstrap: str, timeout_s: float = TIMEOUT_S) -> None:
        super().__init__(bootstrap)
        self.timeout_s = timeout_s

    def _done(self, future):
        """The result of a group call: librdkafka gives up after ``timeout_s``; the wait lasts a little longer."""
        return result(future, timeout=self.timeout_s + 1)

    def list_groups(self) -> list[str]:
        listed = self._done(self.admin.list_consumer_groups(request_timeout=self.timeout_s))
        return sorted(g.group_id for g in listed.valid)

    def list_group_states(self) -> dict[str, str]:
        """Every group with its state (Kafka's names). A broker that lists groups without their states
        (ListGroups before v4) is asked with DescribeGroups for the groups it left unknown."""
        listed = self._done(self.admin.list_consumer_groups(request_timeout=self.timeout_s))
        states = {g.group_id: _state_name(g.state) for g in listed.valid}
        unknown = [g for g, state in states.items() if state == "Unknown"]
        if unknown:
            described = self.admin.describe_consumer_groups(unknown, request_timeout=self.timeout_s)
            for group, future in described.items():
                states[group] = _state_name(self._done(future).state)
        return dict(sorted(states.items()))

    def describe_group(self, group: str) -> GroupView:
        """The group, or GROUP_ID_NOT_FOUND when the broker knows neither members nor offsets of it."""
        from confluent_kafka import ConsumerGroupTopicPartitions

        desc = self._done(self.admin.describe_consumer_groups([group], request_timeout=self.timeout_s)[group])
        asked = ConsumerGroupTopicPartitions(group)
        fetched = self._done(self.admin.list_consumer_group_offsets([asked], request_timeout=self.timeout_s)[group])
        committed = {(tp.topic, tp.partition): tp.offset for tp in fetched.topic_partitions or () if tp.offset >= 0}
        state = _state_name(desc.state)
        members = tuple(
            Member(m.member_id, m.client_id, m.host,
                   tuple((tp.topic, tp.partition) for tp in (m.assignment.topic_partitions if m.assignment else ())),
                   m.group_instance_id or "")
            for m in desc.members or ())
        if state in ("Dead", "Unknown") and not members and not committed:
            raise GroupIdNotFoundError(f"Consumer group {shown(group)} does not exist.")
        node = desc.coordinator
        coordinator = f"{node.host}:{node.port}  ({node.id})" if node is not None else ""
        return GroupView(group, state, members, committed, coordinator, desc.partition_assignor or "")

    def describe_group_or_new(self, group: str) -> GroupView:
        """The group, or an empty one: offsets may be stored for a group nobody has joined yet, as Kafka
        lets them (a consumer that joins later starts there)."""
        try:
            return self.describe_group(group)
        except CompactLogError as exc:
            if exc.code != GROUP_ID_NOT_FOUND:
                raise
            return GroupView(group, "Dead", ())

    def end_offsets(self, partitions: Iterable[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        """Log end offsets (high watermarks) of the partitions whose topic still exists: a group may
        hold commits of a deleted topic, which Kafka's tool shows with no end and no lag."""
        partitions = list(partitions)
        out = {}
        for topic in {tp[0]: None for tp in partitions}:
            try:
                out.update(self._offsets([tp for tp in partitions if tp[0] == topic], "latest"))
            except CompactLogError:
                if topic in self.list_topics():
                    raise
        return out

    def _offsets(self, partitions: Iterable[TopicPartitionKey], spec: str | int) -> dict[TopicPartitionKey, int]:
        by_topic: dict[str, list[int]] = {}
        for topic, p in partitions:
            by_topic.setdefault(topic, []).append(p)
        out = {}
        for topic, parts in by_topic.items():
            for p, offset in self.list_offsets(topic, parts, spec).items():
                out[(topic, p)] = offset
        return out

    def reset_plan(self, group: GroupView, partitions: list[TopicPartitionKey], to: str,
                   value: int | None = None, requested: Mapping[TopicPartitionKey, int] | None = None,
                   ) -> dict[TopicPartitionKey, int]:
        """New committed offsets for ``partitions``: ``to`` is earliest, latest, offset (``value``) or datetime
        (``value`` in ms), by the reset rule (``offset_reset.new_offset``) over what ListOffsets answers;
        or one of kafka-consumer-groups' own: shift (the committed offset moved by ``value``), current (the
        committed offset, else the log end) and file (``requested``, an offset per partition); a shifted
        or requested offset is kept within the log, as an offset is."""
        check_inactive(group)
        earliest = self._offsets(partitions, EARLIEST)
        latest = self._offsets(partitions, LATEST)
        found = self._offsets(partitions, value) if to == DATETIME else {}  # -1: no record that recent
        if to == OFFSET:
            return {tp: within_log(tp, value, earliest[tp], latest[tp]) for tp in partitions}
        if to in RESET_TARGETS:
            return {tp: new_offset(to, value, earliest[tp], latest[tp], found[tp] if found.get(tp, -1) >= 0 else None)
                    for tp in partitions}
        plan = {}
        for tp in partitions:
            current = group.committed.get(tp)
            if to == CURRENT:
                plan[tp] = latest[tp] if current is None else current
                continue
            if to == SHIFT:
                if current is None:
                    raise InvalidRequestError(f"Cannot shift offset for partition {tp[0]}-{tp[1]} since there is no "
                                              "current committed offset")
                wanted = current + value
            elif to == FILE:
                wanted = requested[tp]
            else:
                raise ValueError(f"unknown reset target {shown(to)}")
            plan[tp] = within_log(tp, wanted, earliest[tp], latest[tp])
        return plan

    def commit(self, group: str, offsets: Mapping[TopicPartitionKey, int]) -> None:
        """Store ``offsets`` as the group's committed offsets (OffsetCommit outside any generation)."""
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

        tps = [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())]
        req = ConsumerGroupTopicPartitions(group, tps)
        answer = self._done(self.admin.alter_consumer_group_offsets([req], request_timeout=self.timeout_s)[group])
        for tp in answer.topic_partitions or ():
            if tp.error is not None:
                raise as_error(tp.error, f"{tp.topic}-{tp.partition}: ")

    def delete_group(self, group: str) -> None:
        """DeleteGroups; a group the broker does not know is named as --describe names it, one with members
        in Kafka's words (librdkafka's own are 'Broker: The group is not empty', naming no group)."""
        try:
            self._done(self.admin.delete_consumer_groups([group], request_timeout=self.timeout_s)[group])
        except CompactLogError as exc:
            if exc.code == GROUP_ID_NOT_FOUND:
                raise GroupIdNotFoundError(f"Consumer group {shown(group)} does not exist.") from None
            if exc.code == NonEmptyGroupError.code:
                raise NonEmptyGroupError(f"Consumer group {shown(group)} is not empty.") from None
            raise


def within_log(tp: TopicPartitionKey, wanted: int, start: int, end: int) -> int:
    """An offset asked for (--to-offset, --shift-by, --from-file) kept within the log, as the reset rule keeps
    it, with the warning kafka-consumer-groups prints (on standard error) when it is moved."""
    import click

    kept = new_offset(OFFSET, wanted, start, end, None)
    if wanted > end:
        click.echo(f"WARN New offset ({wanted}) is higher than latest offset for topic partition {tp[0]}-{tp[1]}. "
                   f"Value will be set to {kept}", err=True)
    elif wanted < start:
        click.echo(f"WARN New offset ({wanted}) is lower than earliest offset for topic partition {tp[0]}-{tp[1]}. "
                   f"Value will be set to {kept}", err=True)
    return kept


def check_inactive(group: GroupView) -> None:
    """Offsets are reset only while no member could overwrite them, in kafka-consumer-groups' words."""
    if group.state not in INACTIVE:
        raise InvalidRequestError(f"Assignments can only be reset if the group {shown(group.group_id)} is inactive, but "
                                  f"the current state is {group.state}.")


def _state_name(state) -> str:
    """Kafka's name of a librdkafka ConsumerGroupState."""
    return STATE_NAMES.get(getattr(state, "name", str(state)), str(state))


__all__ = ["GroupAdmin", "GroupView", "Member"]
