"""Distributed compaction: the same input and clock give the local cleaner's files, byte for byte."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

import compactlog
from compactlog.clock import MockTime
from compactlog.errors import UnknownTopicOrPartitionError
from compactlog.records.batch import build_batch
from compactlog.records.codecs import Codec
from compactlog.spark.compact import CompactionJobError, compact

START_MS = 1_700_000_000_000
CODECS = [Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD]


def _append_random(cl, rng: random.Random, clock: MockTime, partitions: int, batches: int, keys: int,
                   keyless: bool = False, topic: str = "t") -> None:
    for _ in range(batches):
        n = rng.randint(1, 15)
        ks = [None if keyless and rng.random() < 0.2 else b"k%03d" % rng.randrange(keys) for _ in range(n)]
        vs = [None if rng.random() < 0.12 else b"v%08d" % rng.randrange(10**8) * rng.randint(1, 4) for _ in range(n)]
        ts = [clock.milliseconds() + rng.randint(-5000, 5000) for _ in range(n)]
        hs = [[("version", b"%d" % rng.randrange(100))] if rng.random() < 0.8 else [] for _ in range(n)]
        cl.append_batch(topic, rng.randrange(partitions), build_batch(ks, vs, ts, headers=hs, codec=rng.choice(CODECS)))
        clock.sleep(rng.randint(0, 30))


def build_log(root: Path, seed: int, strategy: str, partitions: int = 2, topic: str = "t") -> None:
    """A compacted topic with history: keyless records from its delete days, an earlier cleaning (so
    some tombstones carry a delete horizon), then more dirty data on top."""
    rng = random.Random(seed)
    clock = MockTime(START_MS)
    with compactlog.open(root, time=clock) as cl:
        cl.create_topic(topic, partitions, {"cleanup.policy": "delete", "segment.bytes": "3000",
                                            "file.delete.delay.ms": "0", "delete.retention.ms": "2000",
                                            "min.cleanable.dirty.ratio": "0.01", "compaction.strategy": strategy})
        _append_random(cl, rng, clock, partitions, 30, 40, keyless=True, topic=topic)
        cl.alter_topic_config(topic, set={"cleanup.policy": "compact"})
        _append_random(cl, rng, clock, partitions, 60, 40, topic=topic)
        cl.clean(topic)
        clock.sleep(1000)
        _append_random(cl, rng, clock, partitions, 90, 60, topic=topic)
        clock.sleep(1500)  # some horizons from the first cleaning have passed, others not


def snapshot_files(root: Path) -> dict[str, bytes]:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.suffix in {".log", ".index", ".timeindex"} or p.name == "cleaner-offset-checkpoint":
            out[str(p.relative_to(root))] = p.read_bytes()
    return out


@pytest.mark.parametrize("seed,strategy,offset_map", [(1, "offset", "auto"), (1, "offset", "shuffle"), (2, "offset", "auto"),
                                                      (2, "offset", "shuffle"), (3, "timestamp", "auto"),
                                                      (4, "header:version", "auto")])
def test_same_files_as_the_local_cleaner(spark, tmp_path, seed, strategy, offset_map):
    """``auto``: the offset strategy's keys fit the cleaner's budget, so tasks build the local cleaner's
    own map; ``shuffle``: the map made by the shuffle, as for keys that do not fit."""
    build_log(tmp_path / "base", seed, strategy)
    shutil.copytree(tmp_path / "base", tmp_path / "local")
    shutil.copytree(tmp_path / "base", tmp_path / "spark")
    now = MockTime(START_MS + 10**6)
    with compactlog.open(tmp_path / "local", time=now) as cl:
        before = [(r.partition, r.offset) for r in cl.consume("t", from_beginning=True)]
        local = cl.clean("t").compactions
    with compactlog.open(tmp_path / "spark", time=MockTime(START_MS + 10**6)) as cl:
        said: list[str] = []
        results = compact(spark, cl, "t", progress=said.append, offset_map=offset_map)
        after = list(cl.consume("t", from_beginning=True))
    assert any("mapped the keys of 2 partition(s) in tasks" in m for m in said) == ((strategy, offset_map) == ("offset", "auto"))
    assert sorted((r.partition, r.end_offset) for r in results) == sorted((r.partition, r.end_offset) for r in local)
    assert len(after) < len(before), "the job removed superseded records"
    assert sum(r.stats.messages_written for r in results) == sum(r.stats.messages_written for r in local)
    local_files, spark_files = snapshot_files(tmp_path / "local"), snapshot_files(tmp_path / "spark")
    assert list(local_files) == list(spark_files)
    for name in local_files:
        assert local_files[name] == spark_files[name], f"{name} differs"
    assert not list((tmp_path / "spark" / "__staging").iterdir()), "nothing is left in the staging directory"


def test_latest_value_per_key_survives_and_offsets_stay(spark, tmp_path):
    clock = MockTime(START_MS)
    with compactlog.open(tmp_path / "d", time=clock) as cl:
        cl.create_topic("t", 1, {"cleanup.policy": "compact", "segment.bytes": "1500", "min.cleanable.dirty.ratio": "0.01"})
        rng = random.Random(7)
        latest: dict[bytes, tuple[int, bytes]] = {}
        for i in range(600):
            key, value = b"k%d" % rng.randrange(50), b"value-%d" % i
            md = cl.produce("t", value, key=key)
            latest[key] = (md.offset, value)
        end = cl.end_offsets("t")[0]
        results = compact(spark, cl, "t", progress=lambda _m: None)
        assert results and results[0].end_offset == cl.log("t").active_segment.base_offset
        recs = list(cl.consume("t", 0, from_beginning=True))
        offsets = [r.offset for r in recs]
        assert offsets == sorted(offsets) and cl.end_offsets("t")[0] == end
        for key, (off, value) in latest.items():
            assert any(r.offset == off and r.value == value for r in recs), key
        cleaned = [r.key for r in recs if r.offset < results[0].end_offset]
        assert len(cleaned) == len(set(cleaned)), "one record per key below the cleaned point"
        assert cl.cleaner.manager.checkpoints[("t", 0)] == results[0].end_offset
        assert cl.cleaner.manager.state(("t", 0))[0] == "none"
        assert compact(spark, cl, "t", progress=lambda _m: None) == []  # nothing dirty any more


def test_unknown_topic(spark, tmp_path):
    with compactlog.open(tmp_path / "d") as cl:
        with pytest.raises(UnknownTopicOrPartitionError):
            compact(spark, cl, "nope")


def test_a_corrupt_batch_fails_the_job_and_leaves_the_log_untouched(spark, tmp_path):
    clock = MockTime(START_MS)
    with compactlog.open(tmp_path / "d", time=clock) as cl:
        cl.create_topic("t", 1, {"cleanup.policy": "compact", "segment.bytes": "2000", "min.cleanable.dirty.ratio": "0.01"})
        for i in range(300):
            cl.produce("t", b"v%d" % i, key=b"k%d" % (i % 20))
        first = cl.log("t").segments[1]
        path = first.log_path
    raw = bytearray(path.read_bytes())
    raw[70] ^= 0xFF  # inside the first batch's records: its CRC no longer matches
    path.write_bytes(bytes(raw))
    before = snapshot_files(tmp_path / "d")
    with compactlog.open(tmp_path / "d", time=clock) as cl:
        with pytest.raises(CompactionJobError, match="(?i)corrupt|crc"):
            compact(spark, cl, "t", progress=lambda _m: None)
        assert cl.cleaner.manager.state(("t", 0))[0] == "none"
    assert snapshot_files(tmp_path / "d") == before
    assert not list((tmp_path / "d").rglob("*.cleaned"))
    assert not list((tmp_path / "d" / "__staging").iterdir()), "the job's staging directory is gone"


def test_cli_names_an_unknown_topic_before_starting_spark(tmp_path):
    from click.testing import CliRunner

    from compactlog.cli.main import main

    (tmp_path / "d").mkdir()
    res = CliRunner().invoke(main, ["spark", "compact", "--data-dir", str(tmp_path / "d"), "--topic", "nope"])
    assert res.exit_code == 1 and "Error:" in res.output and "nope" in res.output


def test_progress_bar_follows_a_job_and_stops_with_it(spark):
    import threading

    from compactlog.spark.progress import spark_progress, stage_totals

    with spark_progress(spark, "counting", enabled=True):
        assert spark.range(0, 10000, 1, 4).selectExpr("sum(id)").collect()[0][0] == 49995000
    assert not [t for t in threading.enumerate() if t.name == "spark-progress"]
    assert stage_totals(spark.sparkContext.statusTracker()) == (0, 0, 0)


def test_appends_go_on_while_the_job_runs(spark, tmp_path):
    import threading

    clock = MockTime(START_MS)
    with compactlog.open(tmp_path / "d", time=clock) as cl:
        cl.create_topic("t", 1, {"cleanup.policy": "compact", "segment.bytes": "1500", "min.cleanable.dirty.ratio": "0.01"})
        produced: dict[int, tuple[bytes, bytes]] = {}
        for i in range(500):
            produced[cl.produce("t", b"before-%d" % i, key=b"k%d" % (i % 40)).offset] = (b"k%d" % (i % 40), b"before-%d" % i)
        planned_end = cl.log("t").active_segment.base_offset
        out: list = []
        job = threading.Thread(target=lambda: out.append(compact(spark, cl, "t", progress=lambda _m: None)))
        job.start()
        during = {}
        for i in range(300):
            key, value = b"k%d" % (i % 40), b"during-%d" % i
            during[cl.produce("t", value, key=key).offset] = (key, value)
        job.join()
        assert out and out[0][0].end_offset == planned_end
        recs = {r.offset: (r.key, r.value) for r in cl.consume("t", 0, from_beginning=True)}
        assert all(recs.get(off) == kv for off, kv in during.items()), "an append made during the job was lost"
        assert sorted(recs) == list(recs), "offsets stay in order"
        cleaned = [recs[o][0] for o in recs if o < planned_end]
        assert len(cleaned) == len(set(cleaned))


def test_deleting_the_topic_during_the_job_wins_and_leaves_nothing_behind(spark, tmp_path):
    import threading

    with compactlog.open(tmp_path / "d", time=MockTime(START_MS)) as cl:
        cl.create_topic("t", 1, {"cleanup.policy": "compact", "segment.bytes": "1500", "min.cleanable.dirty.ratio": "0.01"})
        for i in range(500):
            cl.produce("t", b"v%d" % i, key=b"k%d" % (i % 40))
        errors: list[BaseException] = []

        def run():
            try:
                compact(spark, cl, "t", progress=lambda _m: None)
            except UnknownTopicOrPartitionError:
                pass  # the deletion came first
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        job = threading.Thread(target=run)
        job.start()
        cl.delete_topic("t")
        job.join()
        assert not errors, errors
        assert "t" not in cl.list_topics()
        assert cl.cleaner.manager.state(("t", 0))[0] == "none"
    assert not [p for p in (tmp_path / "d").iterdir() if p.name.startswith("t-")]


def test_keys_that_do_not_fit_the_cleaners_budget_are_mapped_by_the_shuffle_in_one_pass(spark, tmp_path):
    """A dedupe buffer of 27 keys against 60 (or of none): the tasks' maps fill, so the job maps by the shuffle
    instead and cleans the whole dirty section in its one round, the same files as the shuffle alone."""
    build_log(tmp_path / "base", 5, "offset")
    outcomes = {}
    for mode, buffer in (("auto", 30 * 24), ("auto-none", 0), ("shuffle", 30 * 24)):  # 0: not even one key
        small = {"log.cleaner.dedupe.buffer.size": str(buffer), "log.cleaner.threads": "1"}
        shutil.copytree(tmp_path / "base", tmp_path / mode)
        with compactlog.open(tmp_path / mode, config=small, time=MockTime(START_MS + 10**6)) as cl:
            said: list[str] = []
            results = compact(spark, cl, "t", progress=said.append, offset_map=mode.removesuffix("-none"))
            assert not any("in tasks" in m for m in said)
            assert all(r.end_offset == cl.log("t", r.partition).active_segment.base_offset for r in results)
            outcomes[mode] = ([(r.partition, r.end_offset) for r in results], snapshot_files(tmp_path / mode))
    assert outcomes["auto"] == outcomes["auto-none"] == outcomes["shuffle"]


def test_one_job_over_topics_mapped_in_tasks_and_by_the_shuffle(spark, tmp_path):
    """Every eligible log in one job: an offset-strategy topic whose maps the tasks build beside a
    versioned one the shuffle maps; each gets the local cleaner's files."""
    build_log(tmp_path / "base", 8, "offset", topic="a")
    build_log(tmp_path / "base", 9, "timestamp", topic="b")
    shutil.copytree(tmp_path / "base", tmp_path / "local")
    shutil.copytree(tmp_path / "base", tmp_path / "spark")
    with compactlog.open(tmp_path / "local", time=MockTime(START_MS + 10**6)) as cl:
        local = cl.clean().compactions
    with compactlog.open(tmp_path / "spark", time=MockTime(START_MS + 10**6)) as cl:
        said: list[str] = []
        results = compact(spark, cl, progress=said.append)
    assert any("mapped the keys of 2 partition(s) in tasks" in m for m in said)
    assert sorted((r.topic, r.partition, r.end_offset) for r in results) == sorted(
        (r.topic, r.partition, r.end_offset) for r in local)
    assert {r.topic for r in results} == {"a", "b"}
    assert snapshot_files(tmp_path / "local") == snapshot_files(tmp_path / "spark")
