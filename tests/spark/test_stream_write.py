"""``df.writeStream.format("compactlog")``: a topic piped into another, micro-batch by micro-batch."""

from __future__ import annotations

from collections import defaultdict

import pytest

import compactlog


def pipe(spark, path, source: str, target: str, checkpoint, max_per_trigger: int = 150, min_partitions: int = 2):
    """Everything in ``source`` not yet piped (per the checkpoint) appended to ``target``; returns once
    the query has caught up (availableNow stops by itself). Each micro-batch is read by at least
    ``min_partitions`` tasks, so that several tasks stage and commit together."""
    q = (spark.readStream.format("compactlog").option("path", str(path)).option("subscribe", source)
         .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", str(max_per_trigger))
         .option("minPartitions", str(min_partitions))
         .option("includeHeaders", "true").load()
         .select("key", "value", "headers")
         .writeStream.format("compactlog").option("path", str(path)).option("topic", target)
         .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    q.awaitTermination(180)
    assert not q.isActive, "the availableNow query stops by itself"
    return q


def by_key(cl, topic):
    out = defaultdict(list)
    for r in cl.consume(topic, from_beginning=True):
        out[r.key].append((r.value, r.headers))
    return dict(out)


def staged_files(path):
    """What staging left behind: files, and the directories of writers (one per micro-batch's tasks,
    one per commit)."""
    return list((path / "__staging").rglob("*")) if (path / "__staging").exists() else []


def test_a_stream_is_appended_once_in_order_per_key_with_the_target_codec(spark, tmp_path, tmp_path_factory):
    checkpoint = tmp_path_factory.mktemp("ckpt")
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("in", 3)
        cl.create_topic("out", 2, {"compression.type": "zstd"})
        cl.produce_batch("in", [(b"k%d" % (i % 23), b"v%d" % i, (("n", b"%d" % i),)) for i in range(600)], batch_bytes=400)
        source = by_key(cl, "in")
    q = pipe(spark, tmp_path, "in", "out", checkpoint)
    assert q.lastProgress is not None and len(q.recentProgress) >= 4, "several micro-batches of at most 150 rows"
    with compactlog.open(tmp_path) as cl:
        assert by_key(cl, "out") == source, "every record once, each key's records in their order"
        assert {b.codec.config_name for p in range(2) for b in cl.log("out", p).batches(0)} == {"zstd"}
        end = cl.end_offsets("out")
    pipe(spark, tmp_path, "in", "out", checkpoint)  # restarted from its checkpoint: nothing new to pipe
    with compactlog.open(tmp_path) as cl:
        assert cl.end_offsets("out") == end
        cl.produce_batch("in", [(b"k1", b"later%d" % i) for i in range(40)])
    pipe(spark, tmp_path, "in", "out", checkpoint)
    with compactlog.open(tmp_path) as cl:
        assert by_key(cl, "out")[b"k1"][-40:] == [(b"later%d" % i, ()) for i in range(40)]
        assert sum(cl.end_offsets("out").values()) == sum(end.values()) + 40
    assert not staged_files(tmp_path)


def test_a_bad_micro_batch_stops_the_query_and_appends_nothing_of_it(spark, tmp_path, tmp_path_factory):
    """Two tasks: one stages the good record, the other fails on the keyless one; the abort removes
    what the good task staged (a writer Spark makes for the abort has a directory of its own)."""
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("in", 1)
        cl.create_topic("compacted", 1, {"cleanup.policy": "compact"})
        cl.produce_batch("in", [(b"k", b"1"), (None, b"keyless"), (b"k", b"2")])
    with pytest.raises(Exception, match="Compacted topic cannot accept message without key"):
        pipe(spark, tmp_path, "in", "compacted", tmp_path_factory.mktemp("ckpt"), max_per_trigger=10)
    with compactlog.open(tmp_path) as cl:
        assert cl.end_offsets("compacted") == {0: 0}
    assert not staged_files(tmp_path)


def test_an_abort_removes_what_a_task_staged_though_its_message_never_came(tmp_path):
    """Spark aborts a micro-batch as soon as one task fails; a task still running then finishes and
    stages after the abort was decided, so its message is not among the abort's. The writers of one
    query share a staging group (named after the checkpoint), which the abort removes whole."""
    import pyarrow as pa

    from compactlog.spark.source import CompactLogStreamWriter

    with compactlog.open(tmp_path) as cl:
        cl.create_topic("out", 1)
    options = {"path": str(tmp_path), "topic": "out", "checkpointLocation": str(tmp_path / "ckpt")}
    tasks = CompactLogStreamWriter(dict(options), False)  # the writer Spark ships to the tasks
    staged = tasks.write(iter([pa.record_batch({"key": pa.array([b"k"]), "value": pa.array([b"v"])})]))
    assert staged.files and staged_files(tmp_path)
    CompactLogStreamWriter(dict(options), False).abort([None], 0)  # the writer Spark makes to abort
    assert not staged_files(tmp_path)
    other = CompactLogStreamWriter({**options, "checkpointLocation": str(tmp_path / "other")}, False)
    assert other.wopts.staging.group().directory != tasks.wopts.staging.group().directory
    other.abort([None], 0)
