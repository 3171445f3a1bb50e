"""Benchmarks time their work in child processes: each gets its own interpreter, JVM and peak RSS."""

from __future__ import annotations

import json
import subprocess
import sys


def run_child(code: str, *args: str) -> dict:
    """Run ``python -c code args...``; its last stdout line is a JSON object of figures."""
    p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(f"a benchmark child failed:\n{p.stderr[-4000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def bench_start(name: str, records: int = 10_000_000, keys: int = 1_000_000):
    """The common start of a benchmark on the cleaner's data: ``--records``/``--keys``, a wide console
    and a fresh scratch directory (the caller removes it)."""
    import argparse
    import tempfile

    from rich.console import Console

    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=records)
    ap.add_argument("--keys", type=int, default=keys)
    ap.add_argument("--master", default="local[*]", help="Spark master, for the benchmarks that use Spark")
    ap.add_argument("--codec", default="none", choices=("none", "gzip", "snappy", "lz4", "zstd"),
                    help="the topic's batches' compression (benchmarks on the cleaner's data)")
    args = ap.parse_args()
    return args, Console(width=max(Console().width, 120)), tempfile.mkdtemp(prefix=f"compactlog-{name}-bench-")


def write_copies(root: str, names: list[str], args, console) -> list[str]:
    """Write the benchmark topic once under ``root/names[0]`` and copy it to the other names, so every
    contender starts from the same bytes; prints what was written and how long it took."""
    import os
    import shutil
    import time

    from cleaner_data import write_topic
    from compactlog.records import Codec

    paths = [os.path.join(root, n) for n in names]
    t0 = time.perf_counter()
    size = write_topic(paths[0], args.records, args.keys, Codec[args.codec.upper()])
    for p in paths[1:]:
        shutil.copytree(paths[0], p)
    times = "once" if len(paths) == 1 else f"{len(paths)} times"
    console.print(f"wrote {args.records:,} records ({size / 1e6:,.0f} MB, {args.codec}) {times} in "
                  f"{time.perf_counter() - t0:.0f} s; {os.cpu_count()} cores")
    return paths


def median_cells(rows: int, mine: list[float], baseline: list[float], digits: int = 2) -> list[str]:
    """A contender's table cells from its measured rounds: median seconds, rows/s at that median, and the
    median of each round's ratio to the baseline's run in the same round (rounds in turn share the
    machine's load of the moment, so a ratio is taken within a round, not between medians)."""
    import statistics

    med = statistics.median(mine)
    ratio = statistics.median(b / m for b, m in zip(baseline, mine))
    return [f"{med:.{digits}f}", f"{rows / med:,.0f}", f"{ratio:.2f}x"]
