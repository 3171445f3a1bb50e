"""Cleaning real logs (after Kafka's LogCleanerTest): latest value per key, offsets and order kept,
tombstones on time, partial rounds with a small map, codecs kept, aborts, checkpoints."""

from __future__ import annotations

import os

import pytest

import compactlog
from compactlog.clock import MockTime
from compactlog.records import Codec, RecordBatch

COMPACT = {"cleanup.policy": "compact", "segment.bytes": "2000", "min.cleanable.dirty.ratio": "0.01",
           "delete.retention.ms": "1000", "file.delete.delay.ms": "0"}


@pytest.fixture
def clock():
    return MockTime()


def open_dir(path, clock, **broker):
    return compactlog.open(path, {k.replace("_", "."): str(v) for k, v in broker.items()}, time=clock)


def contents(cl, topic="t"):
    return [(r.offset, r.key, r.value) for r in cl.consume(topic, 0, from_beginning=True)]


def latest_per_key(rows):
    last = {}
    for off, k, v in rows:
        last[k] = (off, k, v)
    return sorted(last.values())


def produce_many(cl, n, keys=20, topic="t", codec="none", start=0, prefix=b"k"):
    rows = [(prefix + b"%d" % ((start + i) % keys), b"v%d" % (start + i)) for i in range(n)]
    cl.produce_batch(topic, rows, compression=codec, batch_bytes=200)
    return rows


def test_duplicates_across_segments_leave_the_latest_value_per_key(tmp_path, clock):
    with open_dir(tmp_path, clock) as cl:
        cl.create_topic("t", 1, COMPACT)
        produce_many(cl, 500)
        before = contents(cl)
        lg = cl.log("t")
        active_base = lg.active_segment.base_offset
        report = cl.clean("t")
        assert report.compactions and report.compactions[0].end_offset == active_base
        after = contents(cl)
        cleaned = [r for r in before if r[0] < active_base]
        expected = latest_per_key(cleaned) + [r for r in before if r[0] >= active_base]
        assert after == expected
        assert lg.size < report.compactions[0].stats.start_size
        assert cl.cleaner.manager.checkpoints[("t", 0)] == active_base
    text = (tmp_path / "cleaner-offset-checkpoint").read_text().split("\n")
    assert text[:3] == ["0", "1", f"t 0 {active_base}"]


def test_cleaning_again_changes_nothing_and_keeps_offsets(tmp_path, clock):
    with open_dir(tmp_path, clock) as cl:
        cl.create_topic("t", 1, COMPACT)
        produce_many(cl, 300)
        cl.clean("t")
        first = contents(cl)
        assert cl.clean("t").compactions == []  # nothing dirty: not eligible
        produce_many(cl, 300, start=300)
        cl.clean("t")
        second = contents(cl)
        assert [r for r in second if r[0] < 300] == [r for r in first if r[0] < 300 and r in second]
        offs = [r[0] for r in second]
        assert offs == sorted(offs) and len(set(offs)) == len(offs)
        for off, k, v in second:
            assert v == b"v%d" % off  # every survivor is still at its original offset


def test_tombstones_survive_one_clean_then_go_after_delete_retention(tmp_path, clock):
    with open_dir(tmp_path, clock) as cl:
        cl.create_topic("t", 1, COMPACT)
        produce_many(cl, 100)
        cl.produce_batch("t", [(b"k3", None)])  # delete k3
        produce_many(cl, 200, start=1000, keys=5, prefix=b"filler")  # push the tombstone out of the active segment
        cl.clean("t")
        rows = contents(cl)
        assert (b"k3", None) in [(k, v) for _, k, v in rows]  # first clean keeps it, with a horizon
        tomb_batch = next(b for b in cl.log("t").batches(0) if any(r.key == b"k3" for r in b.records()))
        assert tomb_batch.has_delete_horizon and tomb_batch.delete_horizon_ms == clock.milliseconds() + 1000
        assert all(k != b"k3" or v is None for _, k, v in rows)
        clock.advance(999)
        produce_many(cl, 200, start=2000, keys=5, prefix=b"filler")
        cl.clean("t")
        assert (b"k3", None) in [(k, v) for _, k, v in contents(cl)]
        clock.advance(1)
        produce_many(cl, 200, start=3000, keys=5, prefix=b"filler")
        cl.clean("t")
        assert all(k != b"k3" for _, k, v in contents(cl))


