"""`compactlog clean` against a plain C implementation of the same cleaning round, on one log.

The yardstick is a small C program kept outside this repository (``refclean.c``): two passes over
uncompressed segments, a 128 MiB key table, every batch's CRC-32C checked, batches that lost records
rebuilt, one fsync'd output file per segment. It does less than the cleaner (no indexes, no swap, no
checkpoint, no tombstone horizon), so it is the floor for this work on this machine, not a rival.

The bench builds it with ``cc -O2 -msse4.2``, writes one compacted topic of uncompressed ~100-byte JSON
values (by default 2 M records over 200 k keys, 10 versions each, ~16 KB batches), then times, in
turn, the C program on a fresh copy of the topic's segments and ``compactlog clean`` (the command: a
whole process, interpreter start-up included) on a fresh copy of the whole data directory.
Both are timed from outside as whole processes; each copy is synced to disk before its run. Both must
keep the same number of records.

Usage: python bench/bench_clean_vs_c.py [--refclean PATH] [--records 2000000] [--keys 200000] [--runs 5]
                                      [--compare OLD/src]
       (PATH defaults to $COMPACTLOG_REFCLEAN, else ../shared/limit/refclean.c beside this repository;
       without it the bench says so and exits 2. --compare times the compactlog of another source tree
       too, as a third side.)
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, os.path.dirname(__file__))
from cleaner_data import write_topic  # noqa: E402

from compactlog.records import Codec, kernels  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
DEFAULT_C = REPO.parent / "shared" / "limit" / "refclean.c"
MESSAGES = re.compile(r"^\s*(Start|End) size: .*\(([\d,]+) messages\)", re.M)


def build_refclean(source: Path, into: str) -> str:
    exe = os.path.join(into, "refclean")
    p = subprocess.run(["cc", "-O2", "-msse4.2", "-o", exe, str(source)], capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(f"building {source} failed:\n{p.stderr}")
    return exe


def compactlog_command() -> list[str]:
    """The installed ``compactlog`` script beside this interpreter (no shell shim in between)."""
    script = Path(sys.executable).parent / "compactlog"
    return [str(script)] if script.exists() else [sys.executable, "-m", "compactlog"]


def fresh_copy(source: str, dest: str) -> None:
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(source, dest)
    os.sync()  # the copy's dirty pages must not be written back during the timed run


def children_cpu() -> float:
    """User + system seconds of every child reaped so far (each run's is the difference)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_c(exe: str, data_dir: str, out_dir: str) -> tuple[float, float, int, int, float]:
    """(wall seconds, CPU seconds, records read, records kept, the program's own seconds)."""
    part = os.path.join(data_dir, "bench-0")
    logs = sorted(os.path.join(part, f) for f in os.listdir(part)
                  if f.endswith(".log") and os.path.getsize(os.path.join(part, f)) > 0)
    os.makedirs(out_dir, exist_ok=True)
    cpu, t0 = children_cpu(), time.perf_counter()
    p = subprocess.run([exe, out_dir, *logs], capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, children_cpu() - cpu
    if p.returncode:
        raise SystemExit(f"refclean failed ({p.returncode}): {p.stderr}")
    read, kept, own = p.stdout.split()
    return wall, cpu, int(read), int(kept), float(own)


def run_compactlog(data_dir: str, source: str | None = None) -> tuple[float, float, int, int]:
    """(wall seconds, CPU seconds, records read, records kept) of ``compactlog clean``, a whole process;
    with ``source``, the compactlog of that source tree (put first on its PYTHONPATH)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [source, os.environ.get("PYTHONPATH")]))) if source else None
    cpu, t0 = children_cpu(), time.perf_counter()
    p = subprocess.run([*compactlog_command(), "clean", "--data-dir", data_dir, "--topic", "bench"],
                       capture_output=True, text=True, env=env)
    wall, cpu = time.perf_counter() - t0, children_cpu() - cpu
    if p.returncode:
        raise SystemExit(f"compactlog clean failed ({p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}")
    found = MESSAGES.findall(p.stdout)
    read = sum(int(n.replace(",", "")) for kind, n in found if kind == "Start")
    kept = sum(int(n.replace(",", "")) for kind, n in found if kind == "End")
    if len(found) != 2:  # one round expected: the default dedupe buffer holds every key
        raise SystemExit(f"expected one cleaning round, got this report:\n{p.stdout}")
    return wall, cpu, read, kept


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--refclean", default=os.environ.get("COMPACTLOG_REFCLEAN", str(DEFAULT_C)),
                    help="the C yardstick's source file")
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--keys", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=5, help="runs of each side, alternating")
    ap.add_argument("--compare", metavar="SRC", help="also time compactlog clean from this source tree (e.g. "
                    "OLD/src of an older checkout, its record kernels built in place), as a third side")
    args = ap.parse_args()
    console = Console(width=max(Console().width, 130))
    source = Path(args.refclean)
    if not source.is_file():
        console.print(f"the C yardstick {source} is not there: give --refclean PATH or set COMPACTLOG_REFCLEAN")
        raise SystemExit(2)
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    console.print(f"kernels: {'compiled' if kernels.NATIVE else 'python twin'}; {os.cpu_count()} cores ({cpu}); "
                  f"{args.records:,} records over {args.keys:,} keys, uncompressed")
    root = tempfile.mkdtemp(prefix="compactlog-clean-vs-c-")
    try:
        exe = build_refclean(source, root)
        original = os.path.join(root, "original")
        t0 = time.perf_counter()
        size = write_topic(original, args.records, args.keys, Codec.NONE)
        console.print(f"wrote {size / 1e6:,.0f} MB in {time.perf_counter() - t0:.0f} s"
                      + (f"; --compare runs compactlog from {args.compare}" if args.compare else ""))
        work, out = os.path.join(root, "work"), os.path.join(root, "out")
        sides = ["C", "compactlog"] + (["compared"] if args.compare else [])
        names = {"C": "C yardstick", "compactlog": "compactlog clean", "compared": "compactlog clean, --compare"}
        wall: dict[str, list[float]] = {s: [] for s in sides}
        cpu: dict[str, list[float]] = {s: [] for s in sides}
        counts: dict[str, list[tuple[int, int]]] = {s: [] for s in sides}
        own: list[float] = []
        for i in range(args.runs):
            # each round starts with the next side, so drift on the shared machine falls on all alike
            for side in sides[i % len(sides):] + sides[:i % len(sides)]:
                fresh_copy(original, work)
                shutil.rmtree(out, ignore_errors=True)
                if side == "C":
                    w, c, read, kept, inside = run_c(exe, work, out)
                    own.append(inside)
                else:
                    w, c, read, kept = run_compactlog(work, args.compare if side == "compared" else None)
                wall[side].append(w)
                cpu[side].append(c)
                counts[side].append((read, kept))
                console.print(f"  run {i + 1} {names[side]}: {w:.3f} s ({c:.3f} s CPU), {read:,} records read, {kept:,} kept")
        table = Table(title=f"one cleaning round of {args.records:,} records ({size / 1e6:,.0f} MB), whole processes, "
                            f"{args.runs} alternating runs each")
        for col in ("", "min s", "median s", "records/s (median)", "CPU s min / median", "records read", "records kept", "vs C"):
            table.add_column(col, justify="right")
        c_median = statistics.median(wall["C"])
        for side in sides:
            read, kept = (f"{n:,}" for n in counts[side][-1])
            med = statistics.median(wall[side])
            table.add_row(names[side], f"{min(wall[side]):.3f}", f"{med:.3f}", f"{args.records / med:,.0f}",
                          f"{min(cpu[side]):.3f} / {statistics.median(cpu[side]):.3f}", read, kept, f"{med / c_median:.2f}x")
        console.print(table)
        console.print(f"the C program's own timing (start-up excluded): min {min(own):.3f} s, "
                      f"median {statistics.median(own):.3f} s")
        for side in sides[1:]:
            pairs = [p / c for p, c in zip(wall[side], wall["C"])]
            console.print(f"ratio {names[side]} / C: [bold]{statistics.median(wall[side]) / c_median:.2f}x[/] on median wall "
                          f"seconds ({min(wall[side]) / min(wall['C']):.2f}x on minimums; pairs "
                          f"{', '.join(f'{r:.2f}' for r in pairs)}), "
                          f"{statistics.median(cpu[side]) / statistics.median(cpu['C']):.2f}x on median CPU seconds")
        kept = {side: {k for _, k in counts[side]} for side in sides}
        if any(k != kept["C"] for k in kept.values()) or len(kept["C"]) != 1:
            console.print(f"[red]the sides kept different numbers of records: {kept}[/]")
            raise SystemExit(1)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
