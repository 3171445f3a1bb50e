"""How a task turns a DataFrame's Arrow batches into record batches: routing, order, timestamps, headers.

These call the task side directly with Arrow batches as Spark hands them over, then append through the
driver side, so each rule is checked on real files without a Spark job in between.
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from kafka.partitioner.default import murmur2

import compactlog
from compactlog.errors import (CorruptRecordError, InvalidRecordError, InvalidRequestError, InvalidTimestampError,
                              UnknownTopicOrPartitionError)
from compactlog.spark.writer import BATCH_BYTES, WriteOptions, append_staged, stage_batches

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def options(path, topic="t", **extra):
    """As the driver parses them: this also creates the job's staging directory."""
    return WriteOptions.parse({"path": str(path), "topic": topic, **extra}, False)


def write(path, batches, topic="t", **extra):
    opts = options(path, topic, **extra)
    return append_staged(opts, stage_batches(opts, iter(batches)))


def records(path, topic="t"):
    with compactlog.open(path) as cl:
        return list(cl.consume(topic, from_beginning=True))


@pytest.fixture
def topic(tmp_path):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 3)
        cl.create_topic("u", 2)
    return tmp_path


def test_keys_hash_like_kafka_and_order_is_kept_per_partition(topic):
    keys = [f"k{i % 40}" for i in range(3000)]
    rb = pa.record_batch({"key": keys, "value": [f"v{i}" for i in range(3000)]})
    assert write(topic, [rb]) == 3000
    got = records(topic)
    for r in got:
        assert r.partition == (murmur2(r.key) & 0x7FFFFFFF) % 3
    for p in range(3):
        values = [int(r.value[1:]) for r in got if r.partition == p]
        assert values == sorted(values), "rows of one partition keep the DataFrame's order"
    assert sorted(int(r.value[1:]) for r in got) == list(range(3000))


def test_batches_are_cut_near_the_batch_size(topic):
    rb = pa.record_batch({"key": pa.array([b"k"] * 2000), "value": pa.array([b"x" * 100] * 2000)})
    write(topic, [rb])
    with compactlog.open(topic) as cl:
        sizes = [b.size for p in range(3) for b in cl.log("t", p).batches(0)]
    assert len(sizes) > 1 and max(sizes) < 2 * BATCH_BYTES
    assert sum(sizes) > 2000 * 100


def test_the_batch_size_is_the_producers_kafka_batch_size_option(topic):
    rb = pa.record_batch({"key": pa.array([b"k"] * 2000), "value": pa.array([b"x" * 100] * 2000)})
    write(topic, [rb], **{"kafka.batch.size": "100000"})
    write(topic, [rb.slice(0, 5)], **{"kafka.batch.size": "0"})  # 0: no batching, one record per batch
    with compactlog.open(topic) as cl:
        p = next(p for p in range(3) if cl.log("t", p).log_end_offset)
        batches = list(cl.log("t", p).batches(0))
    big, single = batches[:-5], batches[-5:]
    assert 2 <= len(big) <= 3 and max(b.size for b in big) > 80_000
    assert [b.record_count for b in single] == [1] * 5
    with pytest.raises(InvalidRequestError, match='"kafka.batch.size" must be a number of bytes'):
        options(topic, **{"kafka.batch.size": "16k"})
    with pytest.raises(InvalidRequestError, match="from 0 to 2147483647, not '3000000000'"):
        options(topic, **{"kafka.batch.size": "3000000000"})  # the producer's batch.size is an int


def test_explicit_partitions_null_keys_and_timestamps(topic):
    t0 = dt.datetime(2024, 5, 1, 12, 0, 0, 123000, tzinfo=dt.timezone.utc)
    rb = pa.record_batch({
        "key": pa.array([None, b"a", None, None], pa.binary()),
        "value": pa.array([b"0", b"1", b"2", b"3"]),
        "partition": pa.array([2, 0, None, None], pa.int32()),
        "timestamp": pa.array([t0, None, t0, t0], pa.timestamp("us", tz="UTC")),
    })
    before = int(dt.datetime.now(dt.timezone.utc).timestamp() * 1000)
    write(topic, [rb])
    got = {r.value: r for r in records(topic)}
    assert got[b"0"].partition == 2 and got[b"1"].partition == 0
    assert got[b"2"].partition == got[b"3"].partition  # keyless rows of one Arrow batch stay together
    ms = int(t0.timestamp() * 1000)
    assert got[b"0"].timestamp == got[b"2"].timestamp == ms
    assert got[b"1"].timestamp >= before  # a null timestamp is the time of writing