def test_keyless_records_written_before_compaction_are_dropped(tmp_path, clock):
    with open_dir(tmp_path, clock) as cl:
        cl.create_topic("t", 1, {"segment.bytes": "2000"})
        cl.produce_batch("t", [(None, b"keyless%d" % i) for i in range(300)] + [(b"k", b"v%d" % i) for i in range(300)],
                         partition=0, batch_bytes=200)
        cl.alter_topic_config("t", set={k: v for k, v in COMPACT.items()})
        report = cl.clean("t")
        assert report.compactions[0].stats.invalid_messages > 0
        active = cl.log("t").active_segment.base_offset
        assert all(k is not None for off, k, _ in contents(cl) if off < active)


def test_small_offset_map_cleans_in_several_rounds_and_always_progresses(tmp_path, clock):
    # 100 keys, a map that holds ~10 of them: each round maps a slice and moves the checkpoint on
    with open_dir(tmp_path, clock, log_cleaner_dedupe_buffer_size=24 * 12, log_cleaner_io_buffer_load_factor=0.9) as cl:
        cl.create_topic("t", 1, COMPACT)
        rows = produce_many(cl, 2000, keys=100)
        active = cl.log("t").active_segment.base_offset
        report = cl.clean("t")
        ends = [r.end_offset for r in report.compactions]
        assert len(ends) > 3 and ends == sorted(ends) and ends[-1] == active
        assert all(r.stats.buffer_utilization > 0.7 for r in report.compactions[:-1])
        after = contents(cl)
        assert [r for r in after if r[0] >= active] == [(i, k, v) for i, (k, v) in enumerate(rows) if i >= active]
        survivors = {(k, v) for off, k, v in after}
        for k, v in {k: v for k, v in rows[:active]}.items():
            assert (k, v) in survivors


@pytest.mark.parametrize("strategy", ["offset", "timestamp"])
@pytest.mark.parametrize("buffer", [24 * 1000, 32 * 60])  # every key fits; a few dozen per round
def test_an_offset_map_that_grows_as_keys_arrive_cleans_as_one_allocated_whole(tmp_path, clock, monkeypatch,
                                                                                 strategy, buffer):
    """The map starts on a few of its slots and spreads out (offset_map.INITIAL_SLOTS); rounds, their
    ends, utilization and the bytes left are those of a map using every slot from the start."""
    from compactlog.cleaner import offset_map

    results = []
    for initial in (4, 1 << 30):
        monkeypatch.setattr(offset_map, "INITIAL_SLOTS", initial)
        with open_dir(tmp_path / str(initial), clock, log_cleaner_dedupe_buffer_size=buffer) as cl:
            cl.create_topic("t", 1, {**COMPACT, "compaction.strategy": strategy})
            produce_many(cl, 1500, keys=300)
            report = cl.clean("t")
            rounds = [(r.end_offset, r.stats.messages_written, r.stats.buffer_utilization) for r in report.compactions]
            results.append((rounds, [(b.base_offset, bytes(b.buffer)) for b in cl.log("t").batches(0)]))
    assert results[0] == results[1] and results[0][0]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_keep_their_codec(tmp_path, clock, codec):
    with open_dir(tmp_path, clock) as cl:
        cl.create_topic("t", 1, COMPACT)
        produce_many(cl, 400, codec=codec)
        before = contents(cl)
        cl.clean("t")
        active = cl.log("t").active_segment.base_offset
        assert contents(cl) == latest_per_key([r for r in before if r[0] < active]) + [r for r in before if r[0] >= active]
        codecs = {b.codec for b in cl.log("t").batches(0) if b.record_count}
        assert codecs == {Codec[codec.upper()]}


def test_batch_at_the_end_of_the_cleaned_range_is_kept_even_if_emptied(tmp_path, clock):
    with open_dir(tmp_path, clock) as cl:
        cl.create_topic("t", 1, {**COMPACT, "segment.bytes": "100000"})
        cl.produce_batch("t", [(b"a", b"1"), (b"b", b"1")])
        cl.produce_batch("t", [(b"a", b"2"), (b"b", b"2")])
        cl.produce_batch("t", [(b"a", b"3"), (b"b", b"3")])
        cl.log("t").roll()
        cl.produce_batch("t", [(b"a", b"4")])
        cl.clean("t")
        batches = list(cl.log("t").batches(0))
        assert [(b.base_offset, b.last_offset, b.record_count) for b in batches] == [(4, 5, 2), (6, 6, 1)]


