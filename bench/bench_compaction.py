"""Pulsar-style compaction on the cleaner benchmark's log (10 M records, 1 M keys x 10 versions), in the
same run as the log cleaner on a copy of it; then the time an application takes to rebuild a 1 M key
cache from the compacted view against reading the full log.

Usage: python bench/bench_compaction.py [--records 10000000] [--keys 1000000]
"""

from __future__ import annotations

import json
import os
import shutil
import sys

from rich.table import Table

sys.path.insert(0, os.path.dirname(__file__))
from bench_cleaner import clean_in_child  # noqa: E402
from children import bench_start, run_child, write_copies  # noqa: E402

COMPACT_CHILD = """
import json, sys, time
import compactlog
with compactlog.open(sys.argv[1]) as cl:
    t0 = time.perf_counter()
    st = cl.compact_topic("bench")[0]
    dt = time.perf_counter() - t0
print(json.dumps({"seconds": dt, "records": st.records_before, "bytes": st.bytes_before, "kept": st.records_after,
                  "rss_mb": int([l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]) / 1024}))
"""

CACHE_CHILD = """
import json, sys, time
import compactlog
compacted = sys.argv[2] == "compacted"
with compactlog.open(sys.argv[1]) as cl:
    t0 = time.perf_counter()
    cache = {}
    for r in cl.consume("bench", 0, from_beginning=True, read_compacted=compacted):
        if r.value is None:
            cache.pop(r.key, None)
        else:
            cache[r.key] = r.value
    dt = time.perf_counter() - t0
import hashlib
h = hashlib.sha256()
for k in sorted(cache):
    h.update(k + b"=" + cache[k] + b";")
print(json.dumps({"seconds": dt, "keys": len(cache), "digest": h.hexdigest()}))
"""



def main() -> None:
    args, console, root = bench_start("compaction")
    try:
        pulsar, kafka = write_copies(root, ["pulsar", "kafka"], args, console)
        rc = run_child(COMPACT_CHILD, pulsar)
        console.print(f"compact-topic: {json.dumps(rc)}")
        rk = clean_in_child(kafka, {})
        console.print(f"log cleaner: {json.dumps(rk)}")
        t = Table(title=f"one core, {args.records:,} records, {args.keys:,} keys, uncompressed")
        for col in ("", "seconds", "records/s", "MB/s", "records kept", "peak RSS MB"):
            t.add_column(col, justify="right")
        t.add_row("compact-topic (side log)", f"{rc['seconds']:.1f}", f"{rc['records'] / rc['seconds']:,.0f}",
                  f"{rc['bytes'] / 1e6 / rc['seconds']:,.1f}", f"{rc['kept']:,}", f"{rc['rss_mb']:,.0f}")
        t.add_row("log cleaner (in place)", f"{rk['seconds']:.1f}", f"{rk['records'] / rk['seconds']:,.0f}",
                  f"{rk['bytes'] / 1e6 / rk['seconds']:,.1f}", f"{rk['kept']:,}", f"{rk['rss_mb']:,.0f}")
        console.print(t)
        ratio = (rc["records"] / rc["seconds"]) / (rk["records"] / rk["seconds"])
        console.print(f"compact-topic runs at {100 * ratio:.0f}% of the cleaner's records/s")
        full, compacted = run_child(CACHE_CHILD, pulsar, "full"), run_child(CACHE_CHILD, pulsar, "compacted")
        assert full["keys"] == compacted["keys"] and full["digest"] == compacted["digest"], "the two caches differ"
        t2 = Table(title=f"rebuilding a {full['keys']:,} key cache (consume + dict)")
        for col in ("read", "seconds", "keys"):
            t2.add_column(col, justify="right")
        t2.add_row("full log", f"{full['seconds']:.1f}", f"{full['keys']:,}")
        t2.add_row("compacted view", f"{compacted['seconds']:.1f}", f"{compacted['keys']:,}")
        console.print(t2)
        console.print(f"the compacted view rebuilds the cache {full['seconds'] / compacted['seconds']:.1f}x faster")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
