"""``dump-log``'s other flags as Kafka 3.7's DumpLogSegments takes them: ``--skip-record-metadata``,
``--max-bytes``, ``--max-message-size``, ``--verify-index-only``, ``--index-sanity-check`` and the decoder
classes (``kafka.serializer.StringDecoder`` only). The expected lines are built as Kafka's ``dumpLog``,
``dumpIndex`` and ``dumpTimeIndex`` print them, and its indexes' ``sanityCheck`` words them."""

from __future__ import annotations

import struct
from pathlib import Path

from click.testing import CliRunner

import compactlog
from compactlog.cli import main


def run(*args: str):
    return CliRunner().invoke(main, ["dump-log", *args])


def segment(data: Path, suffix: str = ".log") -> Path:
    return data / "t-0" / f"{0:020d}{suffix}"


def small_log(data: Path) -> Path:
    with compactlog.open(data) as cl:
        cl.create_topic("t", 1)
        cl.produce_batch("t", [(b"k", b"v"), (None, b"w"), (b"j", None), (None, None)], timestamp=1000)
        cl.produce_batch("t", [(b"k2", b"v2")], timestamp=1001)
    return segment(data)


def big_log(data: Path) -> Path:
    with compactlog.open(data) as cl:
        cl.create_topic("t", 1)
        for i in range(6):
            cl.produce_batch("t", [(b"k%d" % j, b"x" * 100) for j in range(300)], timestamp=1000 + i)
    return segment(data)


def test_skip_record_metadata_prints_only_keys_and_values_as_kafka_joins_them(tmp_path):
    log = small_log(tmp_path)
    res = run("--files", str(log), "--print-data-log", "--skip-record-metadata")
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0] == f"Dumping {log}" and lines[1] == "Log starting offset: 0"
    assert lines[2].startswith("baseOffset: 0 lastOffset: 3 count: 4 ")
    # Kafka prints "| key: k" then " payload: v"; without a key its line starts " payload: "
    assert lines[3:7] == ["| key: k payload: v", " payload: w", "| key: j", ""]
    assert lines[7].startswith("baseOffset: 4 lastOffset: 4 count: 1 ") and lines[8] == "| key: k2 payload: v2"
    metadata_only = run("--files", str(log), "--deep-iteration", "--skip-record-metadata")
    assert metadata_only.stdout.splitlines()[3:7] == ["", "", "", ""]


def test_max_bytes_reads_only_the_batches_within_it_and_says_nothing_of_the_rest(tmp_path):
    log = small_log(tmp_path)
    whole = run("--files", str(log)).stdout.splitlines()
    first_size = int(whole[2].split(" size: ")[1].split()[0])
    for limit, batches in ((first_size, 1), (first_size - 1, 0), (log.stat().st_size, 2), (0, 0)):
        res = run("--files", str(log), "--max-bytes", str(limit))
        assert res.exit_code == 0, res.output
        assert res.stdout.splitlines() == whole[:2 + batches]
    log.write_bytes(log.read_bytes() + b"\0" * 7)  # a torn tail: reported only when the whole file is read
    assert run("--files", str(log)).stdout.splitlines()[-1] == f"Found 7 invalid bytes at the end of {log.name}"
    assert "invalid bytes" not in run("--files", str(log), "--max-bytes", str(first_size)).stdout


def test_numbers_out_of_range_are_one_line(tmp_path):
    log = small_log(tmp_path)
    for flag, value in (("--max-bytes", "-1"), ("--max-message-size", "9" * 5000), ("--max-bytes", "x")):
        res = run("--files", str(log), flag, value)
        assert res.exit_code == 2 and "Traceback" not in res.output and flag in res.output
        assert len(res.output) < 600


