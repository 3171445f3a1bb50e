"""kill -9 in the middle of appending: every acknowledged record survives the restart."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap

import compactlog

CHILD = textwrap.dedent(
    """
    import sys, compactlog
    cl = compactlog.open(sys.argv[1])
    if "t" not in cl.list_topics():
        cl.create_topic("t", 1, {"segment.bytes": "20000", "cleanup.policy": "compact"})
    n = cl.end_offsets("t")[0]
    print("ready", n, flush=True)
    i = 0
    while True:
        k = 1 + i % 7
        rows = [(b"key-%d" % ((n + j) % 50), b"value-%d" % (n + j)) for j in range(k)]
        res = cl.produce_batch("t", rows, compression=["none", "gzip", "lz4", "zstd", "snappy"][i % 5])
        n = res[0].last_offset + 1
        print("acked", n, flush=True)
        i += 1
    """
)


def test_acknowledged_appends_survive_kill_9(tmp_path):
    rng = random.Random(7)
    acked = 0
    for _ in range(6):
        proc = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
        try:
            first = proc.stdout.readline().split()
            assert first[0] == "ready"
            assert int(first[1]) >= acked  # recovery kept everything acknowledged before
            stop_after = rng.randrange(1, 400)
            for _ in range(stop_after):
                line = proc.stdout.readline()
                acked = int(line.split()[1])
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            proc.stdout.close()
        with compactlog.open(tmp_path) as cl:
            recs = list(cl.consume("t", from_beginning=True))
            assert len(recs) >= acked
            assert [r.offset for r in recs] == list(range(len(recs)))
            assert all(r.value == b"value-%d" % r.offset for r in recs)
            assert all(r.key == b"key-%d" % (r.offset % 50) for r in recs)
