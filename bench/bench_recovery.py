"""Recovery after an unclean shutdown: time to reopen a 1 GB log that has no clean-shutdown marker.

Every batch is CRC-checked and the indexes are rebuilt, as Kafka's recovery does from the recovery
point (here 0, the worst case). Usage: python bench/bench_recovery.py [--gb 1.0]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

import compactlog
from compactlog.records import build_batch, kernels
from compactlog.storage import files


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gb", type=float, default=1.0)
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="compactlog-recovery-")
    try:
        target = int(args.gb * (1 << 30))
        value = b"v" * 100
        ts = int(time.time() * 1000)
        keys = [b"key-%06d" % i for i in range(140)]
        b = build_batch(keys, [value] * len(keys), [ts] * len(keys))
        with compactlog.open(root) as cl:
            cl.create_topic("t", 1)
            lg = cl.log("t", 0)
            t0 = time.perf_counter()
            while lg.size < target:
                lg.append(b)
            write_s = time.perf_counter() - t0
            size, end, segs = lg.size, lg.log_end_offset, len(lg.segments)
        os.unlink(os.path.join(root, files.CLEAN_SHUTDOWN_FILE))
        os.unlink(os.path.join(root, files.RECOVERY_POINT_CHECKPOINT))  # recover from offset 0
        t0 = time.perf_counter()
        with compactlog.open(root) as cl:
            recovered = cl.log("t", 0).log_end_offset
        dt = time.perf_counter() - t0
        assert recovered == end, (recovered, end)
        print(f"kernels: {'compiled' if kernels.NATIVE else 'python twin'}")
        print(f"log: {size / (1 << 30):.2f} GiB, {end:,} records, {segs} segment(s); written in {write_s:.1f} s")
        print(f"recovery after unclean shutdown: {dt:.2f} s ({size / dt / 1e9:.2f} GB/s, {end / dt:,.0f} records/s)")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
