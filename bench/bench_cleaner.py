"""The log cleaner on the issue's data: 10 M records of ~100-byte JSON-like values, 1 M keys with 10
versions each, ~16 KB batches; uncompressed, lz4 and zstd. Each clean runs in a fresh process so its
peak RSS is its own. Then the same log with a dedupe buffer that holds only 1/8 of the keys.

With ``--transactions`` it compares instead the same uncompressed log written without transactions
and by transactional producers (transactions of 10 batches, 10% of them aborted, a marker after each):
both cleaning times and their ratio (issue 22's goal: within 1.2x).

Usage: python bench/bench_cleaner.py [--records 10000000] [--keys 1000000] [--codecs none,lz4,zstd]
       python bench/bench_cleaner.py --transactions [--records 10000000] [--keys 1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

from rich.console import Console
from rich.table import Table

sys.path.insert(0, os.path.dirname(__file__))
from children import run_child  # noqa: E402
from cleaner_data import Transactions, write_topic  # noqa: E402

from compactlog.records import Codec, kernels  # noqa: E402

CHILD = """
import json, sys, time
import compactlog
broker = json.loads(sys.argv[2])
with compactlog.open(sys.argv[1], broker) as cl:
    t0 = time.perf_counter()
    report = cl.clean("bench")
    dt = time.perf_counter() - t0
    rounds = report.compactions
    print(json.dumps({
        "seconds": dt, "rounds": len(rounds), "round_seconds": sum(r.stats.elapsed for r in rounds),
        "records": sum(r.stats.messages_read for r in rounds[:1]),
        "bytes": sum(r.stats.bytes_read for r in rounds[:1]),
        "kept": rounds[-1].stats.messages_written if rounds else 0,
        "map_seconds": sum(r.stats.map_seconds for r in rounds),
        "utilization": max((r.stats.buffer_utilization for r in rounds), default=0),
        # VmHWM, not ru_maxrss: the latter is inherited across fork and exec, so a child would report
        # the peak of the parent that generated the data.
        "rss_mb": int([l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]) / 1024,
    }))
"""


def clean_in_child(path: str, broker: dict) -> dict:
    return run_child(CHILD, path, json.dumps(broker))


def compare_transactions(console: Console, records: int, keys: int, repeat: int) -> None:
    """The same log without and with transactions (10% aborted), each cleaned in a fresh process, on a
    fresh copy, ``repeat`` times alternating between the two (the best time of each counts: a shared
    machine's load moves a single run's figures more than the difference measured)."""
    root = tempfile.mkdtemp(prefix="compactlog-cleaner-txn-bench-")
    table = Table(title="one cleaning round, one core: the same records without and with transactions")
    for col in ("log", "log MB", "records read", "best s", "all runs s", "round s", "map build s", "records/s",
                "records after"):
        table.add_column(col, justify="right")
    try:
        sizes = {}
        for name in ("plain", "transactions"):
            txns = Transactions() if name == "transactions" else None
            sizes[name] = write_topic(os.path.join(root, name), records, keys, Codec.NONE, transactions=txns)
            if txns is not None:
                console.print(f"  {txns.count:,} transactions, {txns.aborted_count:,} aborted")
        runs: dict[str, list[dict]] = {"plain": [], "transactions": []}
        for _ in range(repeat):
            for name in runs:
                work = os.path.join(root, "work")
                shutil.copytree(os.path.join(root, name), work)
                r = clean_in_child(work, {})
                shutil.rmtree(work, ignore_errors=True)
                console.print(f"  cleaned {name}: {json.dumps(r)}")
                runs[name].append(r)
        best = {name: min(rs, key=lambda r: r["seconds"]) for name, rs in runs.items()}
        for name, r in best.items():
            table.add_row(name, f"{sizes[name] / 1e6:,.0f}", f"{r['records']:,}", f"{r['seconds']:.2f}",
                          " ".join(f"{x['seconds']:.1f}" for x in runs[name]), f"{r['round_seconds']:.2f}",
                          f"{r['map_seconds']:.2f}",
                          f"{r['records'] / r['seconds']:,.0f}", f"{r['kept']:,}")
        console.print(table)
        ratio = best["transactions"]["seconds"] / best["plain"]["seconds"]
        rounds = best["transactions"]["round_seconds"] / best["plain"]["round_seconds"]
        medians = statistics.median(r["seconds"] for r in runs["transactions"]) / statistics.median(
            r["seconds"] for r in runs["plain"])
        console.print(f"with transactions / without (best of {repeat} each): {ratio:.2f}x for `clean`, {rounds:.2f}x "
                      f"for the round itself; medians: {medians:.2f}x (goal: within 1.2x)")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=10_000_000)
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--codecs", default="none,lz4,zstd")
    ap.add_argument("--transactions", action="store_true",
                    help="compare the log without and with transactions (10%% aborted) instead")
    ap.add_argument("--repeat", type=int, default=3, help="cleanings of each log with --transactions (best counts)")
    args = ap.parse_args()
    console = Console()
    console.print(f"kernels: {'compiled' if kernels.NATIVE else 'python twin'}; {args.records:,} records, {args.keys:,} keys")
    if args.transactions:
        compare_transactions(console, args.records, args.keys, args.repeat)
        return
    root = tempfile.mkdtemp(prefix="compactlog-cleaner-bench-")
    table = Table(title="one cleaning round, one core (default dedupe buffer 128 MiB)")
    for col in ("codec", "log MB", "records/s", "MB/s", "map build s", "total s", "records after", "peak RSS MB"):
        table.add_column(col, justify="right")
    try:
        for name in args.codecs.split(","):
            codec = Codec.NONE if name == "none" else Codec[name.upper()]
            path = os.path.join(root, name)
            t0 = time.perf_counter()
            size = write_topic(path, args.records, args.keys, codec,
                               progress=lambda d, n: console.print(f"  writing {name}: {d / n:.0%}", end="\r"))
            console.print(f"  wrote {name}: {size / 1e6:,.0f} MB in {time.perf_counter() - t0:.0f} s      ")
            r = clean_in_child(path, {})
            console.print(f"  cleaned {name}: {json.dumps(r)}")
            table.add_row(name, f"{size / 1e6:,.0f}", f"{r['records'] / r['seconds']:,.0f}", f"{r['bytes'] / 1e6 / r['seconds']:,.1f}",
                          f"{r['map_seconds']:.1f}", f"{r['seconds']:.1f}", f"{r['kept']:,}", f"{r['rss_mb']:,.0f}")
            if name == "none":
                small = int(args.keys / 8 / 0.9 * 24) + 24
                write_topic(os.path.join(root, "small"), args.records, args.keys, codec)
                rs = clean_in_child(os.path.join(root, "small"), {"log.cleaner.dedupe.buffer.size": str(small)})
                console.print(f"  cleaned with a 1/8 buffer ({small} bytes): {json.dumps(rs)}")
                shutil.rmtree(os.path.join(root, "small"), ignore_errors=True)
                small_row = (small, rs)
            shutil.rmtree(path, ignore_errors=True)
        console.print(table)
        if "none" in args.codecs.split(","):
            small, rs = small_row
            t2 = Table(title="dedupe buffer holding 1/8 of the keys (uncompressed)")
            for col in ("dedupe buffer", "rounds", "total s", "records after", "peak RSS MB"):
                t2.add_column(col, justify="right")
            t2.add_row(f"{small / 2**20:.1f} MiB", str(rs["rounds"]), f"{rs['seconds']:.1f}", f"{rs['kept']:,}", f"{rs['rss_mb']:,.0f}")
            console.print(t2)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
