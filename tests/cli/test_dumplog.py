"""``dump-log`` prints what Kafka's DumpLogSegments prints, on segments compactlog wrote.

The expected lines are taken from Kafka 4.0's ``core/src/main/scala/kafka/tools/DumpLogSegments.scala``:
``dumpLog`` (record lines, ``key:`` / ``payload:`` only when present, ``sequence:`` from the record),
``dumpIndex`` (``<file> is empty.``, index entries checked against the log), ``dumpTimeIndex`` and
``main`` (what the checks found, on standard error after every file).
"""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner

import compactlog
from compactlog.cli import main
from compactlog.records.batch import BatchInfo, build_batch

SEGMENT = "0" * 20


def dump(*paths: Path, flags: tuple[str, ...] = ("--print-data-log",)):
    res = CliRunner().invoke(main, ["dump-log", "--files", ",".join(map(str, paths)), *flags])
    assert res.exit_code == 0, res.output
    return res


def records_of(res) -> list[str]:
    return [line for line in res.stdout.splitlines() if line.startswith("| ")]


def log_file(data: Path, topic: str, base: int = 0, suffix: str = ".log") -> Path:
    return data / f"{topic}-0" / f"{base:020d}{suffix}"


def test_a_null_key_or_value_leaves_its_field_out(tmp_path):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1)
        cl.produce_batch("t", [(None, b"v"), (b"k", None), (None, None), (b"k", b"v")], timestamp=1000)
    assert records_of(dump(log_file(tmp_path, "t"))) == [
        "| offset: 0 CreateTime: 1000 keySize: -1 valueSize: 1 sequence: -1 headerKeys: [] payload: v",
        "| offset: 1 CreateTime: 1000 keySize: 1 valueSize: -1 sequence: -1 headerKeys: [] key: k",
        "| offset: 2 CreateTime: 1000 keySize: -1 valueSize: -1 sequence: -1 headerKeys: []",
        "| offset: 3 CreateTime: 1000 keySize: 1 valueSize: 1 sequence: -1 headerKeys: [] key: k payload: v",
    ]


def test_each_record_shows_its_sequence(tmp_path):
    """baseSequence + offset delta, wrapping past Integer.MAX_VALUE to 0; -1 in a batch without one."""
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1)
        idempotent = BatchInfo(producer_id=7, producer_epoch=0, base_sequence=2**31 - 2)
        cl.append_batch("t", 0, build_batch([b"a", b"b", b"c"], [b"1", b"2", b"3"], [5, 5, 5], info=idempotent))
        cl.append_batch("t", 0, build_batch([b"d"], [b"4"], [6]))
    out = dump(log_file(tmp_path, "t"))
    assert "baseOffset: 0 lastOffset: 2 count: 3 baseSequence: 2147483646 lastSequence: 0 producerId: 7" in out.stdout
    assert records_of(out) == [
        "| offset: 0 CreateTime: 5 keySize: 1 valueSize: 1 sequence: 2147483646 headerKeys: [] key: a payload: 1",
        "| offset: 1 CreateTime: 5 keySize: 1 valueSize: 1 sequence: 2147483647 headerKeys: [] key: b payload: 2",
        "| offset: 2 CreateTime: 5 keySize: 1 valueSize: 1 sequence: 0 headerKeys: [] key: c payload: 3",
        "| offset: 3 CreateTime: 6 keySize: 1 valueSize: 1 sequence: -1 headerKeys: [] key: d payload: 4",
    ]


def test_an_empty_offset_index_says_so(tmp_path):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1)
    index, time_index = log_file(tmp_path, "t", suffix=".index"), log_file(tmp_path, "t", suffix=".timeindex")
    assert index.stat().st_size == 0 and time_index.stat().st_size == 0
    assert dump(index).output == f"Dumping {index}\n{index} is empty.\n"
    assert dump(time_index).output == f"Dumping {time_index}\n"  # Kafka has no such line for a time index


def test_deep_iteration_prints_records_and_only_print_data_log_their_keys_and_values(tmp_path):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1)
        cl.produce_batch("t", [(b"k%d" % i, b"v%d" % i) for i in range(3)], timestamp=7)
    seg = log_file(tmp_path, "t")
    deep = dump(seg, flags=("--deep-iteration",))
    assert records_of(deep) == [f"| offset: {i} CreateTime: 7 keySize: 2 valueSize: 2 sequence: -1 headerKeys: []"
                                for i in range(3)]
    both = dump(seg, flags=("--deep-iteration", "--print-data-log"))
    assert records_of(both) == records_of(dump(seg)) == [line + f" key: k{i} payload: v{i}"
                                                         for i, line in enumerate(records_of(deep))]
    shallow = dump(seg, flags=())
    assert records_of(shallow) == [] and shallow.stdout.count("baseOffset: ") == 1


def test_keys_and_values_that_are_not_utf8_read_with_replacement_characters(tmp_path):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1)
        cl.produce_batch("t", [(b"caf\xe9", b"\xff\xfeok \xe2\x82"), (b"\xe2\x82\xac", b"plain")], timestamp=1)
    assert [line.split(" headerKeys: [] ")[1] for line in records_of(dump(log_file(tmp_path, "t")))] == [
        "key: caf\ufffd payload: \ufffd\ufffdok \ufffd",
        "key: \u20ac payload: plain",
    ]