def test_offset_gaps_are_kept_on_read_and_by_a_second_clean(tmp_path, clock):
    with open_dir(tmp_path, clock) as cl:
        cl.create_topic("t", 1, COMPACT)
        produce_many(cl, 300, keys=20)
        produce_many(cl, 100, keys=1, start=300, prefix=b"z")
        cl.clean("t")
        offs = [o for o, _, _ in contents(cl)]
        assert offs != list(range(offs[0], offs[0] + len(offs)))  # there are gaps
        assert next(iter(cl.consume("t", 0, offset=offs[1]))).offset == offs[1]
        assert cl.log("t").log_end_offset == 400


def test_abort_leaves_the_log_and_no_cleaned_files(tmp_path, clock):
    with open_dir(tmp_path, clock) as cl:
        cl.create_topic("t", 1, COMPACT)
        produce_many(cl, 500)
        before = contents(cl)
        mgr = cl.cleaner.manager
        cleaner = cl.cleaner._new_cleaner()
        calls = {"n": 0}

        def abort_midway(lg):
            calls["n"] += 1
            if calls["n"] == 2:  # the first check inside the rewrite, after the map was built
                mgr._move(("t", 0), "abort")
            cl.cleaner._check_abort(lg)

        cleaner.check_abort = abort_midway
        assert cl.cleaner.clean_filthiest(cleaner) == (True, None)
        assert mgr.state(("t", 0)) == ("paused", 1)
        assert contents(cl) == before
        assert not [n for n in os.listdir(tmp_path / "t-0") if n.endswith(".cleaned")]
        mgr.resume(("t", 0))
        assert cl.clean("t").compactions


def test_a_failing_partition_becomes_uncleanable_and_others_still_clean(tmp_path, clock):
    with open_dir(tmp_path, clock) as cl:
        cl.create_topic("bad", 1, COMPACT)
        cl.create_topic("good", 1, COMPACT)
        produce_many(cl, 500, topic="bad")
        produce_many(cl, 400, topic="good")
        seg = cl.log("bad").segments[0]
        with open(seg.log_path, "r+b") as f:  # corrupt a batch's records after it was stored
            f.seek(70)
            f.write(b"\xff\xff\xff")
        report = cl.clean()
        assert [(r.topic, r.partition) for r in report.compactions] == [("good", 0)]
        assert cl.cleaner.metrics()["uncleanable-partitions-count"] == 1
        assert cl.cleaner.manager.checkpoints[("bad", 0)] == 0  # a failed round does not advance it


def test_policy_change_to_delete_stops_cleaning_and_compact_delete_applies_retention(tmp_path, clock):
    with open_dir(tmp_path, clock) as cl:
        cl.create_topic("t", 1, COMPACT)
        produce_many(cl, 300)
        cl.alter_topic_config("t", set={"cleanup.policy": "delete"})
        assert cl.clean("t").compactions == []
        cl.alter_topic_config("t", set={"cleanup.policy": "compact,delete", "retention.ms": "1000"})
        clock.advance(5000)
        produce_many(cl, 50, start=300)
        report = cl.clean("t")
        assert report.deleted_segments  # old segments expired by time although the topic compacts
        assert all(off >= cl.log("t").log_start_offset for off, _, _ in contents(cl))


def test_background_threads_clean_by_themselves(tmp_path):
    import time

    broker = {"log.cleaner.backoff.ms": "10"}
    with compactlog.open(tmp_path, broker, background=True) as cl:
        cl.create_topic("t", 1, COMPACT)
        produce_many(cl, 500)
        deadline = time.monotonic() + 20
        active = cl.log("t").active_segment.base_offset
        while cl.cleaner.manager.checkpoints.get(("t", 0)) != active and time.monotonic() < deadline:
            time.sleep(0.01)
        assert cl.cleaner.manager.checkpoints.get(("t", 0)) == cl.log("t").active_segment.base_offset
        m = cl.cleaner.metrics()
        assert m["max-clean-time-secs"] > 0 and m["DeadThreadCount"] == 0


