"""Pulsar-style compaction: the scenarios of Pulsar's CompactionTest that apply to a Kafka log."""

from __future__ import annotations

import threading

import pytest

import compactlog
from compactlog.clock import MockTime
from compactlog.compaction.service import CompactionInProgressError
from compactlog.compaction.state import side_logs
from compactlog.errors import KafkaStorageError
from compactlog.records.batch import build_batch


def view(cl, topic="t", partition=0, **kw):
    kw.setdefault("from_beginning", "offset" not in kw)
    return [(r.offset, r.key, r.value) for r in cl.consume(topic, partition, read_compacted=True, **kw)]


def full(cl, topic="t", partition=0):
    return [(r.offset, r.key, r.value) for r in cl.consume(topic, partition, from_beginning=True)]


@pytest.fixture
def cl(tmp_path):
    with compactlog.open(tmp_path / "d", time=MockTime()) as c:
        c.create_topic("t", 1, {"segment.bytes": "1500"})
        yield c


def test_latest_value_per_key_and_the_log_untouched(cl):
    for i in range(200):
        cl.produce("t", b"v%d" % i, key=b"k%d" % (i % 7))
    before = full(cl)
    st = cl.compact_topic("t")[0]
    assert st.horizon == 200 and st.records_before == 200 and st.records_after == 7
    assert view(cl) == [(193 + i, b"k%d" % ((193 + i) % 7), b"v%d" % (193 + i)) for i in range(7)]
    assert full(cl) == before, "the live log keeps its whole history"


def test_tombstones_delete_keys_and_are_not_kept_and_keyless_records_are_dropped(cl):
    cl.produce("t", b"a1", key=b"a")
    cl.produce("t", b"b1", key=b"b")
    cl.produce("t", None, key=b"a")  # tombstone
    cl.produce("t", b"no key")
    cl.produce("t", b"", key=b"c")  # an empty value is a value in Kafka, not a delete
    cl.produce("t", b"b2", key=b"b")
    cl.compact_topic("t")
    assert view(cl) == [(4, b"c", b""), (5, b"b", b"b2")]
    cl.produce("t", b"a2", key=b"a")  # re-added after the delete: only the new value
    cl.compact_topic("t")
    assert view(cl) == [(4, b"c", b""), (5, b"b", b"b2"), (6, b"a", b"a2")]


def test_all_keys_deleted_gives_an_empty_view_that_readers_pass(cl):
    for k in (b"x", b"y"):
        cl.produce("t", b"1", key=k)
        cl.produce("t", None, key=k)
    st = cl.compact_topic("t")[0]
    assert st.records_after == 0 and view(cl) == []
    cl.produce("t", b"later", key=b"z")
    assert view(cl) == [(4, b"z", b"later")], "a reader reaches the live log after an empty compacted view"


def test_batches_keep_their_base_offsets_and_extents(cl):
    cl.append_batch("t", 0, build_batch([b"a", b"b", b"c"], [b"1", b"2", b"3"]))
    cl.append_batch("t", 0, build_batch([b"a", b"b"], [b"4", b"5"]))
    cl.compact_topic("t")
    from compactlog.storage.snapshot import PartitionSnapshot
    from compactlog.compaction.state import read_state, side_log_dir

    lg = cl.log("t")
    with PartitionSnapshot.of_directory(side_log_dir(lg.dir, read_state(lg.dir).side_log)) as side:
        extents = [(b.base_offset, b.last_offset, [r.offset for r in b.records()]) for b in side.batches()]
    assert extents == [(0, 2, [2]), (3, 4, [3, 4])]


def test_readers_cross_the_horizon_and_never_get_stuck(cl):
    for i in range(50):
        cl.produce("t", b"v%d" % i, key=b"k%d" % (i % 5))
    cl.produce("t", None, key=b"k4")  # offset 50: the last records below the horizon vanish
    cl.produce("t", None, key=b"k3")
    cl.compact_topic("t")
    for i in range(3):
        cl.produce("t", b"new%d" % i, key=b"n")
    assert [o for o, _, _ in view(cl)] == [45, 46, 47, 52, 53, 54]
    assert [o for o, _, _ in view(cl, offset=46)] == [46, 47, 52, 53, 54]
    assert [o for o, _, _ in view(cl, offset=48)] == [52, 53, 54], "from past the last compacted record to the horizon"
    assert [o for o, _, _ in view(cl, offset=53)] == [53, 54]


def test_recompaction_after_more_data_is_incremental(cl):
    for i in range(100):
        cl.produce("t", b"v%d" % i, key=b"k%d" % (i % 10))
    first = cl.compact_topic("t")[0]
    for i in range(30):
        cl.produce("t", b"w%d" % i, key=b"k%d" % (i % 3))
    second = cl.compact_topic("t")[0]
    assert second.records_before == first.records_after + 30, "the previous view plus the new records only"
    assert second.horizon == 130 and second.records_after == 10
    assert dict((k, v) for _, k, v in view(cl))[b"k0"] == b"w27"
    assert cl.compact_topic("t")[0] is None, "nothing new, nothing run"
    assert side_logs(cl.log("t").dir) == [second.side_log], "the superseded side log is gone"


