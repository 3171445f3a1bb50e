"""Start-up: whole-process wall time of ``compactlog --help``, ``python -c 'import compactlog'`` and a
``consume`` of an empty topic, against the goal of 0.25 s each; ``python -c pass`` is timed alongside as the
floor (the interpreter's own start-up, which no change here can lower, and a gauge of how loaded the
machine was).

The commands run in turn (help, import, consume, help, ...) so that a machine slowing down or speeding up
during the run weighs on all of them alike; min and median are printed for each. ``--compare SRC`` also
runs every command against another source tree (``PYTHONPATH=SRC``, e.g. an older checkout's ``src``),
interleaved with the current one, for a before/after from one run.

Usage: python bench/bench_startup.py [--runs 15] [--compactlog PATH] [--compare SRC]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL_S = 0.25


def console_script() -> str:
    """The ``compactlog`` that pip installed for this interpreter, else the one on PATH."""
    beside = Path(sys.executable).with_name("compactlog")
    found = str(beside) if beside.exists() else shutil.which("compactlog")
    if found is None:
        raise SystemExit("no compactlog console script: pip install -e . first")
    return found


def wall(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env=env, check=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=15, help="timed runs of each command (after one warm-up run)")
    ap.add_argument("--compactlog", default=None, help="the console script to time (default: %(default)s, "
                                                       "that is the one installed beside this python)")
    ap.add_argument("--compare", metavar="SRC", default=None,
                    help="also time every command with PYTHONPATH=SRC (another tree's src directory)")
    args = ap.parse_args()
    script = args.compactlog or console_script()
    data = tempfile.mkdtemp(prefix="compactlog-startup-")
    try:
        subprocess.run([script, "topics", "--data-dir", data, "--create", "--topic", "empty"],
                       stdout=subprocess.DEVNULL, check=True)
        commands = {
            "python -c pass (floor)": [sys.executable, "-c", "pass"],
            "compactlog --help": [script, "--help"],
            "python -c 'import compactlog'": [sys.executable, "-c", "import compactlog"],
            "compactlog consume (empty topic)": [script, "consume", "--data-dir", data, "--topic", "empty",
                                                 "--from-beginning"],
        }
        trees = {"now": dict(os.environ)}
        if args.compare:
            trees["compared"] = {**os.environ, "PYTHONPATH": str(Path(args.compare).resolve())}
        times: dict[tuple[str, str], list[float]] = {(t, c): [] for t in trees for c in commands}
        for run in range(args.runs + 1):  # run 0 warms the page cache and the bytecode caches
            for tree, env in trees.items():
                for name, cmd in commands.items():
                    dt = wall(cmd, env)
                    if run:
                        times[(tree, name)].append(dt)
        print(f"start-up, whole process, wall seconds over {args.runs} alternating runs; goal {GOAL_S:.2f} s")
        print(f"console script: {script}")
        # Without bytecode caches every compactlog module is compiled on each start: figures then run higher.
        print("bytecode caches: " + ("off (PYTHONDONTWRITEBYTECODE is set)" if os.environ.get("PYTHONDONTWRITEBYTECODE")
                                     else "on"))
        if args.compare:
            print(f"compared: PYTHONPATH={args.compare}")
        head = f"{'command':34} " + " ".join(f"{tree + ' min':>13} {tree + ' median':>15}" for tree in trees)
        print(head + f" {'goal':>6}")
        for name in commands:
            cols = " ".join(f"{min(times[(t, name)]):13.3f} {statistics.median(times[(t, name)]):15.3f}" for t in trees)
            goal = "" if name.endswith("(floor)") else f"{GOAL_S:.2f}"
            print(f"{name:34} {cols} {goal:>6}")
    finally:
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
