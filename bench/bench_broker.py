"""compactlog serve under librdkafka (confluent-kafka): producer throughput against the protocol ceiling,
consumer throughput over a large topic, and end-to-end latency at a steady rate. Prints a table.

* Producer: 100 B and 1 KB values, lz4, acks=1, into ``compactlog serve``, and the same client into a
  discard server: our own network shell and protocol codec whose Produce handler answers at once without
  storing (the ceiling of this machine for our protocol stack). Each server is its own process.
* Consumer: a topic of ``--consumer-mb`` MB of 1 KB values (written through the storage API before the
  server starts), read from the beginning by a librdkafka consumer; MB/s of record bytes delivered.
* Latency: a producer at a steady 10,000 records/s (linger.ms=0) and a consumer of the same topic; the
  time from each record's create timestamp to its arrival; p50 and p99.

Usage: python bench/bench_broker.py [--records N] [--consumer-mb MB] [--latency-seconds S]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from rich.console import Console
from rich.table import Table

LISTENING = re.compile(r"listening on \w+://[^:]+:(\d+)")


# servers ------------------------------------------------------------------------------------------
def discard_server_main(data_dir: str) -> None:
    """A broker whose Produce handler stores nothing (run in a child process)."""
    from compactlog.server import produce as produce_api
    from compactlog.server.network import KafkaServer
    from compactlog.server.server_config import ServerConfig

    async def discard(broker, req, session):
        body = req.body
        if body.acks == 0:
            return None
        rows = [[(p.index, 0, 0, -1, 0, None) for p in t.partition_data] for t in body.topic_data]
        return produce_api.answer(req, body, rows)

    async def main() -> None:
        server = KafkaServer(data_dir, ServerConfig({"listeners": "PLAINTEXT://127.0.0.1:0"}),
                             on_listening=lambda url: print(f"listening on {url}", flush=True))
        await server.start()
        server.broker.handlers[0] = discard
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()
        await server.stop()

    asyncio.run(main())


class Server:
    def __init__(self, data_dir: str, discard: bool = False) -> None:
        if discard:
            args = [sys.executable, __file__, "--discard-server", data_dir]
        else:
            args = [sys.executable, "-m", "compactlog", "serve", "--data-dir", data_dir,
                    "--override", "listeners=PLAINTEXT://127.0.0.1:0"]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        for line in self.proc.stdout:
            m = LISTENING.search(line.decode())
            if m:
                self.bootstrap = f"127.0.0.1:{m.group(1)}"
                return
        raise RuntimeError("server did not start")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(120)


# phases -------------------------------------------------------------------------------------------
def produce_phase(bootstrap: str, topic: str, n: int, value_size: int) -> tuple[float, float]:
    """(records/s, MB/s of values) from the first produce() to the last delivery report."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "compression.type": "lz4", "acks": 1, "linger.ms": 5,
                  "batch.size": 1_000_000, "queue.buffering.max.messages": 2_000_000,
                  "queue.buffering.max.kbytes": 2_000_000})
    p.produce(topic, b"warm-up")  # metadata and connection before the clock starts
    p.flush(30)
    value = (b"price=12.50;currency=EUR;" * 64)[:value_size]
    produce = p.produce
    t0 = time.perf_counter()
    for i in range(n):
        while True:
            try:
                produce(topic, value)
                break
            except BufferError:
                p.poll(0.001)
    left = p.flush(300)
    dt = time.perf_counter() - t0
    if left:
        raise RuntimeError(f"{left} records not delivered")
    return n / dt, n * value_size / dt / 1e6


