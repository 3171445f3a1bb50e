"""Other processes read a partition read-only while its owner writes and cleans it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import compactlog
from compactlog.errors import UnknownTopicOrPartitionError
from compactlog.storage.snapshot import PartitionSnapshot


def test_snapshot_reads_while_the_owner_holds_the_lock_and_writes_nothing(tmp_path):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1, {"segment.bytes": "1000"})
        cl.produce_batch("t", [(b"k%d" % i, b"v" * 50) for i in range(200)], batch_bytes=300)
        before = sorted(os.listdir(tmp_path / "t-0"))
        with PartitionSnapshot.open(tmp_path, "t", 0) as snap:
            assert snap.log_end_offset == 200
            got = [r.offset for b in snap.batches(37, 120) for r in b.records() if 37 <= r.offset < 120]
            assert got == list(range(37, 120))
        assert sorted(os.listdir(tmp_path / "t-0")) == before


def test_snapshot_in_another_process_survives_cleaning_swaps(tmp_path):
    cfg = {"cleanup.policy": "compact", "segment.bytes": "2000", "min.cleanable.dirty.ratio": "0.01", "file.delete.delay.ms": "0"}
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1, cfg)
        cl.produce_batch("t", [(b"k%d" % (i % 10), b"v%d" % i) for i in range(600)], batch_bytes=200)
        reader = textwrap.dedent(f"""
            from compactlog.storage.snapshot import PartitionSnapshot
            snap = PartitionSnapshot.open({str(tmp_path)!r}, "t", 0)
            print("opened", flush=True)
            input()
            offs = [r.offset for b in snap.batches(0) for r in b.records()]
            assert offs == sorted(set(offs)) and offs[-1] == 599, offs[-5:]
            print(len(offs), flush=True)
        """)
        proc = subprocess.Popen([sys.executable, "-c", reader], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "opened"
        assert cl.clean("t").compactions  # segments the reader holds are swapped out and unlinked
        out, _ = proc.communicate("go\n", timeout=60)
        assert proc.returncode == 0
        assert int(out.strip()) == 600  # the reader still saw the whole log it opened


def test_unknown_partition():
    with pytest.raises(UnknownTopicOrPartitionError):
        PartitionSnapshot.open("/nonexistent-dir", "t", 0)
