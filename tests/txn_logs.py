"""Random compacted logs holding transactions, for comparing the ways of cleaning them.

``build`` writes topic ``t`` as a broker would: transactional producers' batches through
``Partition.append`` (committed, aborted, some spanning segments, one left open so the last stable
offset bounds cleaning), idempotent and plain producers between them, tombstones, and an earlier
cleaning halfway so that some markers already carry a delete horizon and some batches are empty.
``committed_latest`` is the model every cleaning must agree with: the latest committed value per key.
"""

from __future__ import annotations

import random
from pathlib import Path

import compactlog
from compactlog.clock import MockTime
from compactlog.records.batch import BatchInfo, build_batch

START_MS = 1_700_000_000_000
CONFIG = {"cleanup.policy": "compact", "segment.bytes": "3000", "min.cleanable.dirty.ratio": "0.01",
          "delete.retention.ms": "2000", "file.delete.delay.ms": "0"}


def _append(part, rng: random.Random, clock: MockTime, pid: int = -1, seq: int = -1, transactional: bool = False) -> int:
    n = rng.randint(1, 6)
    keys = [b"k%02d" % rng.randrange(30) for _ in range(n)]
    values = [None if rng.random() < 0.1 else b"v%06d" % rng.randrange(10**6) for _ in range(n)]
    info = BatchInfo(producer_id=pid, producer_epoch=0 if pid >= 0 else -1, base_sequence=seq,
                     is_transactional=transactional)
    part.append(build_batch(keys, values, [clock.milliseconds()] * n, info=info))
    return n


def build(root: Path, seed: int, partitions: int = 1, steps: int = 400) -> None:
    rng = random.Random(seed)
    clock = MockTime(START_MS)
    with compactlog.open(root, time=clock) as cl:
        cl.create_topic("t", partitions, CONFIG)
        for p in range(partitions):
            part = cl.partition("t", p)
            seqs: dict[int, int] = {}
            open_txns: set[int] = set()
            for step in range(steps):
                roll = rng.random()
                if roll < 0.45:  # a transactional batch (opening its producer's transaction if needed)
                    pid = rng.randrange(1, 6)
                    seqs[pid] = seqs.get(pid, 0) + _append(part, rng, clock, pid, seqs.get(pid, 0), True)
                    open_txns.add(pid)
                elif roll < 0.6 and open_txns:  # a transaction ends: a third of them aborted
                    pid = rng.choice(sorted(open_txns))
                    part.write_txn_marker(pid, 0, rng.random() >= 1 / 3, 0)
                    open_txns.discard(pid)
                elif roll < 0.8:  # an idempotent producer
                    pid = rng.randrange(10, 13)
                    seqs[pid] = seqs.get(pid, 0) + _append(part, rng, clock, pid, seqs.get(pid, 0))
                else:
                    _append(part, rng, clock)
                clock.sleep(rng.randint(0, 20))
                if step == steps // 2:
                    cl.clean("t")
                    clock.sleep(1000)
            for pid in sorted(open_txns)[1:]:  # one transaction stays open: the LSO stops cleaning
                part.write_txn_marker(pid, 0, rng.random() < 0.5, 0)
            _append(part, rng, clock)
        clock.sleep(1500)  # some horizons stamped halfway have passed, others not


def committed_latest(cl, partition: int = 0, end: int | None = None) -> dict[bytes, bytes]:
    """Key -> latest committed value (tombstones delete) of the records below ``end`` (default: the last
    stable offset), read read_committed."""
    part = cl.partition("t", partition)
    end = part.last_stable_offset if end is None else end
    latest: dict[bytes, bytes | None] = {}
    for r in cl.consume("t", partition, from_beginning=True, isolation_level="read_committed"):
        if r.offset < end and r.key is not None:
            latest[r.key] = r.value
    return {k: v for k, v in latest.items() if v is not None}