def test_a_topic_column_routes_rows_and_the_topic_option_overrides_it(topic):
    rb = pa.record_batch({"key": ["a", "b", "c"], "value": ["1", "2", "3"], "topic": ["t", "u", "t"]})
    write(topic, [rb], topic=None)
    assert sorted(r.value for r in records(topic, "t")) == [b"1", b"3"]
    assert [r.value for r in records(topic, "u")] == [b"2"]
    write(topic, [rb], topic="u")
    assert sorted(r.value for r in records(topic, "u")) == [b"1", b"2", b"2", b"3"]


def test_headers_with_null_lists_empty_lists_and_sliced_batches(topic):
    hdrs = pa.array([[{"key": "trace", "value": b"x"}, {"key": "ü", "value": None}], None, [],
                     [{"key": "h", "value": b"4"}]], HEADERS)
    rb = pa.record_batch({"key": ["a"] * 4, "value": ["0", "1", "2", "3"], "headers": hdrs})
    write(topic, [rb.slice(1, 3), rb.slice(0, 1)])
    got = [(r.value, r.headers) for r in records(topic)]
    assert got == [(b"1", ()), (b"2", ()), (b"3", (("h", b"4"),)), (b"0", (("trace", b"x"), ("ü", None)))]


def test_bad_rows_are_named_and_nothing_is_appended(topic):
    with pytest.raises(UnknownTopicOrPartitionError, match="Partition 3 of topic 't' does not exist"):
        write(topic, [pa.record_batch({"value": ["a"], "partition": pa.array([3], pa.int32())})])
    with pytest.raises(UnknownTopicOrPartitionError, match="Partition -1 does not exist"):
        write(topic, [pa.record_batch({"value": ["a"], "partition": pa.array([-1], pa.int32())})])
    with pytest.raises(UnknownTopicOrPartitionError, match="Topic 'nope' does not exist"):
        write(topic, [pa.record_batch({"value": ["a"]})], topic="nope")
    with pytest.raises(InvalidRequestError, match="needs a value column"):
        write(topic, [pa.record_batch({"key": ["a"]})])
    with pytest.raises(InvalidRequestError, match="no topic"):
        write(topic, [pa.record_batch({"value": ["a"]})], topic=None)
    assert records(topic) == [] and records(topic, "u") == []


@pytest.mark.parametrize("cut", ["batch", "entry header", "topic length"])
def test_a_torn_staging_file_is_named_and_nothing_is_appended(topic, cut):
    opts = options(topic)
    rb = pa.record_batch({"key": [f"k{i}" for i in range(500)], "value": ["v" * 100] * 500})
    paths = stage_batches(opts, iter([rb])) + stage_batches(opts, iter([rb]))
    with open(paths[1], "r+b") as f:
        if cut == "batch":
            f.truncate(f.seek(0, 2) - 10)
        else:  # a second entry torn inside its header, or inside the int32 of its topic's length
            f.seek(0, 2)
            f.write(open(paths[0], "rb").read()[: 9 if cut == "entry header" else 2])
    with pytest.raises(InvalidRequestError, match="ends inside an entry"):
        append_staged(opts, paths)
    assert records(topic) == []
    assert not [p for p in (topic / "__staging").rglob("*") if p.is_file()], "the staging files are removed either way"


def test_a_bad_row_fails_its_task_and_leaves_no_staging_file(tmp_path):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("c", 1, {"cleanup.policy": "compact"})
    rb = pa.record_batch({"key": pa.array([b"k", None]), "value": ["1", "2"]})
    with pytest.raises(InvalidRecordError, match="Compacted topic cannot accept message without key"):
        stage_batches(options(tmp_path, "c"), iter([pa.record_batch({"key": ["a"], "value": ["0"]}), rb]))
    assert not list((tmp_path / "__staging").rglob("*.batches")), "the file with the task's first, valid batch is gone too"


def test_an_abort_removes_the_files_of_tasks_that_sent_no_message(topic):
    from compactlog.spark.source import CompactLogWriter

    writer = CompactLogWriter({"path": str(topic), "topic": "t"}, False)
    rb = pa.record_batch({"key": ["a"], "value": ["1"]})
    stage_batches(writer.wopts, iter([rb]))  # a task Spark killed after it staged: its message is lost
    writer.abort([])
    assert not list((topic / "__staging").iterdir())
    with pytest.raises(InvalidRequestError, match="was aborted"):
        stage_batches(writer.wopts, iter([rb]))  # a killed task that stages only after the abort
    assert not list((topic / "__staging").iterdir()), "it does not bring the directory back"
    assert records(topic) == []


