"""Transactional produce against the idempotent producer, into the same ``compactlog serve``.

librdkafka (confluent-kafka), 100 B values, lz4. The idempotent producer (enable.idempotence, acks=all)
and the transactional one (the same plus a transactional.id; a transaction of ``--per-transaction``
records, begin, produce, commit) write ``--records`` records each into their own one-partition topic of
one server process, in alternating rounds; records/s from the first produce() to the last delivery
(idempotent) or the last commit's return (transactional). The goal: transactional ≥ 80% of idempotent.
On a shared machine the figures move by half within minutes, so the rounds are short and many, each
round's ratio is taken between its two adjacent runs (which share the machine's load of the moment), and
the headline is the median of those ratios (with the ratios of the medians and of the best runs beside it).
The server's own CPU time per record (its process's user + system time, all threads, from /proc) is
printed too: it does not move with what else runs on the machine, nor with how hard the client's own
threads compete with the server for the cores.

A third run each round, the idempotent producer flushed after every ``--per-transaction`` records,
separates the two costs of a commit: the wait until every record is acknowledged (which any producer
that flushes pays) and the transaction's own requests.

What a transaction adds on the wire: AddPartitionsToTxn before its first batch, EndTxn at its end, and
the coordinator's work on EndTxn (PrepareCommit in ``__transaction_state``, a COMMIT marker in the
partition, CompleteCommit), during which the producer waits.

Usage: python bench/bench_transactions.py [--records N] [--per-transaction N] [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

from rich.console import Console
from rich.table import Table

sys.path.insert(0, os.path.dirname(__file__))
from bench_broker import Server  # noqa: E402

VALUE = (b"price=12.50;currency=EUR;" * 8)[:100]
CONF = {"compression.type": "lz4", "batch.size": 1_000_000, "enable.idempotence": True,
        "queue.buffering.max.messages": 2_000_000, "queue.buffering.max.kbytes": 2_000_000}


def server_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far, all its threads (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def produce_all(produce, poll, n: int, topic: str) -> None:
    for _ in range(n):
        while True:
            try:
                produce(topic, VALUE)
                break
            except BufferError:
                poll(0.001)


def idempotent_phase(bootstrap: str, topic: str, n: int, linger_ms: int = 5, flush_every: int = 0) -> float:
    """records/s of the idempotent producer; with ``flush_every``, flushed after each that many records,
    as a transaction's commit flushes (what the transaction adds beyond that is then what differs)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, **CONF, "linger.ms": linger_ms})
    p.produce(topic, b"warm-up")  # metadata, connection and producer id before the clock starts
    p.flush(30)
    t0 = time.perf_counter()
    step = flush_every or n
    for done in range(0, n, step):
        produce_all(p.produce, p.poll, min(step, n - done), topic)
        if flush_every:
            p.flush(300)
    left = p.flush(300)
    dt = time.perf_counter() - t0
    if left:
        raise RuntimeError(f"{left} records not delivered")
    return n / dt


def transactional_phase(bootstrap: str, topic: str, n: int, per_transaction: int, tid: str,
                        linger_ms: int = 5) -> tuple[float, int]:
    """(records/s, transactions) of the transactional producer."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, **CONF, "linger.ms": linger_ms})
    p.init_transactions(30)
    p.begin_transaction()  # warm-up: metadata, the coordinator's connection, the partition in a transaction
    p.produce(topic, b"warm-up")
    p.commit_transaction(30)
    t0 = time.perf_counter()
    done = transactions = 0
    while done < n:
        size = min(per_transaction, n - done)
        p.begin_transaction()
        produce_all(p.produce, p.poll, size, topic)
        p.commit_transaction(300)  # flushes the transaction's records, then EndTxn(commit)
        done += size
        transactions += 1
    dt = time.perf_counter() - t0
    return n / dt, transactions


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000, help="records per producer run (100 B values)")
    ap.add_argument("--per-transaction", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=15, help="alternating runs of each producer")
    ap.add_argument("--linger-ms", type=int, default=5, help="both producers' linger.ms (librdkafka's default: 5)")
    args = ap.parse_args()
    console = Console()
    root = tempfile.mkdtemp(prefix="bench-transactions-")
    idempotent: list[float] = []
    flushed: list[float] = []
    transactional: list[float] = []
    cpu = {"idempotent": 0.0, "transactional": 0.0}
    try:
        srv = Server(os.path.join(root, "data"))
        try:
            for r in range(args.rounds):
                before = server_cpu_s(srv.proc.pid)
                idempotent.append(idempotent_phase(srv.bootstrap, f"idempotent-{r}", args.records, args.linger_ms))
                cpu["idempotent"] += server_cpu_s(srv.proc.pid) - before
                console.print(f"round {r + 1}: idempotent {idempotent[-1]:,.0f} rec/s")
                flushed.append(idempotent_phase(srv.bootstrap, f"flushed-{r}", args.records, args.linger_ms,
                                                args.per_transaction))
                console.print(f"round {r + 1}: idempotent, flushed every {args.per_transaction:,} records "
                              f"{flushed[-1]:,.0f} rec/s")
                before = server_cpu_s(srv.proc.pid)
                rate, count = transactional_phase(srv.bootstrap, f"transactional-{r}", args.records,
                                                  args.per_transaction, f"bench-{r}", args.linger_ms)
                cpu["transactional"] += server_cpu_s(srv.proc.pid) - before
                transactional.append(rate)
                console.print(f"round {r + 1}: transactional {rate:,.0f} rec/s ({count} transactions)")
        finally:
            srv.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    med_i, med_t = statistics.median(idempotent), statistics.median(transactional)
    table = Table(title=f"transactional produce, librdkafka, 100 B lz4, linger.ms {args.linger_ms} "
                        f"({os.cpu_count()} cores)")
    for col in ("producer", "records/s (median)", "best", "each round"):
        table.add_column(col)
    table.add_row(f"idempotent ({args.records:,} records a round)", f"{med_i:,.0f}", f"{max(idempotent):,.0f}",
                  ", ".join(f"{x:,.0f}" for x in idempotent))
    table.add_row(f"transactional ({args.per_transaction:,} per transaction)", f"{med_t:,.0f}",
                  f"{max(transactional):,.0f}", ", ".join(f"{x:,.0f}" for x in transactional))
    ratios = [t / i for i, t in zip(idempotent, transactional)]
    table.add_row("transactional / idempotent", f"{med_t / med_i:.2f}", f"{max(transactional) / max(idempotent):.2f}",
                  ", ".join(f"{r:.2f}" for r in ratios))
    table.add_row(f"idempotent, flushed every {args.per_transaction:,} records", f"{statistics.median(flushed):,.0f}",
                  f"{max(flushed):,.0f}", ", ".join(f"{x:,.0f}" for x in flushed))
    console.print(table)
    console.print(f"transactional / idempotent, median of the rounds' ratios: {statistics.median(ratios):.2f} "
                  f"(goal ≥ 0.80)")
    console.print(f"transactional / idempotent flushed at the same points (what the transactions themselves "
                  f"cost), median of the rounds' ratios: "
                  f"{statistics.median(t / f for f, t in zip(flushed, transactional)):.2f}")
    per = {k: v / (args.records * args.rounds) * 1e6 for k, v in cpu.items()}
    console.print(f"server CPU per record: idempotent {per['idempotent']:.2f} µs, transactional "
                  f"{per['transactional']:.2f} µs; records per server CPU-second, transactional / idempotent "
                  f"{per['idempotent'] / per['transactional']:.2f}")


if __name__ == "__main__":
    main()
