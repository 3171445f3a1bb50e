"""What holding each ``.txnindex`` entry against the log costs a clean start.

At load every entry of a closed segment's ``.txnindex`` is checked against its ABORT marker and its
first batch (the file has no checksum; see docs/differences.md). This builds a log of transactions of
eight producers, every other one aborted (many more entries than a real topic has), and times a clean
reopen with the check and with it replaced by a no-op, in turns, in one run.

Usage: python bench/bench_txn_index_load.py [--transactions 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from compactlog.clock import MockTime
from compactlog.records import BatchInfo, build_batch
from compactlog.storage import loader
from compactlog.storage.log import Log
from compactlog.storage.broker_config import BrokerConfig
from compactlog.storage.log_config import LogConfig

PRODUCERS = 8
TS = 1_700_000_000_000


def build(directory: Path, transactions: int, config: LogConfig, clock: MockTime) -> tuple[int, int, int]:
    """(segments, index entries, log end) of a log of ``transactions`` one-batch transactions."""
    lg = Log(directory, config, time=clock)
    for i in range(transactions):
        pid = 1 + i % PRODUCERS
        info = BatchInfo(producer_id=pid, producer_epoch=0, base_sequence=i // PRODUCERS, is_transactional=True)
        lg.append(build_batch([b"k%d" % i], [b"v" * 100], [TS], info=info))
        if pid == PRODUCERS:
            for p in range(1, PRODUCERS + 1):
                lg.write_txn_marker(p, 0, p % 2 == 0, 1)  # odd producers abort
    lg.close()
    entries = sum(len(s.txn_index.all_aborted_txns()) for s in lg.segments)
    return len(lg.segments), entries, lg.log_end_offset


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--transactions", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="compactlog-txnload-"))
    config = LogConfig({"segment.bytes": str(64 * 1024)}, BrokerConfig({}))
    clock = MockTime()
    try:
        segments, entries, end = build(root / "t-0", args.transactions, config, clock)
        check = loader.check_index_entries

        def load() -> float:
            t0 = time.perf_counter()
            lg = Log(root / "t-0", config, time=clock, clean_shutdown=True, recovery_point=end)
            took = time.perf_counter() - t0
            lg.close()
            return took

        times: dict[str, list[float]] = {"with the check": [], "without": []}
        for _ in range(args.rounds):
            loader.check_index_entries = check
            times["with the check"].append(load())
            loader.check_index_entries = lambda *_: None
            times["without"].append(load())
        loader.check_index_entries = check
        with_s, without_s = (statistics.median(v) for v in times.values())
        table = Table(title=f"clean load: {segments} segments, {entries:,} .txnindex entries "
                            f"(medians of {args.rounds})")
        for col in ("load", "seconds", "per entry"):
            table.add_column(col, justify="right" if col != "load" else "left")
        table.add_row("with the check", f"{with_s:.3f}", f"{(with_s - without_s) / max(entries, 1) * 1e6:.1f} µs")
        table.add_row("without", f"{without_s:.3f}", "")
        Console().print(table)
        print(f"the check costs {with_s / without_s:.1f}x a load without it")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
