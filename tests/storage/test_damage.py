"""Damaged data directories: torn tails, flipped bits, hand-edited checkpoints, missing segments.

Each test damages real files the way a crash, a disk or a person does, reopens the directory and checks
the two promises: nothing acknowledged is lost (or, when the damage destroyed it, no offset is handed
out twice), and nothing corrupt is served.
"""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path

import pytest

import compactlog
from compactlog.errors import CompactLogError, CorruptRecordError, OffsetOutOfRangeError

T = "t"


def _fill(d: Path, n: int, segment_bytes: int | None = None, compact: bool = False) -> list[int]:
    """Create topic t (one partition) holding records v0..v{n-1}, one record per batch; closes cleanly."""
    config = {"cleanup.policy": "compact" if compact else "delete"}
    if segment_bytes:
        config["segment.bytes"] = str(segment_bytes)
    with compactlog.open(d) as cl:
        cl.create_topic(T, 1, config)
        return [cl.produce(T, b"v%d" % i, key=b"k%d" % i).offset for i in range(n)]


def _segments(d: Path) -> list[Path]:
    return sorted((d / f"{T}-0").glob("*.log"))


def _values(cl) -> list[tuple[int, bytes]]:
    return [(r.offset, r.value) for r in cl.consume(T, from_beginning=True)]


def _unclean(d: Path) -> None:
    (d / ".kafka_cleanshutdown").unlink()


# -- torn tails ------------------------------------------------------------------------------------
def test_torn_tail_after_a_clean_shutdown_is_cut_before_appending(tmp_path):
    _fill(tmp_path, 3)
    with open(_segments(tmp_path)[-1], "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x07\x00\x00\x01\x00garbage")  # a batch that never finished
    with compactlog.open(tmp_path) as cl:
        assert cl.end_offsets(T) == {0: 3}
        assert cl.produce(T, b"v3", key=b"k3").offset == 3
    with compactlog.open(tmp_path) as cl:
        assert _values(cl) == [(i, b"v%d" % i) for i in range(4)]


def test_garbage_after_the_last_batch_with_a_clean_marker(tmp_path):
    _fill(tmp_path, 1)
    with open(_segments(tmp_path)[-1], "ab") as f:
        f.write(os.urandom(5) + b"\xff" * 40)
    with compactlog.open(tmp_path) as cl:
        assert cl.produce(T, b"v1", key=b"k1").offset == 1
    with compactlog.open(tmp_path) as cl:
        assert _values(cl) == [(0, b"v0"), (1, b"v1")]


# -- offsets that do not follow ------------------------------------------------------------------------
def test_flipped_base_offset_bit_after_unclean_shutdown(tmp_path):
    _fill(tmp_path, 3)
    seg = _segments(tmp_path)[-1]
    raw = bytearray(seg.read_bytes())
    size = len(raw) // 3
    last = 2 * size
    raw[last + 7] ^= 0x01  # baseOffset 2 -> 3: outside the CRC, so only the offsets give it away
    raw[last + 5] ^= 0x10  # and a high bit, so it is far from the batches around it
    seg.write_bytes(bytes(raw))
    _unclean(tmp_path)
    with compactlog.open(tmp_path) as cl:
        # The batch whose offsets jump held offset 2, which was flushed (the recovery point says so): it
        # is no torn write, so it is kept and reported, never cut, and offset 2 is not handed out again.
        assert cl.end_offsets(T)[0] == 3
        assert cl.produce(T, b"new", key=b"k").offset == 3
        with pytest.raises(CorruptRecordError, match=r"t-0: batch offsets \d+\.\.\d+ jump from offset 1 .*position"):
            _values(cl)
        got = [(r.offset, r.value) for r in cl.consume(T, partition=0, offset=0, max_records=2)]
        assert got + [(r.offset, r.value) for r in cl.consume(T, partition=0, offset=3)] == [
            (0, b"v0"), (1, b"v1"), (3, b"new")]
    with compactlog.open(tmp_path) as cl:  # close() succeeded and the acknowledged record is kept
        assert [(r.offset, r.value) for r in cl.consume(T, partition=0, offset=3)] == [(3, b"new")]


def test_batch_offsets_going_backwards_in_the_middle_are_not_served(tmp_path):
    _fill(tmp_path, 4)
    seg = _segments(tmp_path)[-1]
    raw = bytearray(seg.read_bytes())
    size = len(raw) // 4
    struct.pack_into(">q", raw, 2 * size, 0)  # batch 2 claims offset 0
    seg.write_bytes(bytes(raw))
    with compactlog.open(tmp_path) as cl:
        with pytest.raises(CorruptRecordError, match=r"t-0.*offset"):
            _values(cl)


