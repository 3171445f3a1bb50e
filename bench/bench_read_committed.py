"""read_committed against read_uncommitted: a librdkafka consumer over a topic with 10% aborted transactions.

The topic (``--mb`` MB of 1 KB values, written through the embedded API before the server starts) holds
only transactional data: ``--producers`` producers write in turn, one batch of ``--batch`` records each,
so their transactions (``--txn-batches`` batches each) overlap; every tenth transaction of each producer
ends with an ABORT marker, the others with COMMIT. ``compactlog serve`` then serves it, and a
confluent-kafka consumer reads it from offset 0 to the end at each isolation level, alternating, ``--rounds``
times each. A read_committed read hands out 90% of the records (the client drops the aborted ones, which
the broker lists from the ``.txnindex`` files); both levels move the same bytes over the wire.

Two figures per level: the topic's value bytes over the time to reach its end (the log read per second,
what the ratio is about: the goal is read_committed >= 0.9 of read_uncommitted) and the value bytes
handed to the application per second. The best round of each level is compared.

Usage: python bench/bench_read_committed.py [--mb MB] [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from bench_broker import Server  # noqa: E402

TOPIC = "txns"


def write_topic(data_dir: str, megabytes: int, producers: int, batch: int, txn_batches: int,
                value_size: int = 1024) -> tuple[int, int, int]:
    """The transactional topic; (records, committed records, aborted transactions)."""
    import compactlog
    from compactlog.records.batch import BatchInfo, build_batch

    value = b"v" * value_size
    keys = [b"k%d" % i for i in range(batch)]
    sequences = [0] * producers
    written = [0] * producers  # batches of each producer's current transaction
    txn_index = [0] * producers
    total = committed = aborted = 0
    pending = [0] * producers  # records of the current transaction
    with compactlog.open(data_dir) as cl:
        cl.create_topic(TOPIC, 1)
        part = cl.partition(TOPIC, 0)
        now = int(time.time() * 1000)
        while total * value_size < megabytes * 1_000_000:
            for p in range(producers):
                pid = 1_000_000 + p
                info = BatchInfo(producer_id=pid, producer_epoch=0, base_sequence=sequences[p], is_transactional=True)
                part.append(build_batch(keys, [value] * batch, [now] * batch, info=info))
                sequences[p] += batch
                total += batch
                pending[p] += batch
                written[p] += 1
                if written[p] == txn_batches:
                    abort = txn_index[p] % 10 == 9
                    part.write_txn_marker(pid, 0, not abort, 0)
                    aborted += abort
                    committed += 0 if abort else pending[p]
                    written[p] = pending[p] = 0
                    txn_index[p] += 1
        for p in range(producers):  # close what is open, so that the LSO is the end
            if written[p]:
                part.write_txn_marker(1_000_000 + p, 0, True, 0)
                committed += pending[p]
        assert part.last_stable_offset == part.log_end_offset
    return total, committed, aborted


def consume(bootstrap: str, isolation: str, expect: int, end: int) -> tuple[float, int]:
    """(seconds from the first record to the end of the topic, value bytes handed out)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{isolation}", "enable.auto.commit": False,
                  "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 8388608,
                  "isolation.level": isolation, "enable.partition.eof": True})
    c.assign([TopicPartition(TOPIC, 0, 0)])
    got = size = 0
    t0 = None
    idle = 0.0
    try:
        while True:
            msgs = c.consume(500, 0.1)
            if not msgs:
                idle += 0.1
                if idle < 10:
                    continue
                raise RuntimeError(f"{isolation} consumer stalled after {got} records")
            idle = 0.0
            if t0 is None:
                t0 = time.perf_counter()
            eof = False
            for m in msgs:
                if m.error() is not None:
                    if m.error().code() != KafkaError._PARTITION_EOF:
                        raise RuntimeError(str(m.error()))
                    eof = m.offset() >= end
                    continue
                size += len(m.value())
                got += 1
            if eof:
                break
        dt = time.perf_counter() - t0
    finally:
        c.close()
    if got != expect:
        raise RuntimeError(f"{isolation}: {got} records handed out, {expect} expected")
    return dt, size


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=500, help="MB of 1 KB values in the topic")
    ap.add_argument("--producers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=100, help="records per batch")
    ap.add_argument("--txn-batches", type=int, default=10, help="batches per transaction")
    ap.add_argument("--rounds", type=int, default=3, help="reads at each level, alternating")
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="bench-rc-")
    try:
        d = os.path.join(root, "data")
        t0 = time.perf_counter()
        total, committed, aborted = write_topic(d, args.mb, args.producers, args.batch, args.txn_batches)
        value_mb = total * 1024 / 1e6
        print(f"topic: {total:,} records ({value_mb:,.0f} MB of values) in transactions of "
              f"{args.batch * args.txn_batches:,} records from {args.producers} producers, {aborted:,} aborted "
              f"({1 - committed / total:.1%} of the records); written in {time.perf_counter() - t0:.1f} s", flush=True)
        srv = Server(d)
        try:
            from confluent_kafka import Consumer, TopicPartition

            probe = Consumer({"bootstrap.servers": srv.bootstrap, "group.id": "probe"})
            _, end = probe.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=30)
            probe.close()
            best: dict[str, tuple[float, int]] = {}
            for r in range(args.rounds):
                for isolation, expect in (("read_uncommitted", total), ("read_committed", committed)):
                    dt, size = consume(srv.bootstrap, isolation, expect, end)
                    print(f"round {r + 1} {isolation:>16}: {dt:6.2f} s to the end, log {value_mb / dt:7.0f} MB/s, "
                          f"handed out {size / dt / 1e6:7.0f} MB/s", flush=True)
                    if isolation not in best or dt < best[isolation][0]:
                        best[isolation] = (dt, size)
        finally:
            srv.stop()
        (du, su), (dc, sc) = best["read_uncommitted"], best["read_committed"]
        print(f"best: read_uncommitted {value_mb / du:,.0f} MB/s of log ({su / du / 1e6:,.0f} MB/s handed out), "
              f"read_committed {value_mb / dc:,.0f} MB/s of log ({sc / dc / 1e6:,.0f} MB/s handed out)")
        print(f"ratio read_committed / read_uncommitted: {du / dc:.2f} of the log read per second (goal >= 0.90), "
              f"{(sc / dc) / (su / du):.2f} of the bytes handed out per second")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