def test_compaction_while_producing(tmp_path):
    with compactlog.open(tmp_path / "d") as cl:
        cl.create_topic("t", 1, {"segment.bytes": "4000"})
        for i in range(3000):
            cl.produce("t", b"v%d" % i, key=b"k%d" % (i % 50))
        states = []
        job = threading.Thread(target=lambda: states.append(cl.compact_topic("t")[0]))
        job.start()
        for i in range(500):
            cl.produce("t", b"during%d" % i, key=b"k%d" % (i % 50))
        job.join()
        h = states[0].horizon
        model: dict[bytes, tuple[int, bytes]] = {}
        for off, k, v in full(cl):
            if off < h:
                model[k] = (off, v)
        expected = sorted((off, k, v) for k, (off, v) in model.items()) + [r for r in full(cl) if r[0] >= h]
        assert view(cl) == expected


@pytest.mark.parametrize("stage", ["phase-one", "phase-two", "publish"])
def test_a_crash_at_any_stage_leaves_the_previous_view(cl, stage):
    for i in range(60):
        cl.produce("t", b"v%d" % i, key=b"k%d" % (i % 6))
    cl.compact_topic("t")
    good = view(cl)
    for i in range(20):
        cl.produce("t", b"w%d" % i, key=b"k%d" % (i % 6))

    def crash(at: str) -> None:
        if at == stage:
            raise OSError(f"simulated crash at {at}")

    cl.compaction.checkpoint = crash
    with pytest.raises(KafkaStorageError, match="compaction of t-0 failed: simulated crash"):  # typed, as I/O errors are
        cl.compact_topic("t")
    assert view(cl)[: len(good)] == good and [o for o, _, _ in view(cl)][len(good):] == list(range(60, 80))
    st = cl.compaction_status("t")[0]
    assert st.status == "ERROR" and "simulated crash" in st.error and st.state.horizon == 60
    assert side_logs(cl.log("t").dir) == [st.state.side_log], "no half-written side log is left"
    cl.compaction.checkpoint = lambda _s: None
    assert cl.compact_topic("t")[0].horizon == 80 and cl.compaction_status("t")[0].status == "SUCCESS"


def test_a_side_log_left_by_a_killed_process_is_removed_at_open(tmp_path):
    with compactlog.open(tmp_path / "d") as cl:
        cl.create_topic("t", 1)
        cl.produce("t", b"1", key=b"a")
        cl.compact_topic("t")
        pdir = cl.log("t").dir
    (pdir / "compacted.7").mkdir()
    (pdir / "compacted.7" / "00000000000000000000.log").write_bytes(b"torn")
    with compactlog.open(tmp_path / "d") as cl:
        assert side_logs(pdir) == [1]
        assert view(cl) == [(0, b"a", b"1")]


def test_a_second_request_while_one_runs_is_refused(cl):
    for i in range(20):
        cl.produce("t", b"v", key=b"k%d" % i)
    seen = []

    def again(at: str) -> None:
        if at == "phase-one":
            with pytest.raises(CompactionInProgressError, match="already in progress"):
                cl.compact_topic("t")
            seen.append(cl.compaction_status("t")[0].status)

    cl.compaction.checkpoint = again
    cl.compact_topic("t")
    assert seen == ["RUNNING"]


def test_retention_on_the_live_log_never_breaks_the_view(tmp_path):
    clock = MockTime()
    with compactlog.open(tmp_path / "d", time=clock) as cl:
        cl.create_topic("t", 1, {"segment.bytes": "1000", "retention.ms": "1000", "file.delete.delay.ms": "0"})
        for i in range(100):
            cl.produce("t", b"v%d" % i, key=b"k%d" % (i % 10), timestamp=clock.milliseconds())
        cl.compact_topic("t")
        expected = view(cl)
        clock.sleep(5000)
        cl.produce("t", b"late", key=b"k0", timestamp=clock.milliseconds())
        assert sum(cl.clean("t").deleted_segments.values()) > 0
        assert cl.beginning_offsets("t")[0] > 0, "retention removed the old live segments"
        assert view(cl) == expected + [(100, b"k0", b"late")]


def test_the_threshold_triggers_compaction_of_the_partitions_over_it(tmp_path):
    with compactlog.open(tmp_path / "d") as cl:
        cl.create_topic("hot", 2, {"compaction.threshold.bytes": "2000"})
        cl.create_topic("off", 1)
        for i in range(100):
            cl.produce("hot", b"x" * 50, key=b"k%d" % i, partition=0)
            cl.produce("off", b"x" * 50, key=b"k%d" % i)
        cl.produce("hot", b"small", key=b"k", partition=1)
        assert cl.compaction.check() == [("hot", 0)]
        assert cl.compaction.check() == [], "below the threshold once compacted"