def write_topic(data_dir: str, topic: str, megabytes: int, value_size: int = 1024) -> int:
    """``megabytes`` of values through the storage API (no wire); returns the record count."""
    import compactlog
    from compactlog.records import build_batch

    value = b"v" * value_size
    per = max(1, 900 * 1024 // value_size)
    batch = build_batch([None] * per, [value] * per, [int(time.time() * 1000)] * per)
    n = 0
    with compactlog.open(data_dir) as cl:
        cl.create_topic(topic, 1)
        lg = cl.log(topic, 0)
        while n * value_size < megabytes * 1_000_000:
            lg.append(batch)
            n += per
    return n


def consume_phase(bootstrap: str, topic: str, expect: int) -> tuple[float, float]:
    """(MB/s of record values, records/s) reading ``expect`` records from offset 0."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                  "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 8388608,
                  })
    c.assign([TopicPartition(topic, 0, 0)])
    got = size = 0
    t0 = None
    idle = 0.0
    while got < expect:
        msgs = c.consume(500, 0.1)  # a small batch: consume() waits until it has them all or times out
        if not msgs:
            idle += 0.1
            if idle < 10:
                continue
            raise RuntimeError(f"consumer stalled after {got} records")
        idle = 0.0
        if t0 is None:
            t0 = time.perf_counter()
        for m in msgs:
            size += len(m.value())
        got += len(msgs)
    dt = time.perf_counter() - t0
    c.close()
    return size / dt / 1e6, got / dt


def _latency_consumer(bootstrap: str, topic: str, total: int, ready, out) -> None:
    """Child process: read ``total`` records and send back each one's delay after its create time."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "lat", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 100, "fetch.min.bytes": 1})
    c.assign([TopicPartition(topic, 0, 1)])
    c.poll(0.5)  # connected, first fetch parked
    ready.set()
    latencies = []
    deadline = time.monotonic() + 120
    while len(latencies) < total and time.monotonic() < deadline:
        m = c.poll(0.2)  # one at a time: a batch call waits for its whole batch and adds a delay of its own
        if m is not None and not m.error():
            latencies.append(time.time() * 1000 - m.timestamp()[1])
    c.close()
    out.send(latencies)


def latency_phase(bootstrap: str, topic: str, seconds: float, rate: int = 10_000,
                  linger_ms: int = 5) -> tuple[float, float, int]:
    """(p50 ms, p99 ms, records) from create timestamp to arrival at a consumer in another process.

    The producer keeps librdkafka's default linger.ms (5 ms); it sends ``rate / 1000`` records every
    millisecond, sleeping in between.
    """
    import multiprocessing as mp

    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": linger_ms, "acks": 1})
    p.produce(topic, b"warm-up")
    p.flush(30)
    total = int(seconds * rate)
    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    recv, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_latency_consumer, args=(bootstrap, topic, total, ready, send))
    child.start()
    ready.wait(60)
    per_ms = max(1, rate // 1000)
    value = b"x" * 100
    start = time.perf_counter()
    for tick in range(total // per_ms):
        for _ in range(per_ms):
            p.produce(topic, value)
        p.poll(0)
        delay = start + (tick + 1) / 1000 - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
    p.flush(30)
    latencies = recv.recv()
    child.join(30)
    q = statistics.quantiles(latencies, n=100)
    return q[49], q[98], len(latencies)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=2_000_000, help="records per producer run (100 B values)")
    ap.add_argument("--consumer-mb", type=int, default=1000)
    ap.add_argument("--latency-seconds", type=float, default=10.0)
    ap.add_argument("--discard-server", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.discard_server:
        discard_server_main(args.discard_server)
        return
    console = Console()
    root = tempfile.mkdtemp(prefix="bench-broker-")
    rows = []
    try:
        for value_size, n in ((100, args.records), (1024, max(args.records // 5, 1000))):
            figures = {}
            for kind in ("discard", "compactlog serve"):
                d = os.path.join(root, f"{kind.split()[0]}-{value_size}")
                srv = Server(d, discard=(kind == "discard"))
                try:
                    figures[kind] = produce_phase(srv.bootstrap, "bench", n, value_size)
                finally:
                    srv.stop()
                    shutil.rmtree(d, ignore_errors=True)
            ours, ceiling = figures["compactlog serve"], figures["discard"]
            rows.append((f"produce {value_size} B lz4 acks=1 ({n:,} records)", f"{ours[0]:,.0f} rec/s",
                         f"{ours[1]:,.1f} MB/s", f"ceiling {ceiling[0]:,.0f} rec/s; {ours[0] / ceiling[0]:.0%} of it"))
            console.print(rows[-1])
        d = os.path.join(root, "consume")
        n = write_topic(d, "big", args.consumer_mb)
        srv = Server(d)
        try:
            mbps, rps = consume_phase(srv.bootstrap, "big", n)
            rows.append((f"consume {args.consumer_mb} MB of 1 KB values from offset 0", f"{rps:,.0f} rec/s",
                         f"{mbps:,.0f} MB/s", ""))
            console.print(rows[-1])
            p50, p99, count = latency_phase(srv.bootstrap, "lat", args.latency_seconds)
            rows.append((f"end-to-end latency at 10,000 rec/s ({count:,} records)", f"p50 {p50:.2f} ms",
                         f"p99 {p99:.2f} ms", ""))
        finally:
            srv.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    table = Table(title=f"compactlog serve with librdkafka ({os.cpu_count()} cores)")
    for col in ("what", "records", "bytes", "against"):
        table.add_column(col)
    for r in rows:
        table.add_row(*r)
    console.print(table)


if __name__ == "__main__":
    main()
