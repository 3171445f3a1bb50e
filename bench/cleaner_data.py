"""Benchmark data for the cleaners: N records of ~100-byte JSON-like values over K keys, each key
updated N/K times in shuffled order, in ~16 KB batches (the issue's 10 M / 1 M keys layout)."""

from __future__ import annotations

import numpy as np

import compactlog
from compactlog.records import Codec, build_batch

BATCH_BYTES = 16 * 1024


def write_topic(path: str, records: int, keys: int, codec: Codec, seed: int = 1, broker: dict | None = None,
                progress=None) -> int:
    """Create topic ``bench`` (compacted, everything in closed segments) and fill it; returns its size."""
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
            lg.append(build_batch(k, v, [ts + start] * len(k), codec=codec))
            if progress and start % (per * 2000) == 0:
                progress(start, len(order))
        lg.roll()
        return lg.size
