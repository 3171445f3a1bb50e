"""The replay of ``__consumer_offsets`` after the log cleaner went over transactions' offsets and markers
(Kafka's transaction rules in the one survival rule): committed, pending and aborted offsets come back
where they were, including after the markers of finished transactions were cleaned away."""

from __future__ import annotations

import asyncio

from compactlog.records.control import read_control_record

from test_txn_offsets import T0, T1, TOPIC, fetch, log_batches, marker, offset, run, txn_commit

U0 = ("u", 0)


def markers(broker) -> list[tuple[int, str]]:
    return [(b.producer_id, read_control_record(b).type_name) for b in log_batches(broker, "g")
            if b.is_control and b.record_count]


def test_the_replay_after_cleaning_keeps_committed_pending_and_aborted_offsets_apart(tmp_path):
    """__consumer_offsets cleaned under an open, a committed and an aborted transaction: the replay
    still finds each where it was."""
    data = tmp_path / "d"

    async def first(broker, c, call, txns):
        await c.commit_offsets("g", -1, "", None, {T0: offset(1)})
        await txn_commit(c, "g", 1, {T0: offset(5), T1: offset(6)})
        await marker(c, "g", 1, True)
        await txn_commit(c, "g", 2, {T0: offset(7)})
        await marker(c, "g", 2, False)
        for n in range(60):  # superseded commits in many small segments: plenty for the cleaner to do
            await c.commit_offsets("g", -1, "", None, {U0: offset(n)})
        await txn_commit(c, "g", 3, {T1: offset(8)})  # open: the cleaner stops at its first offset
        for n in range(60, 120):
            await c.commit_offsets("g", -1, "", None, {U0: offset(n)})
        broker.cl.alter_topic_config(TOPIC, set={"delete.retention.ms": "0", "min.cleanable.dirty.ratio": "0.01"})
        before = len(log_batches(broker, "g"))
        for _ in range(2):
            await asyncio.to_thread(broker.cl.clean, TOPIC)
        assert len(log_batches(broker, "g")) < before
        assert fetch(c, "g", T0, T1, U0) == {T0: offset(5), T1: offset(6), U0: offset(119)}

    async def second(broker, c, call, txns):
        assert fetch(c, "g", T0, T1, U0) == {T0: offset(5), T1: offset(6), U0: offset(119)}
        assert c.unstable_offsets("g", [T0, T1]) == {T1}
        await marker(c, "g", 3, True)
        assert fetch(c, "g", T1) == {T1: offset(8)}

    run(data, first, **{"offsets.topic.segment.bytes": "2048"})
    run(data, second, **{"offsets.topic.segment.bytes": "2048"})


def test_the_replay_after_the_markers_of_superseded_transactions_are_cleaned_away(tmp_path):
    """Transactions whose offsets later plain commits replaced: their records go, then (past the delete
    horizon, a round later) their markers; the replay, before and after, answers the plain commits and
    keeps a transaction opened afterwards pending."""
    data = tmp_path / "d"

    async def first(broker, c, call, txns):
        broker.cl.create_topic(TOPIC, 3, {"cleanup.policy": "compact", "segment.bytes": "2048",
                                          "delete.retention.ms": "0", "min.cleanable.dirty.ratio": "0.01"})
        await c.commit_offsets("g", -1, "", None, {T0: offset(1)})
        await txn_commit(c, "g", 1, {T0: offset(5), T1: offset(6)})
        await marker(c, "g", 1, True)
        await txn_commit(c, "g", 2, {T0: offset(7)})
        await marker(c, "g", 2, False)
        await c.commit_offsets("g", -1, "", None, {T0: offset(10), T1: offset(11)})
        for round_ in range(5):
            for n in range(40):
                await c.commit_offsets("g", -1, "", None, {U0: offset(100 * round_ + n)})
            await asyncio.to_thread(broker.cl.clean, TOPIC)
            if round_ == 0:
                # the producers' last (emptied) batches keep their markers until the producers expire
                assert markers(broker) == [(1, "COMMIT"), (2, "ABORT")]
                later = broker.cl.time.milliseconds() + 2 * broker.config.get("producer.id.expiration.ms")
                assert broker.cl.manager.remove_expired_producers(later) == 2
        assert markers(broker) == []  # then their empty batches go, and a round past the horizon the markers
        await txn_commit(c, "g", 3, {T1: offset(8)})
        assert fetch(c, "g", T0, T1, U0) == {T0: offset(10), T1: offset(11), U0: offset(439)}

    async def second(broker, c, call, txns):
        assert fetch(c, "g", T0, T1, U0) == {T0: offset(10), T1: offset(11), U0: offset(439)}
        assert c.unstable_offsets("g", [T0, T1]) == {T1}
        await marker(c, "g", 3, False)
        assert fetch(c, "g", T1) == {T1: offset(11)} and c.unstable_offsets("g", [T1]) == set()

    run(data, first)
    run(data, second)