def test_a_background_process_compacts_at_its_monitor_interval(tmp_path):
    """The monitor thread of a long-running process, at the broker's log.compaction.monitor.interval.ms."""
    import time

    broker = {"log.compaction.monitor.interval.ms": "20"}
    with compactlog.open(tmp_path / "d", broker, background=True) as cl:
        cl.create_topic("hot", 1, {"compaction.threshold.bytes": "1000"})
        cl.produce_batch("hot", [(b"k%d" % (i % 6), b"x" * 50) for i in range(60)])  # one append: one horizon
        deadline = time.monotonic() + 30
        while cl.compaction_status("hot")[0].status != "SUCCESS":
            assert time.monotonic() < deadline, "the monitor never compacted the partition over its threshold"
            time.sleep(0.02)
        assert cl.compaction_status("hot")[0].state.horizon == 60
        assert [(o, k) for o, k, _ in view(cl, "hot")] == [(54 + i, b"k%d" % i) for i in range(6)]


def test_the_monitor_interval_is_a_broker_config():
    from compactlog.errors import InvalidConfigError
    from compactlog.storage.broker_config import BrokerConfig

    assert BrokerConfig({}).get("log.compaction.monitor.interval.ms") == 60000
    with pytest.raises(InvalidConfigError, match="log.compaction.monitor.interval.ms"):
        BrokerConfig({"log.compaction.monitor.interval.ms": "0"})

def test_timestamp_strategy_keeps_the_newest_by_time(tmp_path):
    with compactlog.open(tmp_path / "d") as cl:
        cl.create_topic("t", 1, {"compaction.strategy": "timestamp"})
        cl.produce("t", b"new", key=b"k", timestamp=2000)
        cl.produce("t", b"old", key=b"k", timestamp=1000)
        cl.compact_topic("t")
        assert view(cl) == [(0, b"k", b"new")]


def test_unknown_topic_and_partition(cl):
    from compactlog.errors import UnknownTopicOrPartitionError

    with pytest.raises(UnknownTopicOrPartitionError):
        cl.compact_topic("nope")
    with pytest.raises(UnknownTopicOrPartitionError):
        cl.compact_topic("t", 3)


def test_runs_report_their_progress_phase_by_phase(tmp_path):
    from rich.console import Console

    from compactlog.cli.progress import io_progress

    with compactlog.open(tmp_path / "d") as cl:
        cl.create_topic("t", 1, {"segment.bytes": "4000"})
        cl.produce_batch("t", [(b"k%d" % (i % 10), b"v" * 30) for i in range(300)], batch_bytes=500)
        seen: list[tuple[str, str, int]] = []
        console = Console(record=True, force_terminal=True, width=120)
        with io_progress("compaction", enabled=True, console=console) as shown:
            state = cl.compact_topic("t", on_io=lambda *e: (seen.append(e), shown(*e)))[0]
        by_phase = {ph: sum(n for _, p, n in seen if p == ph) for ph in ("mapping", "writing")}
        assert {log for log, _, _ in seen} == {"t-0"}
        assert by_phase["mapping"] == by_phase["writing"] == state.bytes_before == cl.log("t").size
        assert "compaction: writing t-0" in console.export_text()


def test_partitions_compact_in_parallel_and_one_failure_stops_no_other(tmp_path):
    from compactlog.errors import CorruptRecordError

    broker = {"log.compaction.threads": "3", "log.cleaner.dedupe.buffer.size": str(3 * 2**20)}
    with compactlog.open(tmp_path / "d", broker) as cl:
        assert cl.compaction.memory == 2**20, "each run gets its share of the dedupe buffer"
        cl.create_topic("t", 3)
        for p in range(3):
            cl.produce_batch("t", [(b"k%d" % (i % 7), b"v%d" % i) for i in range(500)], partition=p, batch_bytes=400)
        log_file = cl.log("t", 1).segments[0].log_path
    data = bytearray(log_file.read_bytes())
    data[200] ^= 0xFF  # inside the first batch's records: its CRC no longer matches
    log_file.write_bytes(bytes(data))
    with compactlog.open(tmp_path / "d", broker) as cl:
        with pytest.raises(CorruptRecordError):
            cl.compact_topic("t")
        status = {s.partition: s.status for s in cl.compaction_status("t")}
        assert status == {0: "SUCCESS", 1: "ERROR", 2: "SUCCESS"}
        for p in (0, 2):
            assert [v for _, _, v in view(cl, "t", p)] == [b"v%d" % i for i in range(493, 500)]
        assert cl.end_offsets("t")[1] == 500, "the damaged partition's log is left as it was"
