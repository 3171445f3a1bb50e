"""``compactlog verify``: a read-only scrub that names each problem's file and position, and ``--repair``,
which fixes what recovery fixes and never cuts data from the middle of a log."""

from __future__ import annotations

import hashlib
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import compactlog
from compactlog.verify import repair, verify

T = "t"


def _digest(d: Path) -> dict[str, str]:
    return {str(p.relative_to(d)): hashlib.sha1(p.read_bytes()).hexdigest() for p in sorted(d.rglob("*"))
            if p.is_file() and p.name != ".lock"}


def _cli(d: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compactlog", "verify", "--data-dir", str(d), *args],
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def healthy(tmp_path):
    """Two topics over many segments and every codec, cleaned once and with a compacted view."""
    with compactlog.open(tmp_path) as cl:
        cl.create_topic(T, 2, {"segment.bytes": "3000", "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})
        cl.create_topic("plain", 1, {"segment.bytes": "500"})
        for i, codec in enumerate(["none", "gzip", "snappy", "lz4", "zstd"] * 4):
            cl.produce_batch(T, [(b"k%d" % (j % 13), b"v%d-%d" % (i, j), (("h", b"x"),)) for j in range(20)],
                             compression=codec, batch_bytes=300)
            cl.produce_batch("plain", [(None, b"p%d-%d" % (i, j)) for j in range(10)], compression=codec)
        assert cl.clean(T).compactions
        cl.compact_topic(T)
    return tmp_path


def _records(d: Path, topic: str = T) -> list[tuple[int, int, bytes]]:
    with compactlog.open(d) as cl:
        return [(r.partition, r.offset, r.value) for r in cl.consume(topic, from_beginning=True, check_crcs=False)]


def test_a_healthy_directory_has_no_problem_and_nothing_is_written(healthy):
    before = _digest(healthy)
    report = verify(healthy)
    assert report.problems == []
    by_name = {s.name: s for s in report.partitions}
    assert set(by_name) == {"t-0", "t-1", "plain-0"}
    with compactlog.open(healthy) as cl:
        ends = cl.end_offsets(T)
        count = sum(1 for _ in cl.consume(T, from_beginning=True))
    assert {by_name[f"t-{p}"].log_end_offset for p in (0, 1)} == set(ends.values())
    assert by_name["t-0"].records + by_name["t-1"].records >= count
    assert by_name["plain-0"].segments > 3
    assert _digest(healthy) == before
    out = _cli(healthy)
    assert out.returncode == 0 and "no problem found" in out.stdout


def test_a_corrupt_batch_in_the_middle_is_named_and_never_cut(healthy):
    seg = sorted((healthy / "plain-0").glob("*.log"))[1]
    raw = bytearray(seg.read_bytes())
    length = struct.unpack_from(">i", raw, 8)[0] + 12
    raw[length + 70] ^= 0x20  # inside the second batch's records
    seg.write_bytes(bytes(raw))
    report = verify(healthy)
    [p] = report.errors
    assert (p.where, p.position) == (f"plain-0/{seg.name}", length) and "crc" in p.what
    assert "kept in place" in p.repair
    logs = {k: v for k, v in _digest(healthy).items() if k.startswith("plain-0/") and k.endswith(".log")}
    out = _cli(healthy, "--repair")
    assert out.returncode == 1
    assert f"plain-0/{seg.name}" in out.stdout and "problems left after the repair" in out.stdout
    assert {k: v for k, v in _digest(healthy).items() if k in logs} == logs  # not a byte cut
    assert len(verify(healthy).errors) == 1


def test_a_torn_tail_is_cut_by_repair_and_every_sound_record_kept(healthy):
    seg = sorted((healthy / "plain-0").glob("*.log"))[-1]
    before = _records(healthy, "plain")
    size = seg.stat().st_size
    with open(seg, "ab") as f:
        f.write(b"\x00" * 8 + struct.pack(">i", 500) + b"a batch cut short by a crash")
    report = verify(healthy)
    [p] = report.errors
    assert (p.where, p.position) == (f"plain-0/{seg.name}", size)
    assert "partial batch" in p.what and "cut" in p.repair
    out = _cli(healthy, "--repair")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "every problem was repaired" in out.stdout
    assert verify(healthy).problems == []
    assert _records(healthy, "plain") == before


def test_garbled_indexes_and_checkpoints_are_rebuilt(healthy):
    before = _records(healthy)
    idx = sorted((healthy / "t-0").glob("*.index"))[0]
    idx.write_bytes(struct.pack(">ii", 3, 17) + struct.pack(">ii", 2, 9))
    (healthy / "recovery-point-offset-checkpoint").write_bytes(b"\xff\xfe")
    report = verify(healthy)
    assert {p.where for p in report.errors} == {f"t-0/{idx.name}", "recovery-point-offset-checkpoint"}
    repair(healthy)
    assert verify(healthy).problems == []
    assert _records(healthy) == before


def test_a_missing_segment_is_named_and_repair_keeps_offsets_unique(healthy):
    segs = sorted((healthy / "plain-0").glob("*.log"))
    middle, last = segs[1], segs[-1]
    lost = set()
    with compactlog.open(healthy) as cl:
        end = cl.end_offsets("plain")[0]
        bases = [s.base_offset for s in cl.log("plain").segments]
    for victim in (middle, last):
        i = bases.index(int(victim.name.split(".")[0]))
        lost |= set(range(bases[i], bases[i + 1] if i + 1 < len(bases) else end))
        for p in victim.parent.glob(victim.name.replace(".log", ".*")):
            p.unlink()
    report = verify(healthy)
    whats = " | ".join(p.what for p in report.errors)
    assert "missing before this segment" in whats and "flushed but are missing" in whats
    repair(healthy)
    assert verify(healthy).problems == []
    with compactlog.open(healthy) as cl:
        offsets = [r.offset for r in cl.consume("plain", from_beginning=True)]
        assert set(offsets) == set(range(end)) - lost
        assert cl.produce("plain", b"after").offset == end  # no lost offset is handed out again


def test_verify_names_a_missing_directory_and_a_topic_filter(tmp_path, healthy):
    out = _cli(tmp_path / "nope")
    assert out.returncode == 1 and "does not exist" in out.stderr and "Traceback" not in out.stderr
    report = verify(healthy, topic="plain")
    assert [s.name for s in report.partitions] == ["plain-0"]


@pytest.mark.parametrize("content", [b"\xff\xfe", b"0\n1\nt 0 999999\n"])
def test_a_garbled_or_impossible_cleaner_checkpoint_is_repaired(healthy, content):
    """verify promises the cleaner's checkpoint is rewritten from the logs: repair must do it (an entry
    beyond the log end would also hide missing segments from recovery)."""
    (healthy / "cleaner-offset-checkpoint").write_bytes(content)
    assert any(p.where == "cleaner-offset-checkpoint" for p in verify(healthy).errors)
    before = _records(healthy)
    repair(healthy)
    assert verify(healthy).problems == []
    assert _records(healthy) == before
