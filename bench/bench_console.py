"""What the web console costs the broker: produce latency with and without browsers loading pages.

One ``compactlog serve --http`` process on 127.0.0.1. A producer sends records at a steady rate with
acks=all and linger.ms=0, and each record's acknowledgement time is measured, first with the console
idle, then while page loaders ask for heavy pages back to back (500 JSON records pretty-printed, the
overview, the topic page with its segment strips). Prints a table: latency percentiles, and how many
pages the loaders got meanwhile and how long they took.

Usage: python bench/bench_console.py [--seconds S] [--rate R] [--loaders N]
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import numpy as np
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.table import Table

PAGES = ["/topics/big/messages?partition=0&offset=0&limit=500&format=json", "/", "/topics/big"]


class Server:
    def __init__(self, data_dir: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "compactlog", "serve", "--data-dir", data_dir, "--http", "127.0.0.1:0",
             "--override", "listeners=PLAINTEXT://127.0.0.1:0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.bootstrap = self.console = None
        for line in self.proc.stdout:
            text = line.decode().strip()
            if m := re.search(r"listening on \w+://(\S+)", text):
                self.bootstrap = m.group(1)
            if m := re.search(r"web console at (\S+?)/?$", text):
                self.console = m.group(1)
                return
        raise RuntimeError("server did not start")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(120)


def fill(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic("big", 1, config={"segment.bytes": "1048576"}), NewTopic("lat", 1)]).values():
        f.result(30)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "compression.type": "lz4"})
    for i in range(50_000):
        p.produce("big", key=f"k{i % 5000}".encode(),
                  value=json.dumps({"sku": i, "price": i % 97 + 0.5, "tags": ["a", "b"], "note": "x" * 300}).encode())
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(120) == 0


def latencies(bootstrap: str, seconds: float, rate: int) -> np.ndarray:
    """Acknowledgement time of each record, sent ``rate`` per second for ``seconds``."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
    out: list[float] = []
    interval = 1 / rate
    start = time.perf_counter()
    n = int(seconds * rate)
    for i in range(n):
        due = start + i * interval
        while (now := time.perf_counter()) < due:
            p.poll(max(0.0, min(due - now, 0.001)))
        sent = time.perf_counter()
        p.produce("lat", value=b"x" * 100, on_delivery=lambda err, msg, t=sent: out.append(
            time.perf_counter() - t if err is None else float("nan")))
    p.flush(60)
    return np.array(out) * 1000


def load(console: str, stop: threading.Event, took: list[float]) -> None:
    i = 0
    while not stop.is_set():
        t = time.perf_counter()
        with urllib.request.urlopen(console + PAGES[i % len(PAGES)], timeout=120) as r:
            r.read()
        took.append(time.perf_counter() - t)
        i += 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--rate", type=int, default=200, help="records a second, one request each (linger.ms=0)")
    ap.add_argument("--loaders", type=int, default=4, help="page loaders asking back to back")
    args = ap.parse_args()
    out = Console(width=120)
    with tempfile.TemporaryDirectory(prefix="compactlog-console-bench-") as d:
        srv = Server(d)
        try:
            out.print("filling: 50,000 records of ~380 B JSON in 'big'")
            fill(srv.bootstrap)
            for page in PAGES:  # warm: the closed segments' summaries are read once
                urllib.request.urlopen(srv.console + page, timeout=120).read()
            rows = []
            idle = latencies(srv.bootstrap, args.seconds, args.rate)
            rows.append(("console idle", idle, None))
            stop, took = threading.Event(), []
            loaders = [threading.Thread(target=load, args=(srv.console, stop, took)) for _ in range(args.loaders)]
            for t in loaders:
                t.start()
            busy = latencies(srv.bootstrap, args.seconds, args.rate)
            stop.set()
            for t in loaders:
                t.join()
            rows.append((f"{args.loaders} loaders asking for pages", busy, took))
        finally:
            srv.stop()
    t = Table(title=f"produce latency (acks=all, linger.ms=0, {args.rate} records/s for {args.seconds:g} s), "
                    "with and without the console busy")
    for col in ("console", "p50 ms", "p99 ms", "max ms", "pages served", "page p50 s", "page p99 s"):
        t.add_column(col, justify="right" if col != "console" else "left")
    for name, lat, pages in rows:
        lat = lat[~np.isnan(lat)]
        page_cols = (f"{len(pages):,}", f"{np.percentile(pages, 50):.2f}", f"{np.percentile(pages, 99):.2f}") \
            if pages else ("-", "-", "-")
        t.add_row(name, f"{np.percentile(lat, 50):.2f}", f"{np.percentile(lat, 99):.2f}", f"{lat.max():.2f}", *page_cols)
    out.print(t)


if __name__ == "__main__":
    main()
