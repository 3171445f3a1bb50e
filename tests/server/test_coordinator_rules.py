"""The group state machine and a group's bookkeeping, as pure code: no loop, no storage, no network."""

from __future__ import annotations

import itertools

import pytest

from compactlog.server.coordinator.group import GroupMetadata
from compactlog.server.coordinator.member import MemberMetadata
from compactlog.group_records import OffsetCommitValue
from compactlog.server.coordinator.state import (
    CAN_REBALANCE,
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    HEARTBEAT_ANSWER,
    MEMBER_COMMIT_ANSWER,
    PREPARING_REBALANCE,
    STABLE,
    SYNC_ANSWER,
    TRANSITIONS,
    GroupState,
    IllegalGroupTransition,
    check_transition,
)

T0 = 1_700_000_000_000
MINUTE = 60_000

# Kafka's legal moves, written out once more by hand: the table must say exactly this.
LEGAL = {
    (EMPTY, PREPARING_REBALANCE), (EMPTY, DEAD),
    (PREPARING_REBALANCE, COMPLETING_REBALANCE), (PREPARING_REBALANCE, EMPTY), (PREPARING_REBALANCE, DEAD),
    (COMPLETING_REBALANCE, PREPARING_REBALANCE), (COMPLETING_REBALANCE, STABLE), (COMPLETING_REBALANCE, DEAD),
    (STABLE, PREPARING_REBALANCE), (STABLE, DEAD),
    (DEAD, DEAD),
}


@pytest.mark.parametrize("old, new", list(itertools.product(GroupState, GroupState)))
def test_every_pair_of_states_is_legal_exactly_when_kafka_allows_it(old, new):
    assert (new in TRANSITIONS[old]) == ((old, new) in LEGAL)
    if (old, new) in LEGAL:
        check_transition("g", old, new)
    else:
        with pytest.raises(IllegalGroupTransition, match=f"from {old.value} to {new.value}"):
            check_transition("g", old, new)


def test_state_names_are_the_ones_kafka_tools_show():
    assert [s.value for s in GroupState] == ["Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"]


def test_answer_tables():
    assert HEARTBEAT_ANSWER == {EMPTY: 25, PREPARING_REBALANCE: 27, COMPLETING_REBALANCE: 0, STABLE: 0, DEAD: 15}
    assert SYNC_ANSWER == {EMPTY: 25, PREPARING_REBALANCE: 27, STABLE: 0, DEAD: 15}
    assert MEMBER_COMMIT_ANSWER[COMPLETING_REBALANCE] == 27 and MEMBER_COMMIT_ANSWER[PREPARING_REBALANCE] == 0
    assert CAN_REBALANCE == {EMPTY, COMPLETING_REBALANCE, STABLE}


def member(member_id: str, *protocols: str, instance: str | None = None, meta: bytes = b"m",
           rebalance_ms: int = 30_000) -> MemberMetadata:
    return MemberMetadata(member_id, instance, "client", "/127.0.0.1", rebalance_ms, 10_000, "consumer",
                          tuple((p, meta) for p in protocols))


def subscription(*topics: str) -> bytes:
    out = b"\x00\x00" + len(topics).to_bytes(4, "big")
    for t in topics:
        out += len(t).to_bytes(2, "big") + t.encode()
    return out + b"\xff\xff\xff\xff"


def test_a_transition_records_when_it_happened():
    g = GroupMetadata("g", T0)
    g.transition_to(PREPARING_REBALANCE, T0 + 5)
    assert g.state is PREPARING_REBALANCE and g.state_timestamp == T0 + 5
    with pytest.raises(IllegalGroupTransition):
        g.transition_to(STABLE, T0 + 6)


def test_first_member_sets_protocol_type_and_leader_and_a_leaver_passes_leadership_on():
    g = GroupMetadata("g", T0)
    assert g.supports_protocols("consumer", ["range"]) and not g.supports_protocols("", ["range"])
    g.add(member("a", "range", "roundrobin"))
    g.add(member("b", "roundrobin", "range"))
    assert g.protocol_type == "consumer" and g.leader_id == "a"
    assert g.candidate_protocols() == {"range", "roundrobin"}
    assert not g.supports_protocols("connect", ["range"])
    assert not g.supports_protocols("consumer", ["sticky"])
    g.remove("a")
    assert g.leader_id == "b" and g.candidate_protocols() == {"roundrobin", "range"}
    g.remove("b")
    assert g.leader_id is None and not g.supported


def test_protocol_is_chosen_by_votes_among_protocols_all_members_support():
    g = GroupMetadata("g", T0)
    g.add(member("a", "sticky", "range"))
    g.add(member("b", "range", "sticky"))
    g.add(member("c", "range", "roundrobin", "sticky"))
    assert g.candidate_protocols() == {"sticky", "range"}
    assert g.select_protocol() == "range"  # b and c prefer it


def test_a_protocol_named_twice_by_one_member_counts_once():
    """A JoinGroup listing "range" twice: still a protocol every member supports (it once left none)."""
    from compactlog.server.coordinator.member import protocols_of

    assert protocols_of([("range", b"1"), ("sticky", b"2"), ("range", b"3")]) == (("range", b"1"), ("sticky", b"2"))
    g = GroupMetadata("g", T0)
    g.add(MemberMetadata("a", None, "client", "/127.0.0.1", 30_000, 10_000, "consumer",
                         protocols_of([("range", b"m"), ("range", b"m")])))
    g.add(member("b", "range"))
    assert g.candidate_protocols() == {"range"}
    assert g.select_protocol() == "range"