# -- corruption in the middle is never cut away --------------------------------------------------------
def test_a_corrupt_batch_in_an_older_segment_is_kept_and_reported(tmp_path, caplog):
    _fill(tmp_path, 40, segment_bytes=400)
    segs = _segments(tmp_path)
    assert len(segs) > 3
    victim = segs[1]
    raw = bytearray(victim.read_bytes())
    raw[-3] ^= 0xFF  # inside a value: the CRC fails
    victim.write_bytes(bytes(raw))
    _unclean(tmp_path)
    (tmp_path / "recovery-point-offset-checkpoint").write_text("0\n1\nt 0 0\n")
    with caplog.at_level(logging.WARNING):
        with compactlog.open(tmp_path) as cl:
            assert cl.end_offsets(T) == {0: 40}  # nothing after the damage was dropped
            assert cl.produce(T, b"v40", key=b"k40").offset == 40
            with pytest.raises(CorruptRecordError, match=r"t-0/0+\d+\.log position \d+"):
                _values(cl)
    assert "corrupt" in caplog.text
    assert [p.name for p in _segments(tmp_path)][: len(segs)] == [p.name for p in segs]


# -- checkpoints that contradict the log --------------------------------------------------------------
def test_log_start_checkpoint_beyond_the_end_is_ignored(tmp_path, caplog):
    _fill(tmp_path, 30)
    (tmp_path / "log-start-offset-checkpoint").write_text("0\n1\nt 0 50\n")
    with caplog.at_level(logging.WARNING):
        with compactlog.open(tmp_path) as cl:
            assert cl.beginning_offsets(T) == {0: 0}
            assert len(_values(cl)) == 30
    assert "log-start-offset-checkpoint" in caplog.text


def test_recovery_point_beyond_the_end_keeps_offsets_unique(tmp_path, caplog):
    _fill(tmp_path, 30, segment_bytes=400)
    segs = _segments(tmp_path)
    last_base = int(segs[-1].name.split(".")[0])
    for p in (tmp_path / f"{T}-0").glob(f"{last_base:020d}.*"):
        p.unlink()  # the active segment deleted by hand
    with caplog.at_level(logging.WARNING):
        with compactlog.open(tmp_path) as cl:
            assert cl.end_offsets(T) == {0: 30}  # no offset below 30 is handed out again
            assert cl.produce(T, b"after", key=b"k").offset == 30
    assert "missing" in caplog.text


def test_a_segment_deleted_from_the_middle_is_reported(tmp_path, caplog):
    _fill(tmp_path, 30, segment_bytes=400)
    segs = _segments(tmp_path)
    for p in (tmp_path / f"{T}-0").glob(segs[1].name.replace(".log", ".*")):
        p.unlink()
    with caplog.at_level(logging.WARNING):
        with compactlog.open(tmp_path) as cl:
            assert cl.end_offsets(T) == {0: 30}
    assert "missing" in caplog.text


def test_garbage_checkpoint_files_are_named(tmp_path):
    _fill(tmp_path, 3)
    (tmp_path / "recovery-point-offset-checkpoint").write_bytes(b"\xff\xfe garbage \x00")
    (tmp_path / "log-start-offset-checkpoint").write_text("0\n2\nt 0 1\n")  # says 2 entries, has 1
    with compactlog.open(tmp_path) as cl:  # checkpoints are hints: ignored with a warning, the log is the truth
        assert _values(cl) == [(i, b"v%d" % i) for i in range(3)]


def test_garbage_index_with_a_clean_marker(tmp_path):
    _fill(tmp_path, 200, segment_bytes=100_000)
    idx = _segments(tmp_path)[-1].with_suffix(".index")
    # Offsets rise and no position is beyond the log, so a size-only check lets it through; the
    # positions are negative, which made reads fail with EINVAL.
    idx.write_bytes(struct.pack(">ii", 100, -5000) + struct.pack(">ii", 150, -10))
    tidx = idx.with_suffix(".timeindex")
    tidx.write_bytes(os.urandom(24))
    with compactlog.open(tmp_path) as cl:
        assert len(_values(cl)) == 200
        assert [r.offset for r in cl.consume(T, partition=0, offset=150)][:1] == [150]


def test_garbled_topic_metadata_is_named(tmp_path):
    _fill(tmp_path, 3)
    (tmp_path / "__topics" / f"{T}.json").write_bytes(b"{\"name\": \"t\", \xff")
    with pytest.raises(CompactLogError, match=r"__topics/t\.json"):
        compactlog.open(tmp_path)
    # the failed open released the directory's lock: a fixed directory opens
    (tmp_path / "__topics" / f"{T}.json").unlink()
    compactlog.open(tmp_path).close()


# -- truncation ---------------------------------------------------------------------------------------
def test_truncate_to_a_negative_offset_is_refused(tmp_path):
    _fill(tmp_path, 3)
    with compactlog.open(tmp_path) as cl:
        with pytest.raises(OffsetOutOfRangeError):
            cl.truncate(T, 0, -5)
        assert cl.end_offsets(T) == {0: 3}
        assert cl.produce(T, b"v3").offset == 3