def test_deleting_a_topic_forgets_its_checkpoint(tmp_path, clock):
    with open_dir(tmp_path, clock) as cl:
        cl.create_topic("t", 1, COMPACT)
        produce_many(cl, 300)
        cl.clean("t")
        cl.delete_topic("t")
        assert ("t", 0) not in cl.cleaner.manager.checkpoints
    assert "t 0" not in (tmp_path / "cleaner-offset-checkpoint").read_text()


def test_rebuilt_batches_are_valid_kafka_batches(tmp_path, clock):
    from kafka.record.default_records import DefaultRecordBatch

    with open_dir(tmp_path, clock) as cl:
        cl.create_topic("t", 1, COMPACT)
        produce_many(cl, 300, codec="lz4")
        cl.clean("t")
        for b in cl.log("t").batches(0):
            b.ensure_valid()
            theirs = DefaultRecordBatch(bytes(b.buffer))
            assert theirs.validate_crc()
            assert [r.offset for r in theirs] == [r.offset for r in RecordBatch(bytes(b.buffer)).records()]


def test_truncation_pauses_cleaning_and_lowers_the_checkpoint(tmp_path, clock):
    with open_dir(tmp_path, clock) as cl:
        cl.create_topic("t", 1, COMPACT)
        produce_many(cl, 500)
        cl.clean("t")
        assert cl.cleaner.manager.checkpoints[("t", 0)] > 100
        seen = []
        cl.manager.around_truncation.append(_recording_state(cl, seen))  # runs inside the cleaner's pause
        assert cl.truncate("t", 0, 100)
        assert seen == [("paused", 1)]  # cleaning was paused while the log was cut
        assert cl.cleaner.manager.checkpoints[("t", 0)] == 100
        assert cl.cleaner.manager.state(("t", 0)) == ("none", 0)
        assert cl.log("t").log_end_offset <= 100
        produce_many(cl, 300, start=500)
        assert cl.clean("t").compactions


def _recording_state(cl, seen):
    from contextlib import contextmanager

    @contextmanager
    def hook(topic, partition, offset):
        yield
        seen.append(cl.cleaner.manager.state((topic, partition)))

    return hook


def test_a_cleaning_round_reports_the_bytes_it_maps_and_cleans(tmp_path):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1, {"cleanup.policy": "compact", "segment.bytes": "2000", "min.cleanable.dirty.ratio": "0.01"})
        cl.produce_batch("t", [(b"k%d" % (i % 10), b"v" * 30) for i in range(300)], batch_bytes=300)
        seen = []
        report = cl.clean("t", on_io=lambda *e: seen.append(e))
    stats = [r.stats for r in report.compactions]
    assert stats and {log for log, _, _ in seen} == {"t-0"}
    assert sum(n for _, p, n in seen if p == "mapping") == sum(s.map_bytes_read for s in stats)
    assert sum(n for _, p, n in seen if p == "cleaning") == sum(s.bytes_read for s in stats)


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_a_rebuilt_batch_starts_at_its_first_kept_records_timestamp_as_kafkas_does(tmp_path, clock, codec):
    """Kafka's cleaner rebuilds a batch with baseTimestamp = the first kept record's timestamp; each
    record's absolute timestamp stays. Read back by kafka-python's own parser as well as ours."""
    from kafka.record.memory_records import MemoryRecords

    from compactlog.records import build_batch

    ts = clock.milliseconds()
    with open_dir(tmp_path, clock) as cl:
        cl.create_topic("t", 1, COMPACT)
        stamps = [ts, ts + 10, ts + 20, ts + 30]
        cl.append_batch("t", 0, build_batch([b"a", b"b", b"a", b"c"], [b"1", b"2", b"3", b"4"], stamps,
                                            codec=Codec[codec.upper()]))
        cl.log("t").roll()
        cl.produce("t", b"5", key=b"c", timestamp=ts + 40)  # supersedes c@30: the batch loses its first and last
        cl.log("t").roll()
        assert cl.clean("t").compactions
        first = next(cl.log("t").batches(0))
        assert (first.base_offset, first.last_offset, first.record_count) == (0, 3, 2)
        assert first.base_timestamp == ts + 10
        assert [(r.offset, r.key, r.timestamp) for r in first.records()] == [(1, b"b", ts + 10), (2, b"a", ts + 20)]
        theirs = MemoryRecords(bytes(first.buffer)).next_batch()
        assert theirs.first_timestamp == ts + 10
        assert [(r.offset, r.key, r.timestamp) for r in theirs] == [(1, b"b", ts + 10), (2, b"a", ts + 20)]