def test_join_phase_bookkeeping():
    g = GroupMetadata("g", T0)
    a, b = member("a", "range", rebalance_ms=30_000), member("b", "range", rebalance_ms=90_000)
    g.add(a)
    g.add(b)
    assert g.rebalance_timeout_ms() == 90_000
    a.join_future = object()
    assert not g.has_all_members_joined() and [m.member_id for m in g.not_yet_rejoined()] == ["b"]
    b.join_future = object()
    assert g.has_all_members_joined()
    g.pending_members.add("c-1")  # a member id handed out but not used yet holds the phase open
    assert not g.has_all_members_joined()
    # a leader that did not rejoin is replaced by one that did
    a.join_future = None
    assert g.maybe_elect_new_joined_leader() and g.leader_id == "b"


def test_next_generation_moves_to_completing_rebalance_with_subscribed_topics():
    g = GroupMetadata("g", T0)
    g.add(member("a", "range", meta=subscription("t1", "t2")))
    g.add(member("b", "range", meta=subscription("t3")))
    g.transition_to(PREPARING_REBALANCE, T0)
    g.init_next_generation(T0 + 1)
    assert (g.state, g.generation_id, g.protocol_name) == (COMPLETING_REBALANCE, 1, "range")
    assert g.subscribed_topics == {"t1", "t2", "t3"}
    assert g.current_member_metadata() == (("a", None, subscription("t1", "t2")), ("b", None, subscription("t3")))
    for m in list(g.members):
        g.remove(m)
    g.transition_to(PREPARING_REBALANCE, T0 + 2)
    g.init_next_generation(T0 + 3)
    assert (g.state, g.generation_id, g.protocol_name) == (EMPTY, 2, None)


def test_static_member_replacement_keeps_leadership_and_fences_the_old_id():
    g = GroupMetadata("g", T0)
    g.add(member("s-1", "range", instance="s"))
    g.add(member("d-1", "range"))
    assert g.static_members == {"s": "s-1"}
    g.replace_static_member("s", "s-1", "s-2")
    assert g.leader_id == "s-2" and g.static_members == {"s": "s-2"} and list(g.members) == ["d-1", "s-2"]
    assert g.is_static_member_fenced("s", "s-1") and not g.is_static_member_fenced("s", "s-2")
    assert not g.is_static_member_fenced(None, "anything") and not g.is_static_member_fenced("other", "x")


def offsets(group: GroupMetadata, **committed_at: int) -> None:
    for topic, ts in committed_at.items():
        group.offsets[(topic, 0)] = OffsetCommitValue(10, -1, "", ts)


def test_offsets_of_an_empty_group_expire_retention_after_it_became_empty():
    g = GroupMetadata("g", T0)
    g.protocol_type = "consumer"
    offsets(g, a=T0 - 100 * MINUTE, b=T0)
    assert g.expired_offsets(T0 + 10 * MINUTE - 1, 10 * MINUTE) == []
    assert sorted(g.expired_offsets(T0 + 10 * MINUTE, 10 * MINUTE)) == [("a", 0), ("b", 0)]


def test_offsets_of_a_group_that_only_stores_offsets_expire_retention_after_their_commit():
    g = GroupMetadata("g", T0)  # protocol_type None: no member ever joined
    offsets(g, old=T0 - 10 * MINUTE, new=T0)
    assert g.expired_offsets(T0, 10 * MINUTE) == [("old", 0)]


def test_a_stable_consumer_group_keeps_offsets_of_subscribed_topics():
    g = GroupMetadata("g", T0)
    g.add(member("a", "range", meta=subscription("live")))
    g.transition_to(PREPARING_REBALANCE, T0)
    g.init_next_generation(T0)
    g.transition_to(STABLE, T0)
    offsets(g, live=T0 - 100 * MINUTE, gone=T0 - 100 * MINUTE)
    assert g.expired_offsets(T0, 10 * MINUTE) == [("gone", 0)]
    g.transition_to(PREPARING_REBALANCE, T0)
    assert g.expired_offsets(T0, 10 * MINUTE) == []  # rebalancing: nothing expires


def test_an_explicit_expiry_wins_over_the_rules():
    g = GroupMetadata("g", T0)
    g.offsets[("t", 0)] = OffsetCommitValue(1, -1, "", T0, T0 + 5)
    assert g.expired_offsets(T0 + 4, 10**9) == [] and g.expired_offsets(T0 + 5, 10**9) == [("t", 0)]


def test_a_stored_generation_loads_back_as_it_was():
    g = GroupMetadata("g", T0)
    g.add(member("a", "range", instance="i", meta=subscription("t")))
    g.add(member("b", "range", meta=subscription("t")))
    g.transition_to(PREPARING_REBALANCE, T0)
    g.init_next_generation(T0 + 7)
    value = g.to_record({"a": b"A", "b": b"B"}, T0 + 8)
    assert (value.generation, value.protocol, value.leader, value.current_state_timestamp) == (1, "range", "a", T0 + 7)
    back = GroupMetadata.from_record("g", value, T0 + 9)
    assert back.state is STABLE and back.generation_id == 1 and back.leader_id == "a"
    assert back.static_members == {"i": "a"} and back.subscribed_topics == {"t"}
    assert [(m.member_id, m.assignment, m.metadata("range")) for m in back.members.values()] == [
        ("a", b"A", subscription("t")), ("b", b"B", subscription("t"))]
    empty = GroupMetadata.from_record("g", GroupMetadata("g", T0).to_record({}, T0), T0)
    assert empty.state is EMPTY and not empty.members
