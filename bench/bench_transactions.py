"""Transactional produce against the idempotent producer, into the same ``compactlog serve``.

librdkafka (confluent-kafka), 100 B values, lz4. The idempotent producer (enable.idempotence, acks=all)
and the transactional one (the same plus a transactional.id; a transaction of ``--per-transaction``
records, begin, produce, commit) write ``--records`` records each into their own one-partition topic of
one server process, in alternating rounds; records/s from the first produce() to the last delivery
(idempotent) or the last commit's return (transactional). The goal: transactional ≥ 80% of idempotent.

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
CONF = {"compression.type": "lz4", "linger.ms": 5, "batch.size": 1_000_000, "enable.idempotence": True,
        "queue.buffering.max.messages": 2_000_000, "queue.buffering.max.kbytes": 2_000_000}


def produce_all(produce, poll, n: int, topic: str) -> None:
    for _ in range(n):
        while True:
            try:
                produce(topic, VALUE)
                break
            except BufferError:
                poll(0.001)


def idempotent_phase(bootstrap: str, topic: str, n: int) -> float:
    """records/s of the idempotent producer."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, **CONF})
    p.produce(topic, b"warm-up")  # metadata, connection and producer id before the clock starts
    p.flush(30)
    t0 = time.perf_counter()
    produce_all(p.produce, p.poll, n, topic)
    left = p.flush(300)
    dt = time.perf_counter() - t0
    if left:
        raise RuntimeError(f"{left} records not delivered")
    return n / dt


def transactional_phase(bootstrap: str, topic: str, n: int, per_transaction: int, tid: str) -> tuple[float, int]:
    """(records/s, transactions) of the transactional producer."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, **CONF})
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
    ap.add_argument("--records", type=int, default=1_000_000, help="records per producer run (100 B values)")
    ap.add_argument("--per-transaction", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=2, help="alternating runs of each producer; the best counts")
    args = ap.parse_args()
    console = Console()
    root = tempfile.mkdtemp(prefix="bench-transactions-")
    idempotent: list[float] = []
    transactional: list[float] = []
    try:
        srv = Server(os.path.join(root, "data"))
        try:
            for r in range(args.rounds):
                idempotent.append(idempotent_phase(srv.bootstrap, f"idempotent-{r}", args.records))
                console.print(f"round {r + 1}: idempotent {idempotent[-1]:,.0f} rec/s")
                rate, count = transactional_phase(srv.bootstrap, f"transactional-{r}", args.records,
                                                  args.per_transaction, f"bench-{r}")
                transactional.append(rate)
                console.print(f"round {r + 1}: transactional {rate:,.0f} rec/s ({count} transactions)")
        finally:
            srv.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    best_i, best_t = max(idempotent), max(transactional)
    table = Table(title=f"transactional produce, librdkafka, 100 B lz4 ({os.cpu_count()} cores)")
    for col in ("producer", "records/s (best)", "each round", "ratio"):
        table.add_column(col)
    table.add_row(f"idempotent ({args.records:,} records)", f"{best_i:,.0f}",
                  ", ".join(f"{x:,.0f}" for x in idempotent), "")
    table.add_row(f"transactional ({args.per_transaction:,} per transaction)", f"{best_t:,.0f}",
                  ", ".join(f"{x:,.0f}" for x in transactional),
                  f"{best_t / best_i:.0%} (medians {statistics.median(transactional) / statistics.median(idempotent):.0%})")
    console.print(table)


if __name__ == "__main__":
    main()