def test_decoder_classes_take_kafkas_string_decoder_only(tmp_path):
    log = small_log(tmp_path)
    data = run("--files", str(log), "--print-data-log").stdout
    for args in (("--value-decoder-class", "kafka.serializer.StringDecoder"), ("--key-decoder-class",),
                 ("--value-decoder-class",)):  # the class may be left out (Kafka's optional argument)
        res = run("--files", str(log), *args)
        assert res.exit_code == 0, res.output
        assert res.stdout == data  # any decoder option prints the data, as in Kafka
    res = run("--files", str(log), "--key-decoder-class", "kafka.serializer.DefaultDecoder")
    assert res.exit_code == 2
    assert ("'kafka.serializer.DefaultDecoder' is not available; the one decoder class is "
            "kafka.serializer.StringDecoder") in res.output and "--key-decoder-class" in res.output


def test_verify_index_only_checks_without_printing_entries(tmp_path):
    log = big_log(tmp_path)
    index, time_index = log.with_suffix(".index"), log.with_suffix(".timeindex")
    raw = bytearray(index.read_bytes())
    rel, pos = struct.unpack_from(">ii", raw, 8)
    struct.pack_into(">ii", raw, 8, rel - 1, pos)  # the second entry misses its batch's last offset
    index.write_bytes(bytes(raw))
    res = run("--files", f"{index},{time_index}", "--verify-index-only")
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines() == [f"Dumping {index}", f"Dumping {time_index}"]
    assert res.stderr.splitlines() == [f"Mismatches in :{index.absolute()}", f"  Index offset: {rel - 1}, log offset: {rel}"]
    printed = run("--files", str(index))
    assert f"offset: {rel - 1} position: {pos}" in printed.stdout


def test_index_sanity_check_passes_or_fails_in_kafkas_words(tmp_path):
    log = big_log(tmp_path)
    index, time_index = log.with_suffix(".index"), log.with_suffix(".timeindex")
    res = run("--files", f"{index},{time_index}", "--index-sanity-check")
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines() == [f"Dumping {index}", f"{index} passed sanity check.",
                                       f"Dumping {time_index}", f"{time_index} passed sanity check."]
    empty = tmp_path / "e" / f"{5:020d}.index"
    empty.parent.mkdir()
    empty.write_bytes(b"")
    assert run("--files", str(empty), "--index-sanity-check").stdout.splitlines()[1] == f"{empty} is empty."

    torn = index.read_bytes() + b"\0"
    index.write_bytes(torn)
    res = run("--files", str(index), "--index-sanity-check")
    assert res.exit_code == 1
    assert res.output.splitlines()[-1] == (f"Error: Index file {index.absolute()} is corrupt, found {len(torn)} bytes "
                                           "which is neither positive nor a multiple of 8")
    index.write_bytes(torn[:-1] + b"\xff\xff\xff\xf0\0\0\0\0")  # a last relative offset of -16
    res = run("--files", str(index), "--index-sanity-check")
    assert res.output.splitlines()[-1] == (f"Error: Corrupt index found, index file {index.absolute()} has non-zero "
                                           "size but the last offset is -16 which is less than the base offset 0")

    raw = time_index.read_bytes()
    first_ts = struct.unpack_from(">q", raw, 0)[0]
    time_index.write_bytes(raw + struct.pack(">qi", first_ts - 1, 1))
    res = run("--files", str(time_index), "--index-sanity-check")
    assert res.exit_code == 1
    assert res.output.splitlines()[-1] == (f"Error: Corrupt time index found, time index file ({time_index.absolute()}) "
                                           f"has non-zero size but the last timestamp is {first_ts - 1} which is less "
                                           f"than the first timestamp {first_ts}")


def test_max_message_size_bounds_the_batch_an_index_entry_points_at(tmp_path):
    log = big_log(tmp_path)
    index = log.with_suffix(".index")
    assert run("--files", str(index)).exit_code == 0  # Kafka's default, 5 MiB
    res = run("--files", str(index), "--max-message-size", "100")
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert "more than the largest message size 100 (raise --max-message-size)" in res.output.splitlines()[-1]