def test_a_config_change_between_staging_and_commit_is_checked_before_appending(topic):
    opts = options(topic)
    good = stage_batches(opts, iter([pa.record_batch({"key": ["a"], "value": ["1"]})]))
    keyless = stage_batches(opts, iter([pa.record_batch({"value": ["2"]})]))
    with compactlog.open(topic) as cl:
        cl.alter_topic_config("t", set={"cleanup.policy": "compact"})
    with pytest.raises(InvalidRecordError, match="Compacted topic cannot accept message without key"):
        append_staged(opts, good + keyless)
    assert records(topic) == [], "the valid batch staged first was not appended either"


def test_a_timestamp_that_aged_past_the_window_while_staged_is_refused(topic):
    from compactlog.records.batch import build_batch
    from compactlog.staged_appends import staged_entry

    with compactlog.open(topic) as cl:
        cl.alter_topic_config("t", set={"message.timestamp.before.max.ms": "60000"})
        fingerprint = cl.log("t", 0).config.fingerprint()
    old = int(dt.datetime.now(dt.timezone.utc).timestamp() * 1000) - 120_000
    opts = options(topic)
    path = opts.staging.new_file(".batches")  # as a task that validated it two minutes ago would have left it
    path.write_bytes(staged_entry("t", 0, fingerprint, build_batch([b"k"], [b"v"], [old])))
    with pytest.raises(InvalidTimestampError, match="before the allowed window"):
        append_staged(opts, [str(path)])
    assert records(topic) == []


def test_batches_fit_a_topic_with_small_segments_and_a_row_too_large_fails_its_task(tmp_path):
    """Tasks cut with the producer plan, which knows the topic's segment.bytes: 16 KB batches would pass
    the tasks' checks and then be refused by the log at commit."""
    from compactlog.errors import RecordBatchTooLargeError

    with compactlog.open(tmp_path) as cl:
        cl.create_topic("small", 1, {"segment.bytes": "1000"})
    rb = pa.record_batch({"key": [f"k{i}" for i in range(100)], "value": [f"{i:03d}" + "x" * 97 for i in range(100)]})
    assert write(tmp_path, [rb], topic="small") == 100
    with compactlog.open(tmp_path) as cl:
        sizes = [b.size for seg in cl.log("small").segments for _, b in seg.batches(0)]
    assert len(sizes) > 10 and max(sizes) <= 1000
    assert [r.value for r in records(tmp_path, "small")] == rb.column("value").cast(pa.binary()).to_pylist()
    big = pa.record_batch({"key": ["a", "b"], "value": ["x", "y" * 2000]})
    with pytest.raises(RecordBatchTooLargeError, match="exceeds the maximum configured segment size of 1000"):
        stage_batches(options(tmp_path, "small"), iter([big]))
    assert not list((tmp_path / "__staging").rglob("*.batches"))
    assert len(records(tmp_path, "small")) == 100


def test_keyless_rows_stick_to_one_partition_across_arrow_batches(topic):
    """One task is one producer: its keyless rows fill the sticky partition until batch.size bytes went
    to it (Kafka's KIP-794 partitioner), whatever Arrow batches they come in."""
    small = [pa.record_batch({"value": [f"{i}-{j}" for j in range(3)]}) for i in range(10)]
    write(topic, small)
    assert len({r.partition for r in records(topic)}) == 1
    big = [pa.record_batch({"value": ["x" * 100] * 1000}) for _ in range(4)]  # 450 KB: about 14 stays
    write(topic, big)
    assert len({r.partition for r in records(topic)}) > 1


@pytest.mark.parametrize("binary", [pa.binary(), pa.large_binary(), pa.string(), pa.large_string()])
def test_rows_are_encoded_from_sliced_columns_with_nulls_and_empty_bytes(topic, binary):
    """Rows are encoded straight from Arrow's buffers: a sliced batch (its columns start inside their
    buffers), null keys and values (tombstones), empty ones, and every binary or string type keep each
    row's own bytes, in order."""
    text = pa.types.is_string(binary) or pa.types.is_large_string(binary)
    raw_keys = [b"skipped", None, b"", b"k-two", b"k3", None, b"tail"]
    raw_values = [b"skipped", b"v1", None, b"", b"v" * 300, b"v5", b"tail"]
    conv = (lambda v: None if v is None else v.decode()) if text else (lambda v: v)
    rb = pa.record_batch({"key": pa.array([conv(k) for k in raw_keys], binary),
                          "value": pa.array([conv(v) for v in raw_values], binary),
                          "partition": pa.array([0] * len(raw_keys), pa.int32())})
    assert write(topic, [rb.slice(1, 5)]) == 5  # rows 1..5: the first and the last are outside the slice
    got = records(topic)
    assert [(r.offset, r.key, r.value) for r in got] == list(zip(range(5), raw_keys[1:6], raw_values[1:6]))


