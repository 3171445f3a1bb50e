"""Benchmark data for the cleaners: N records of ~100-byte JSON-like values over K keys, each key
updated N/K times in shuffled order, in ~16 KB batches (the issue's 10 M / 1 M keys layout)."""

from __future__ import annotations

import numpy as np

import compactlog
from compactlog.records import BatchInfo, Codec, build_batch

BATCH_BYTES = 16 * 1024


def write_topic(path: str, records: int, keys: int, codec: Codec, seed: int = 1, broker: dict | None = None,
                progress=None, transactions: "Transactions | None" = None) -> int:
    """Create topic ``bench`` (compacted, everything in closed segments) and fill it; returns its size.
    With ``transactions`` the same batches are written by transactional producers, in transactions of
    ``transactions.batches`` batches each, a share of them aborted (their markers between them)."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(np.repeat(np.arange(keys), records // keys))
    ts = 1_700_000_000_000
    per = BATCH_BYTES // 130
    with compactlog.open(path, broker or {}) as cl:
        cl.create_topic("bench", 1, {"cleanup.policy": "compact", "segment.bytes": str(128 << 20),
                                     "min.cleanable.dirty.ratio": "0.01", "max.message.bytes": str(4 << 20)})
        lg = cl.log("bench")
        for start in range(0, len(order), per):
            ids = order[start : start + per].tolist()
            k = [b"product-%08d" % i for i in ids]
            v = [b'{"sku":"product-%08d","price":%d.%02d,"currency":"EUR","stock":%d,"updated":%d}     ' %
                 (i, (i * 7 + start) % 1000, start % 100, (i + start) % 50, ts + start) for i in ids]
            if transactions is None:
                lg.append(build_batch(k, v, [ts + start] * len(k), codec=codec))
            else:
                transactions.append(lg, k, v, ts + start, codec)
            if progress and start % (per * 2000) == 0:
                progress(start, len(order))
        if transactions is not None:
            transactions.finish(lg)
        lg.roll()
        return lg.size


class Transactions:
    """Transactional producers taking turns: each writes ``batches`` batches in one transaction, then
    its marker; ``aborted`` of the transactions (chosen at random) end with ABORT."""

    def __init__(self, aborted: float = 0.1, batches: int = 10, producers: int = 8, seed: int = 2) -> None:
        self.aborted, self.batches, self.producers = aborted, batches, producers
        self.rng = np.random.default_rng(seed)
        self.seqs = [0] * producers
        self.in_txn = 0  # batches written in the current transaction
        self.pid = 0
        self.count = self.aborted_count = 0

    def append(self, lg, keys, values, ts: int, codec: Codec) -> None:
        pid = self.pid
        info = BatchInfo(producer_id=1000 + pid, producer_epoch=0, base_sequence=self.seqs[pid], is_transactional=True)
        lg.append(build_batch(keys, values, [ts] * len(keys), codec=codec, info=info))
        self.seqs[pid] += len(keys)
        self.in_txn += 1
        if self.in_txn == self.batches:
            self.finish(lg)

    def finish(self, lg) -> None:
        if not self.in_txn:
            return
        abort = bool(self.rng.random() < self.aborted)
        lg.write_txn_marker(1000 + self.pid, 0, not abort, 0)
        self.count += 1
        self.aborted_count += abort
        self.in_txn = 0
        self.pid = (self.pid + 1) % self.producers