def compacted(data: Path, records: int, value_bytes: int = 10) -> Path:
    """A compacted topic ``c`` whose first segment was cleaned: latest values of random keys, with gaps."""
    rng = random.Random(3)
    with compactlog.open(data) as cl:
        cl.create_topic("c", 1, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})
        cl.produce_batch("c", [(b"k%d" % rng.randrange(records // 3), b"v%d-" % i + b"x" * value_bytes)
                               for i in range(records)])
        cl.log("c").roll()
        assert cl.clean("c").compactions
    return log_file(data, "c")


def test_gaps_that_cleaning_leaves_are_reported_with_deep_iteration(tmp_path):
    seg = compacted(tmp_path, 900)
    with compactlog.open(tmp_path) as cl:
        offsets = [r.offset for r in cl.consume("c", from_beginning=True)]
    gaps = [(a, b) for a, b in zip(offsets, offsets[1:]) if b != a + 1]
    assert gaps, "the cleaning left no gap to report"
    res = dump(seg, flags=("--deep-iteration",))
    assert res.stderr.splitlines() == [f"Non-consecutive offsets in {seg.absolute()}",
                                       *(f"  {a} is followed by {b}" for a, b in reversed(gaps))]  # last found first
    assert dump(seg, flags=()).stderr == ""  # records are only looked at with deep iteration


def index_entries(index: Path) -> list[tuple[int, int]]:
    raw = index.read_bytes()
    return [struct.unpack_from(">ii", raw, i) for i in range(0, len(raw), 8)]


def last_offset_at(log: Path, position: int) -> int:
    base_offset, _, _, _, _, _, last_offset_delta = struct.unpack_from(">qiibIhi", log.read_bytes(), position)
    return base_offset + last_offset_delta


def test_index_entries_of_a_cleaned_segment_that_miss_their_batch_are_reported(tmp_path):
    """The cleaner appends a chunk of batches at a time and indexes the chunk's last offset at its first
    batch's position, as Kafka's does; DumpLogSegments reports each such entry."""
    seg = compacted(tmp_path, 7000, value_bytes=100)
    index = seg.with_suffix(".index")
    found = [(rel, last_offset_at(seg, pos)) for rel, pos in index_entries(index)]
    mismatches = [(rel, log) for rel, log in found if rel != log]
    assert mismatches, "no index entry of the cleaned segment misses its batch"
    res = dump(index)
    assert res.stdout.splitlines()[1:] == [f"offset: {rel} position: {pos}" for rel, pos in index_entries(index)]
    assert res.stderr.splitlines() == [f"Mismatches in :{index.absolute()}",
                                       *(f"  Index offset: {i}, log offset: {lg}" for i, lg in reversed(mismatches))]


def test_segments_as_the_log_appends_them_pass_every_check(tmp_path):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1)
        for i in range(6):
            cl.produce_batch("t", [(b"k%d" % j, b"x" * 100) for j in range(300)], timestamp=1000 + i)
    seg = log_file(tmp_path, "t")
    index, time_index = seg.with_suffix(".index"), seg.with_suffix(".timeindex")
    assert index.stat().st_size > 8 and time_index.stat().st_size > 12
    res = dump(seg, index, time_index, flags=("--deep-iteration",))
    assert res.stderr == ""


def test_time_index_entries_are_checked_against_the_log(tmp_path):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1)
        for i in range(6):
            cl.produce_batch("t", [(b"k%d" % j, b"x" * 100) for j in range(300)], timestamp=1000 + i)
    time_index = log_file(tmp_path, "t", suffix=".timeindex")
    raw = bytearray(time_index.read_bytes())
    assert len(raw) >= 3 * 12
    ts, rel = struct.unpack_from(">qi", raw, 12)
    struct.pack_into(">qi", raw, 12, ts, rel - 1)  # the second entry: an offset inside a batch
    last_ts, last_rel = struct.unpack_from(">qi", raw, len(raw) - 12)
    struct.pack_into(">qi", raw, len(raw) - 12, last_ts + 1, last_rel)  # the last: a later time than its batch's
    time_index.write_bytes(bytes(raw))
    res = dump(time_index)
    assert f"timestamp: {ts} offset: {rel - 1}" in res.stdout and f"timestamp: {last_ts + 1} offset: {last_rel}" in res.stdout
    assert res.stderr.splitlines() == [f"Found timestamp mismatch in :{time_index.absolute()}",
                                       f"  Index timestamp: {last_ts + 1}, log timestamp: {last_ts}",
                                       "The following indexed offsets are not found in the log.",
                                       f"Indexed offset: {rel - 1}, found log offset: {rel}"]


@pytest.mark.parametrize("flags", [(), ("--deep-iteration",), ("--print-data-log",)])
def test_an_index_without_its_log_is_printed_unchecked(tmp_path, flags):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1)
        cl.produce_batch("t", [(b"k%d" % j, b"x" * 100) for j in range(300)])
    index = log_file(tmp_path, "t", suffix=".index")
    alone = tmp_path / "alone" / index.name
    alone.parent.mkdir()
    alone.write_bytes(index.read_bytes())
    res = dump(alone, flags=flags)
    assert res.stdout.splitlines()[1:] == [f"offset: {rel} position: {pos}" for rel, pos in index_entries(alone)]
    assert res.stderr == ""
