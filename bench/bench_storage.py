"""Append and read throughput of one partition log, printed as a table.

Append: batches of about 16 KB built beforehand (the caller-built path) for 100-byte and 1 KB values
per codec, plus the per-record API and produce_batch. Read: forwarding stored bytes without decoding,
decoding into Record tuples, and the columnar scan, each with every batch's CRC verified (the default)
and without (check.crcs=false). Usage: python bench/bench_storage.py [--records N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time

from rich.console import Console
from rich.table import Table

import compactlog
from compactlog.records import Codec, build_batch, kernels

BATCH_BYTES = 16 * 1024
PASSES = 7  # alternating read passes per way of reading


def make_batches(n: int, value_size: int, codec: Codec, ts: int) -> list[bytes]:
    per = max(1, BATCH_BYTES // (value_size + 20))
    out = []
    value = (b'{"price": 12.5, "currency": "EUR", "pad": "' + b"x" * value_size)[:value_size]
    for start in range(0, n, per):
        k = min(per, n - start)
        keys = [b"product-%08d" % (start + i) for i in range(k)]
        out.append(build_batch(keys, [value] * k, [ts] * k, codec=codec))
    return out


def bench_append(root: str, n: int, value_size: int, codec: Codec) -> tuple[float, float, float]:
    """(records/s appending, records/s including the final fsync, MB/s on disk including it)."""
    with compactlog.open(os.path.join(root, f"a-{value_size}-{codec.name}")) as cl:
        cl.create_topic("t", 1)
        batches = make_batches(n, value_size, codec, int(time.time() * 1000))
        lg = cl.log("t", 0)
        t0 = time.perf_counter()
        for b in batches:
            lg.append(b)
        t1 = time.perf_counter()
        lg.flush()
        dt = time.perf_counter() - t0
        return n / (t1 - t0), n / dt, lg.size / dt / 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    args = ap.parse_args()
    n = args.records
    root = tempfile.mkdtemp(prefix="compactlog-bench-")
    console = Console()
    console.print(f"kernels: {'compiled' if kernels.NATIVE else 'python twin'}; records per run: {n:,}")
    try:
        t = Table(title="append, caller-built ~16 KB batches, one core")
        for col in ("value", "codec", "records/s", "records/s incl. fsync", "MB/s on disk incl. fsync"):
            t.add_column(col, justify="right")
        for size in (100, 1024):
            for codec in Codec:
                count = n if size == 100 else n // 4
                rps, rps_sync, mbps = bench_append(root, count, size, codec)
                t.add_row(f"{size} B", codec.config_name, f"{rps:,.0f}", f"{rps_sync:,.0f}", f"{mbps:,.1f}")
        console.print(t)

        t = Table(title="append through the Python API (100-byte values, uncompressed)")
        for col in ("call", "records", "records/s"):
            t.add_column(col, justify="right")
        value = b"x" * 100
        with compactlog.open(os.path.join(root, "api")) as cl:
            cl.create_topic("t", 1)
            k = min(n, 50_000)
            t0 = time.perf_counter()
            for i in range(k):
                cl.produce("t", value, key=b"k%d" % i)
            t.add_row("produce() per record", f"{k:,}", f"{k / (time.perf_counter() - t0):,.0f}")
            rows = [(b"k%d" % i, value) for i in range(n)]
            t0 = time.perf_counter()
            cl.produce_batch("t", rows)
            t.add_row("produce_batch()", f"{n:,}", f"{n / (time.perf_counter() - t0):,.0f}")
        console.print(t)

        t = Table(title="sequential read of the 100-byte uncompressed log (page cache warm)")
        for col in ("how", "records/s", "GB/s"):
            t.add_column(col, justify="right")
        with compactlog.open(os.path.join(root, "a-100-NONE")) as cl:
            lg = cl.log("t", 0)
            size = lg.size
            for _ in range(2):
                t0 = time.perf_counter()
                off = 0
                total = 0
                while off < lg.log_end_offset:
                    f = lg.read(off, 8 << 20)
                    total += len(f.records)
                    last = None
                    for last in _last_batch(f.records):
                        pass
                    off = last + 1
                dt = time.perf_counter() - t0
            t.add_row("forward bytes (8 MB fetches)", f"{n / dt:,.0f}", f"{total / dt / 1e9:.2f}")
            # The cost of verifying every batch (Kafka's check.crcs): both ways, alternated over several
            # passes so that load on the machine hits both alike; the median pass is shown.
            ways = {(how, crcs): [] for how in ("decode to Record tuples", "columnar scan (numpy)") for crcs in (True, False)}
            for _ in range(PASSES):
                for how, crcs in ways:
                    work = (lambda b: len(b.records())) if how.startswith("decode") else (lambda b: len(b.scan()[1]))
                    t0 = time.perf_counter()
                    count = sum(work(b) for b in lg.batches(0, check_crcs=crcs))
                    ways[(how, crcs)].append(time.perf_counter() - t0)
            for (how, crcs), times in ways.items():
                dt = statistics.median(times)
                t.add_row(f"{how}{'' if crcs else ', check.crcs=false'}", f"{count / dt:,.0f}", f"{size / dt / 1e9:.2f}")
        console.print(t)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _last_batch(data: bytes):
    """Last offset of each whole batch in a fetch, reading only headers."""
    from compactlog.records import iter_batches

    for _, b in iter_batches(data):
        yield b.last_offset


if __name__ == "__main__":
    main()
