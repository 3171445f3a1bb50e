"""What a Fetch's header check costs: ``Log.locate`` (the position and size of a fetch) with the compiled
header walk, with every header checked in Python instead (as before the walk was compiled), against
reading the same headers without any check.

A log of small batches (one ~50-byte record each, ~120 bytes a batch) and 1.5 KB fetches from random
offsets: each fetch walks the batch headers from the offset index entry before the offset's to the
end of the fetched range. Printed, in µs per locate (median of alternating passes):

* locate, compiled walk / Python walk, and their ratio (the answers are checked to be equal);
* the reads alone: the same ``pread`` calls the compiled walk makes, then following the batch lengths
  of the headers it walks (no check), and the same with a ``RecordBatch`` per header (what iterating
  them in Python costs);
* the check alone: the time inside the compiled walk's calls during the same locates (the cost of
  timing them subtracted).

Usage: python bench/bench_locate.py [--batches N] [--fetches N] [--passes N]
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
import time

import compactlog
from compactlog.records import build_batch
from compactlog.records.batch import HEADER_SIZE_UP_TO_MAGIC, batch_size_at, iter_batches
from compactlog.storage import segment as segment_module
from compactlog.storage.segment import LogSegment

FETCH_BYTES = 1500


def per_call(fn, items) -> float:
    t = time.perf_counter()
    for item in items:
        fn(item)
    return (time.perf_counter() - t) / len(items) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=20_000)
    ap.add_argument("--fetches", type=int, default=2_000)
    ap.add_argument("--passes", type=int, default=7)
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="compactlog-bench-")
    try:
        with compactlog.open(root) as cl:
            cl.create_topic("t", 1)
            for i in range(args.batches):
                cl.append_batch("t", 0, build_batch([b"k%d" % i], [b"x" * 50]))
        cl = compactlog.open(root)
        lg = cl.log("t", 0)
        rng = random.Random(7)
        offsets = [rng.randrange(0, args.batches) for _ in range(args.fetches)]
        per = len(offsets)
        compiled = segment_module.walk_headers

        def python_walk(*_args) -> int:  # the compiled walk passes nothing: every header goes through Python
            return 0

        def locate(offset: int):
            return lg.locate(offset, FETCH_BYTES, True)

        # One instrumented pass: the reads and compiled-walk calls each fetch makes, and its answer.
        reads: list[list[tuple[LogSegment, int, int]]] = []
        calls: list[int] = []  # headers each compiled-walk call passed
        answers = []
        real_read = LogSegment.read_bytes

        def recording_read(seg, position, size):
            reads[-1].append((seg, position, size))
            return real_read(seg, position, size)

        def recording_walk(*a):
            n = compiled(*a)
            calls.append(n)
            return n

        LogSegment.read_bytes = recording_read
        segment_module.walk_headers = recording_walk
        try:
            for o in offsets:
                reads.append([])
                got = locate(o)
                answers.append((got[1], got[2]))
        finally:
            LogSegment.read_bytes = real_read
            segment_module.walk_headers = compiled
        checked = sum(calls)

        segment_module.walk_headers = python_walk
        try:
            assert [(g[1], g[2]) for g in map(locate, offsets)] == answers, "the two walks disagree"
        finally:
            segment_module.walk_headers = compiled

        # The headers each fetch walks: from the first read's position to the batch holding the offset (and
        # the one after it), then from there over the fetched range (and the one after it).
        spans = []
        walked = 0
        for rs, (target, size) in zip(reads, answers):
            for seg, position, length in rs:
                last = target if position < target else target + size
                spans.append((seg, position, length, last - position))
                walked += 1 + len(range(position, last + 1, 120))  # about: batches are ~120 bytes

        def follow_lengths(span) -> None:
            seg, position, length, last = span
            chunk = seg.read_bytes(position, length)
            p, end = 0, len(chunk)
            while p <= last and end - p >= HEADER_SIZE_UP_TO_MAGIC:
                p += batch_size_at(chunk, p)

        def iterate_batches(span) -> None:
            seg, position, length, last = span
            for p, _ in iter_batches(seg.read_bytes(position, length)):
                if p > last:
                    break

        spent = [0]
        clock = time.perf_counter_ns

        def timed_walk(*a) -> int:  # the compiled walk's own time inside a real locate (its bytes just read)
            t = clock()
            n = compiled(*a)
            spent[0] += clock() - t
            return n

        def timer_cost() -> float:  # what timing one call adds: subtracted
            t = clock()
            for _ in range(10_000):
                t0 = clock()
                spent[0] += clock() - t0
            return (clock() - t) / 10_000 / 1e3

        def check_alone() -> float:
            spent[0] = 0
            segment_module.walk_headers = timed_walk
            try:
                for o in offsets:
                    locate(o)
            finally:
                segment_module.walk_headers = compiled
            return spent[0] / 1e3 / per - timer_cost() * len(calls) / per

        times: dict[str, list[float]] = {k: [] for k in ("compiled", "python", "lengths", "batches", "check")}
        for _ in range(args.passes):
            times["compiled"].append(per_call(locate, offsets))
            segment_module.walk_headers = python_walk
            try:
                times["python"].append(per_call(locate, offsets))
            finally:
                segment_module.walk_headers = compiled
            times["lengths"].append(per_call(follow_lengths, spans) * len(spans) / per)
            times["batches"].append(per_call(iterate_batches, spans) * len(spans) / per)
            times["check"].append(check_alone())
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"{args.batches} batches of ~{lg.size // args.batches} bytes, {per} fetches of {FETCH_BYTES} bytes, "
              f"median of {args.passes} passes; µs per locate")
        print(f"  locate, Python header walk (before)      {med['python']:8.1f}")
        print(f"  locate, compiled header walk (after)     {med['compiled']:8.1f}   "
              f"{med['python'] / med['compiled']:.1f}x faster")
        print(f"  reads + following batch lengths, no check {med['lengths']:7.1f}   "
              f"(~{walked / per:.0f} headers walked a fetch)")
        print(f"  reads + a RecordBatch per header, no check {med['batches']:6.1f}")
        print(f"  the compiled check alone                 {med['check']:8.1f}   "
              f"({checked / per:.0f} headers checked a fetch, {len(calls) / per:.1f} calls)")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
