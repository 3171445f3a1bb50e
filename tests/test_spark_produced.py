"""The Python side of appends whose batches the JVM builds (compactlog.spark.produced), without Spark: the
plan it writes for the JVM, and the checks every batch it is handed passes before it is staged."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

import compactlog
from compactlog.errors import CorruptRecordError, InvalidRecordError, InvalidRequestError, UnknownTopicOrPartitionError
from compactlog.records.batch import build_batch
from compactlog.records.codecs import Codec
from compactlog.spark import produced
from compactlog.spark.writer import WriteOptions, append_staged

NOW = 1_700_000_000_000


@pytest.fixture
def data(tmp_path):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("plain", 3)
        cl.create_topic("lz", 2, {"compression.type": "lz4", "max.message.bytes": "5000"})
        cl.create_topic("hz", 1, {"compression.type": "zstd", "compression.zstd.level": "7", "segment.bytes": "3000"})
        cl.create_topic("gz", 1, {"compression.type": "gzip"})
        cl.create_topic("c", 1, {"cleanup.policy": "compact"})
    return tmp_path


def options(path, **extra):
    return WriteOptions.parse({"path": str(path), "topic": "plain", **extra}, False)


def sent(*rows):
    """What the JVM side sends: (topic, partition, problem, batch, now) rows."""
    names = ["topic", "partition", "problem", "batch", "now"]
    types = [pa.string(), pa.int64(), pa.int32(), pa.binary(), pa.int64()]
    return pa.record_batch([pa.array([r[i] for r in rows], t) for i, t in enumerate(types)], names=names)


def test_the_plan_spells_out_each_topics_codec_level_and_limits(data):
    opts = WriteOptions.parse({"path": str(data), "kafka.batch.size": "262144"}, False)  # a topic column: all
    lines = {f[0]: f[1:] for f in (line.split("\t") for line in produced.plan_text(opts).splitlines())}
    # partitions, codec id, level, batch.size, cut target, limit, most bytes a batch may inflate to
    assert lines["plain"] == ["3", "0", "0", "262144", "262144", "1048588", str(64 << 20)]
    assert lines["lz"] == ["2", str(int(Codec.LZ4)), "9", "262144", "5000", "5000", str(64 << 20)]
    assert lines["hz"] == ["1", str(int(Codec.ZSTD)), "7", "262144", "3000", "3000", str(64 << 20)]
    assert lines["gz"][1:3] == [str(int(Codec.GZIP)), "-1"]  # Kafka's gzip default: zlib's own
    zero = WriteOptions.parse({"path": str(data), "kafka.batch.size": "0"}, False)
    assert produced.plan_text(zero).splitlines()[0].split("\t")[4:6] == ["0", "0"]  # a record a batch
    for o in (opts, zero):
        o.staging.remove()


def test_with_a_topic_option_only_that_topic_is_planned(data):
    named = WriteOptions.parse({"path": str(data), "topic": "lz"}, False)
    assert [line.split("\t")[0] for line in produced.plan_text(named).splitlines()] == ["lz"]
    missing = WriteOptions.parse({"path": str(data), "topic": "nope"}, False)
    assert produced.plan_text(missing) == ""  # its rows come back as problems, and fail by name
    for o in (named, missing):
        o.staging.remove()


def test_the_jvm_side_and_this_one_agree_on_the_option_the_rows_and_the_problem_codes():
    from pathlib import Path

    java = "".join(p.read_text() for p in (Path(produced.__file__).parent / "java").glob("*.java"))
    assert f'PLAN_OPTION = "{produced.PLAN_OPTION}"' in java
    assert f'StructType.fromDDL("{produced.BATCHES_DDL}")' in java
    for name in ("NO_TOPIC", "UNKNOWN_TOPIC", "NO_PARTITION", "NULL_HEADER_KEY"):
        assert f"static final int {name} = {getattr(produced, name)};" in java


def test_batches_are_validated_before_they_are_staged_and_appended_at_commit(data):
    opts = options(data)
    good = build_batch([b"k"], [b"v"], [NOW])
    files = produced.stage_produced(opts, iter([sent(("plain", 1, 0, good, NOW), ("lz", 0, 0, good, NOW))]))
    assert append_staged(opts, files) == 2
    with compactlog.open(data) as cl:
        assert [(r.partition, r.value) for r in cl.consume("plain", from_beginning=True)] == [(1, b"v")]
        # A batch in another codec than the topic's is appended as the log's rules say: recompressed.
        assert {b.codec for b in cl.log("lz", 0).batches(0)} == {Codec.LZ4}


@pytest.mark.parametrize("damage, error", [
    (lambda b: b[:20] + bytes([b[20] ^ 1]) + b[21:], CorruptRecordError),  # a flipped CRC byte
    (lambda b: b[:-1], CorruptRecordError),  # torn
    (lambda b: b[:57] + (5).to_bytes(4, "big") + b[61:], (CorruptRecordError, InvalidRecordError)),  # record count
])
def test_a_damaged_batch_fails_its_task_and_leaves_no_staging_file(data, damage, error):
    opts = options(data)
    good = build_batch([b"k"] * 3, [b"v"] * 3, [NOW] * 3)
    with pytest.raises(error):
        produced.stage_produced(opts, iter([sent(("plain", 0, 0, good, NOW)), sent(("plain", 2, 0, damage(good), NOW))]))
    assert not os.listdir(opts.staging.directory)
    opts.staging.remove()


def test_a_keyless_batch_for_a_compacted_topic_is_refused_as_the_append_refuses_it(data):
    opts = options(data)
    with pytest.raises(Exception, match="Compacted topic cannot accept message without key"):
        produced.stage_produced(opts, iter([sent(("c", 0, 0, build_batch([None], [b"v"], [NOW]), NOW))]))
    opts.staging.remove()


@pytest.mark.parametrize("row, error, message", [
    ((None, -1, produced.NO_TOPIC, None, 0), InvalidRequestError, "no topic"),
    (("nope", -1, produced.UNKNOWN_TOPIC, None, 0), UnknownTopicOrPartitionError, "Topic 'nope' does not exist in"),
    (("plain", 3, produced.NO_PARTITION, None, 0), UnknownTopicOrPartitionError, "Partition 3 of topic 'plain'"),
    (("plain", -4, produced.NO_PARTITION, None, 0), UnknownTopicOrPartitionError, "Partition -4 does not exist"),
    (("plain", -1, produced.NULL_HEADER_KEY, None, 0), InvalidRequestError, "null key"),
    (("plain", -1, 99, None, 0), InvalidRequestError, "unknown problem code 99"),
])
def test_a_row_the_jvm_could_not_route_raises_the_python_paths_error(data, row, error, message):
    opts = options(data)
    with pytest.raises(error, match=message):
        produced.stage_produced(opts, iter([sent(row)]))
    opts.staging.remove()


def test_the_plan_option_on_other_rows_is_refused_by_name():
    from pyspark.sql.types import StringType, StructField, StructType

    with pytest.raises(InvalidRequestError, match="is for compactlog's JVM writer"):
        produced.check_schema(StructType([StructField("value", StringType())]))


def test_a_batch_larger_than_a_segment_is_refused_before_anything_is_appended(data):
    """The log checks a batch against segment.bytes only as it stores it: the stager checks first, and
    the commit checks every staged batch before the first append, so a job never half appends."""
    from compactlog.errors import RecordBatchTooLargeError
    from compactlog.staged_appends import BatchStager, staged_entry
    from compactlog.storage.log_config import LogConfig

    opts = WriteOptions.parse({"path": str(data), "topic": "hz"}, False)
    small, big = build_batch([b"k"], [b"v"], [NOW]), build_batch([b"k"], [b"x" * 4000], [NOW])
    config = LogConfig({"compression.type": "zstd", "compression.zstd.level": "7", "segment.bytes": "3000"})
    with pytest.raises(RecordBatchTooLargeError, match="exceeds the maximum configured segment size of 3000"):
        with BatchStager(opts.staging) as stager:
            stager.stage("hz", 0, config, big, NOW)
    path = opts.staging.new_file(".batches")  # staged by hand, unchecked: the commit's own check
    with open(path, "wb") as f:
        f.write(staged_entry("hz", 0, config.fingerprint(), small) + staged_entry("hz", 0, config.fingerprint(), big))
    with pytest.raises(RecordBatchTooLargeError, match="hz-0"):
        append_staged(opts, [str(path)])
    with compactlog.open(data) as cl:
        assert cl.end_offsets("hz") == {0: 0}
    opts.staging.remove()
