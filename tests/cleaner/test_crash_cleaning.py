"""kill -9 while cleaning, many times: every restart recovers a readable log in which every record
the model says must survive is still there, at its offset."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import compactlog

CHILD = textwrap.dedent(
    """
    import sys, compactlog
    cl = compactlog.open(sys.argv[1])
    print("open", flush=True)
    cl.clean("t")
    print("cleaned", flush=True)
    cl.close()
    """
)
CONFIG = {"cleanup.policy": "compact", "segment.bytes": "40000", "min.cleanable.dirty.ratio": "0.01",
          "file.delete.delay.ms": "0"}


def verify(path, appended):
    with compactlog.open(path) as cl:
        leftovers = [n for n in os.listdir(path / "t-0") if n.endswith((".cleaned", ".swap", ".deleted"))]
        assert not leftovers, leftovers
        recs = list(cl.consume("t", 0, from_beginning=True))
        assert [r.offset for r in recs] == sorted({r.offset for r in recs})
        present = {r.offset: (r.key, r.value) for r in recs}
        for off, kv in present.items():
            assert appended[off] == kv
        latest = {}
        for off in sorted(appended):
            latest[appended[off][0]] = off
        for key, off in latest.items():
            assert off in present, f"latest value of {key!r} lost"
        return len(recs)


def round_length(path, copy) -> float:
    """Seconds a cleaning round of the log at ``path`` takes, from the child's "open" to its "cleaned",
    run on a copy."""
    shutil.copytree(path, copy)
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(copy)], stdout=subprocess.PIPE, text=True)
    with proc:
        assert proc.stdout.readline().strip() == "open"
        t0 = time.monotonic()
        assert proc.stdout.readline().strip() == "cleaned"
        length = time.monotonic() - t0
    shutil.rmtree(copy)
    return length


def test_kill_9_during_cleaning_loses_nothing_that_must_survive(tmp_path):
    rng = random.Random(11)
    appended = {}
    next_offset = 0
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1, CONFIG)
    killed_midway = 0
    for round_ in range(8):
        with compactlog.open(tmp_path) as cl:
            rows = [(b"key-%d" % rng.randint(0, 2000), b"value-%d-%d" % (round_, i) * 3) for i in range(12_000)]
            res = cl.produce_batch("t", rows, compression=rng.choice(["none", "lz4", "zstd"]))
            for i, kv in enumerate(rows):
                appended[res[0].first_offset + i] = kv
            next_offset = res[0].last_offset + 1
        # a random moment inside the round (the checks do not depend on it): as long as a round takes
        # here, measured on a copy, so that however fast cleaning gets most kills land inside one
        length = round_length(tmp_path, tmp_path.with_name(f"copy-{round_}"))
        proc = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout.readline().strip() == "open"
            time.sleep(rng.uniform(0.0, length))
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            out = proc.stdout.read()
            proc.wait()
            proc.stdout.close()
        killed_midway += "cleaned" not in out
        verify(tmp_path, appended)
    assert next_offset == 8 * 12_000
    assert killed_midway >= 3  # most kills landed inside a cleaning round
    with compactlog.open(tmp_path) as cl:  # and cleaning still completes afterwards
        cl.clean("t")
    assert verify(tmp_path, appended) < len(appended) / 2