def test_fixed_size_and_view_columns_are_cast_and_other_types_are_refused_by_name(topic):
    rb = pa.record_batch({"key": pa.array([b"ab", b"cd"], pa.binary(2)),
                          "value": pa.array([b"x" * 20, b"y"], pa.binary_view()),
                          "partition": pa.array([1, 1], pa.int32())})
    assert write(topic, [rb]) == 2
    assert [(r.key, r.value) for r in records(topic)] == [(b"ab", b"x" * 20), (b"cd", b"y")]
    bad = pa.record_batch({"key": pa.array([b"a"]), "value": pa.array([7], pa.int64())})
    with pytest.raises(InvalidRequestError, match="the value column of a DataFrame written to compactlog must be "
                                                  "binary or string, not int64"):
        write(topic, [bad])
    assert len(records(topic)) == 2


def test_a_null_header_key_is_refused_by_name(topic):
    rb = pa.record_batch({"value": pa.array([b"1"]), "partition": pa.array([0], pa.int32()),
                          "headers": pa.array([[{"key": None, "value": b"x"}]], HEADERS)})
    with pytest.raises(InvalidRequestError, match="a header in the headers column has a null key"):
        write(topic, [rb])
    assert records(topic) == []


def test_a_headers_column_of_another_list_layout_is_cast_and_a_non_list_is_refused(topic):
    pair = pa.struct([("key", pa.string()), ("value", pa.binary())])
    fixed = pa.array([[{"key": "a", "value": b"1"}], [{"key": "b", "value": None}]], pa.list_(pair, 1))
    rb = pa.record_batch({"value": pa.array([b"x", b"y"]), "partition": pa.array([0, 0], pa.int32()), "headers": fixed})
    assert write(topic, [rb]) == 2
    assert [list(r.headers) for r in records(topic)] == [[("a", b"1")], [("b", None)]]
    for headers in (pa.array(["a=1"]), pa.array([[{"key": "a", "value": b"1"}]], pa.list_view(pair))):
        bad = pa.record_batch({"value": pa.array([b"z"]), "headers": headers})
        with pytest.raises(InvalidRequestError, match="the headers column .* must be an array of \\(key, value\\) structs"):
            write(topic, [bad])


def test_a_staged_batch_damaged_after_its_task_checked_it_is_named_and_nothing_is_appended(topic):
    """A batch that passed in its task is not walked again at the commit, but its CRC is checked there,
    before anything is appended: a flipped byte in the second file's last batch fails the whole job."""
    opts = options(topic)
    rb = pa.record_batch({"key": [f"k{i}" for i in range(500)], "value": ["v" * 100] * 500})
    paths = stage_batches(opts, iter([rb])) + stage_batches(opts, iter([rb]))
    with open(paths[1], "r+b") as f:
        end = f.seek(0, 2)
        f.seek(end - 20)
        byte = f.read(1)
        f.seek(end - 20)
        f.write(bytes([byte[0] ^ 0x01]))
    with pytest.raises(CorruptRecordError, match="the batch staged for t-.* is damaged: batch at offset 0 is corrupt .stored crc"):
        append_staged(opts, paths)
    assert records(topic) == []


@pytest.mark.parametrize("field", ["topic length", "topic", "partition", "fingerprint"])
def test_a_flipped_byte_in_a_staged_entrys_header_is_named_and_nothing_is_appended(topic, field):
    """The entry header (topic, partition, fingerprint) lies outside the batch's CRC: a flipped partition
    byte would send a batch to another partition that exists, so the header has a checksum of its own."""
    opts = options(topic)
    rb = pa.record_batch({"key": ["k"], "value": ["v"], "partition": pa.array([0], pa.int32())})
    paths = stage_batches(opts, iter([rb])) + stage_batches(opts, iter([rb]))
    at = {"topic length": 3, "topic": 4, "partition": 8, "fingerprint": 9}[field]  # topic "t": 4 + 1 bytes
    with open(paths[1], "r+b") as f:
        f.seek(at)
        byte = f.read(1)[0]
        f.seek(at)
        f.write(bytes([byte ^ 0x01]))  # partition 0 -> 1, which exists
    with pytest.raises(InvalidRequestError, match="staging file .* entry at position 0 is damaged|ends inside an entry"):
        append_staged(opts, paths)
    assert records(topic) == []
