"""Files deleted by hand never let an offset be handed out twice.

The recovery-point, log-start and cleaner checkpoints all remember offsets a partition has used; a log
that opens shorter than any of them goes on after them, and a reader crossing a hole where a segment
was is told, not served the records around it as if nothing were missing.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

import compactlog
from compactlog.errors import CorruptRecordError

T = "t"


def _fill(d: Path, n: int = 60, **config: str) -> list[str]:
    with compactlog.open(d) as cl:
        cl.create_topic(T, 1, {"segment.bytes": "2000", **config})
        for i in range(n):
            cl.produce(T, b"v%d" % i, key=b"k%d" % i)
    return sorted(f for f in os.listdir(d / f"{T}-0") if f.endswith(".log"))


def _offsets(cl) -> list[int]:
    return [r.offset for r in cl.consume(T, from_beginning=True)]


@pytest.mark.parametrize("shutdown", ["clean", "unclean"])
def test_a_deleted_partition_folder_goes_on_after_its_last_offset(tmp_path, shutdown):
    _fill(tmp_path)
    if shutdown == "unclean":
        with compactlog.open(tmp_path) as cl:
            cl.produce(T, b"v60", key=b"k60")
            cl.manager.checkpoint()  # what a running broker writes now and then
        (tmp_path / ".kafka_cleanshutdown").unlink(missing_ok=True)
    shutil.rmtree(tmp_path / f"{T}-0")
    with compactlog.open(tmp_path) as cl:
        new = cl.produce(T, b"new", key=b"k").offset
        assert new >= 60
        assert _offsets(cl) == [new]
    with compactlog.open(tmp_path) as cl:  # and it stays so
        assert cl.produce(T, b"newer", key=b"k").offset == new + 1


def test_the_cleaner_checkpoint_counts_as_evidence_too(tmp_path):
    _fill(tmp_path, **{"cleanup.policy": "compact"})
    for name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint"):
        (tmp_path / name).unlink()
    (tmp_path / "cleaner-offset-checkpoint").write_text(f"0\n1\n{T} 0 45\n")
    shutil.rmtree(tmp_path / f"{T}-0")
    with compactlog.open(tmp_path) as cl:
        assert cl.produce(T, b"new", key=b"k").offset == 45


def test_deleted_last_segments_are_not_reused(tmp_path):
    logs = _fill(tmp_path)
    for name in logs[-2:]:
        (tmp_path / f"{T}-0" / name).unlink()
    with compactlog.open(tmp_path) as cl:
        assert cl.produce(T, b"new", key=b"k").offset == 60


def test_a_deleted_middle_segment_is_a_hole_readers_are_told_of(tmp_path):
    logs = _fill(tmp_path)
    middle_base = int(logs[1].split(".")[0])
    next_base = int(logs[2].split(".")[0])
    (tmp_path / f"{T}-0" / logs[1]).unlink()
    with compactlog.open(tmp_path) as cl:
        assert cl.produce(T, b"new", key=b"k").offset == 60
        with pytest.raises(CorruptRecordError, match=f"{T}-0: .*jump from offset {middle_base - 1}"):
            _offsets(cl)
        # what is before and after the hole stays readable by offset
        assert [r.offset for r in cl.consume(T, partition=0, offset=0, max_records=middle_base)] == list(range(middle_base))
        assert [r.offset for r in cl.consume(T, partition=0, offset=next_base)] == list(range(next_base, 61))
