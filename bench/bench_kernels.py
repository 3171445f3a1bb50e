"""Throughput of the record kernels: compiled module against the Python twin.

Why: per-record work must stay out of the interpreter (design notes: a Python decoder manages about
0.25 M records/s), so this prints what each kernel really does on producer-sized batches, to catch a
regression or a silent fall back to the twin.

    PYTHONPATH=src python3 bench/bench_kernels.py [--records 1000000] [--twin-records 50000]
"""

from __future__ import annotations

import argparse
import time
from typing import Any, Callable

import google_crc32c
import numpy as np

from compactlog.records import _py
from compactlog.records.batch import Record

try:
    from compactlog.records import _native
except ImportError:  # not built: only the twin is measured
    _native = None

BATCH_BYTES = 16 * 1024
VALUE_SIZE = 100


def make_batches(n: int) -> list[tuple[list[bytes], list[bytes], list[int]]]:
    """Keys, values and timestamps for ``n`` records, cut into batches of about 16 KB encoded."""
    rng = np.random.default_rng(7)
    blob = rng.integers(0, 256, n * VALUE_SIZE, dtype=np.uint8).tobytes()
    per_batch = max(1, BATCH_BYTES // (VALUE_SIZE + 26))  # 12-byte key and ~14 bytes of framing
    out = []
    for start in range(0, n, per_batch):
        stop = min(n, start + per_batch)
        keys = [b"key-%08d" % i for i in range(start, stop)]
        values = [blob[i * VALUE_SIZE : (i + 1) * VALUE_SIZE] for i in range(start, stop)]
        out.append((keys, values, [1_700_000_000_000 + i for i in range(start, stop)]))
    return out


def best_of(runs: int, fn: Callable[[], Any]) -> float:
    """Best wall time of ``runs`` calls (the least disturbed by the machine's other work)."""
    best = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def bench_impl(name: str, impl: Any, n: int, runs: int) -> None:
    batches = make_batches(n)
    encoded: list[bytes] = []

    def encode() -> None:
        encoded.clear()
        for keys, values, ts in batches:
            encoded.append(impl.encode_records(keys, values, ts, ts[0], None, None))

    t_enc = best_of(runs, encode)
    outs = [np.empty((len(b[0]), _py.NCOLS), dtype=np.int64) for b in batches]

    def scan() -> None:
        for data, (keys, _, _), out in zip(encoded, batches, outs):
            impl.scan_records(data, len(keys), out)

    t_scan = best_of(runs, scan)

    def decode() -> None:
        for data, (keys, _, ts) in zip(encoded, batches):
            impl.decode_records(Record, "topic", 0, 0, data, len(keys), 0, ts[0], None)

    t_dec = best_of(runs, decode)
    halves = [np.arange(0, len(b[0]), 2, dtype=np.int64) for b in batches]

    def rebase() -> None:  # the cleaner keeping every other record of batches that gain a delete horizon
        for data, out, rows, (_, _, ts) in zip(encoded, outs, halves, batches):
            impl.rebase_records(data, out, rows, -86_400_000)  # a horizon one day after the base

    t_reb = best_of(runs, rebase) * 2  # half the records: per kept record

    def summarize() -> None:  # append validation: one call per batch, a small named result back
        for data, (keys, _, _) in zip(encoded, batches):
            impl.summarize_records(data, len(keys))

    t_sum = best_of(runs, summarize)
    chunk = b"".join(encoded)
    counts = np.asarray([len(b[0]) for b in batches], dtype=np.int64)
    ends = np.cumsum([len(d) for d in encoded], dtype=np.int64)
    starts = ends - np.asarray([len(d) for d in encoded], dtype=np.int64)
    table = np.empty((n, _py.NCOLS), dtype=np.int64)

    def scan_many() -> None:  # the cleaner's and the Spark reader's chunked scan (one call for all)
        impl.scan_many(chunk, starts, ends, counts, table)

    t_many = best_of(runs, scan_many)

    def gather() -> None:  # the Spark reader's key and value columns, per batch-sized table
        for data, out in zip(encoded, outs):
            impl.gather_column(data, out, _py.C_KEY_POS, _py.C_KEY_LEN)
            impl.gather_column(data, out, _py.C_VAL_POS, _py.C_VAL_LEN)

    t_gat = best_of(runs, gather) / 2  # two columns: per column of records
    slots = 2 * n
    map_table = np.zeros(slots * _py.SLOT, dtype=np.uint8)

    def put() -> None:  # the cleaner's offset map, one call per batch (keys already in the map after run 1)
        size = 0
        for base, (data, out) in enumerate(zip(encoded, outs)):
            size = impl.offset_map_put(map_table, slots, n, size, data, out, base * 1000, 0, 0)[0]

    t_put = best_of(runs, put)
    size = sum(len(d) for d in encoded)
    print(f"{name:>6}: {n:>9,} records in {len(batches):,} batches of ~{size // len(batches):,} bytes")
    for what, t in (("encode", t_enc), ("scan", t_scan), ("decode", t_dec), ("rebase", t_reb), ("summary", t_sum),
                    ("scan_many", t_many), ("gather", t_gat), ("map_put", t_put)):
        print(f"        {what:<9} {n / t / 1e6:8.2f} M records/s  ({size / t / 1e9:6.2f} GB/s)")


def bench_crc(size: int, runs: int) -> None:
    data = np.random.default_rng(3).integers(0, 256, size, dtype=np.uint8).tobytes()
    view = memoryview(data)[1:]  # unaligned, as a batch inside a segment usually is
    rows = [("google_crc32c.value", lambda: google_crc32c.value(data))]
    if _native is not None:
        rows.append(("_native.crc32c", lambda: _native.crc32c(data)))
        rows.append(("_native.crc32c (unaligned view)", lambda: _native.crc32c(view)))
        small = data[:16 * 1024]
        reps = max(1, size // len(small))

        def many_small() -> None:
            for _ in range(reps):
                _native.crc32c(small)

        rows.append(("_native.crc32c (16 KB calls)", many_small))
    for label, fn in rows:
        t = best_of(runs, fn)
        print(f"crc32c {label:<34} {size / t / 1e9:6.2f} GB/s")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--twin-records", type=int, default=50_000)
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args()
    if _native is not None:
        bench_impl("native", _native, args.records, args.runs)
    else:
        print("compiled kernels not built: measuring the twin only")
    bench_impl("twin", _py, args.twin_records, 1)
    bench_crc(64 * 1024 * 1024, args.runs)


if __name__ == "__main__":
    main()
