"""What a lookup in a full offset index costs: every Fetch and every read by offset starts with one.

An offset index of 200,000 entries (a segment of about 800 MB at the default index.interval.bytes), read
from its file as a log opens it, then random lookups. Printed: µs per lookup, median of the passes.
Run it with ``PYTHONPATH=<another checkout>/src`` to time that tree's index the same way.

Usage: python bench/bench_index_lookup.py [--entries N] [--lookups N] [--passes N]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from compactlog.storage.index import OffsetIndex


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=200_000)
    ap.add_argument("--lookups", type=int, default=3000)
    ap.add_argument("--passes", type=int, default=7)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "00000000000000000000.index"
        raw = np.empty(args.entries, dtype=OffsetIndex.dtype)
        raw["offset"] = np.arange(args.entries) * 30
        raw["position"] = np.arange(args.entries) * 4100
        path.write_bytes(raw.tobytes())
        index = OffsetIndex(path, 0, 10 << 20, read_only=True)
        rng = random.Random(7)
        wanted = [rng.randrange(0, args.entries * 30) for _ in range(args.lookups)]
        assert all(index.lookup(o)[0] == o // 30 * 30 for o in wanted[:100])
        passes = []
        for _ in range(args.passes):
            t = time.perf_counter()
            for o in wanted:
                index.lookup(o)
            passes.append((time.perf_counter() - t) / len(wanted) * 1e6)
        index.close()
    print(f"lookup in a {args.entries:,}-entry offset index: {statistics.median(passes):.1f} µs "
          f"(median of {args.passes} passes of {args.lookups:,})")


if __name__ == "__main__":
    main()
