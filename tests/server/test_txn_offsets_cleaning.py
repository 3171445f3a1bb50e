"""The replay of ``__consumer_offsets`` after the log cleaner went over transactions' offsets and markers
(Kafka's transaction rules in the one survival rule): committed, pending and aborted offsets come back
where they were."""

from __future__ import annotations

import asyncio

from test_txn_offsets import T0, T1, TOPIC, fetch, log_batches, marker, offset, run, txn_commit


def test_the_replay_after_cleaning_keeps_committed_pending_and_aborted_offsets_apart(tmp_path):
    """__consumer_offsets cleaned (twice, so that markers past their delete horizon may go) under an open
    transaction, a committed one and an aborted one: the replay still finds each where it was."""
    data = tmp_path / "d"
    u0 = ("u", 0)

    async def first(broker, c, call, txns):
        await c.commit_offsets("g", -1, "", None, {T0: offset(1)})
        await txn_commit(c, "g", 1, {T0: offset(5), T1: offset(6)})
        await marker(c, "g", 1, True)
        await txn_commit(c, "g", 2, {T0: offset(7)})
        await marker(c, "g", 2, False)
        for n in range(60):  # superseded commits in many small segments: plenty for the cleaner to do
            await c.commit_offsets("g", -1, "", None, {u0: offset(n)})
        await txn_commit(c, "g", 3, {T1: offset(8)})  # open: the cleaner stops at its first offset
        for n in range(60, 120):
            await c.commit_offsets("g", -1, "", None, {u0: offset(n)})
        broker.cl.alter_topic_config(TOPIC, set={"delete.retention.ms": "0", "min.cleanable.dirty.ratio": "0.01"})
        before = len(log_batches(broker, "g"))
        for _ in range(2):
            await asyncio.to_thread(broker.cl.clean, TOPIC)
        assert len(log_batches(broker, "g")) < before
        assert fetch(c, "g", T0, T1, u0) == {T0: offset(5), T1: offset(6), u0: offset(119)}

    async def second(broker, c, call, txns):
        assert fetch(c, "g", T0, T1, u0) == {T0: offset(5), T1: offset(6), u0: offset(119)}
        assert c.unstable_offsets("g", [T0, T1]) == {T1}
        await marker(c, "g", 3, True)
        assert fetch(c, "g", T1) == {T1: offset(8)}

    run(data, first, **{"offsets.topic.segment.bytes": "2048"})
    run(data, second, **{"offsets.topic.segment.bytes": "2048"})
