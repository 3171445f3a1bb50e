"""Randomized model test: random appends, tombstones, rolls, clock moves, policy changes and clean
rounds, checked after every round against a plain dict model of what was appended."""

from __future__ import annotations

import random

import pytest

import compactlog
from compactlog.clock import MockTime

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def check(cl, appended: dict[int, tuple[bytes, bytes | None]], checkpoint: int, removed_tombstones_ok: set[bytes]):
    recs = list(cl.consume("t", 0, from_beginning=True))
    offsets = [r.offset for r in recs]
    assert offsets == sorted(set(offsets)), "order and uniqueness of offsets"
    present = {r.offset: (r.key, r.value) for r in recs}
    for off, kv in present.items():
        assert appended[off] == kv, f"offset {off} changed content"
    # nothing at or after the cleaned point is lost
    for off, kv in appended.items():
        if off >= checkpoint:
            assert present.get(off) == kv, f"uncleaned offset {off} lost"
    # the latest record of every key survives (a tombstone may go once its horizon passed)
    latest: dict[bytes, int] = {}
    for off in sorted(appended):
        latest[appended[off][0]] = off
    for key, off in latest.items():
        if appended[off][1] is None and key in removed_tombstones_ok:
            continue
        assert off in present, f"latest record of {key!r} at {off} lost"
    # below the cleaned point each key appears at most once
    seen = [present[o][0] for o in present if o < checkpoint]
    assert len(seen) == len(set(seen)), "duplicate key left in the cleaned section"


@pytest.mark.parametrize("seed", range(6))
def test_random_operations_against_a_dict_model(tmp_path, seed):
    rng = random.Random(seed)
    clock = MockTime()
    small_map = seed % 2 == 1
    broker = {"log.cleaner.dedupe.buffer.size": str(24 * 40)} if small_map else {}
    appended: dict[int, tuple[bytes, bytes | None]] = {}
    tombstone_time: dict[bytes, int] = {}
    with compactlog.open(tmp_path / "data", broker, time=clock) as cl:
        cl.create_topic("t", 1, {"cleanup.policy": "compact", "segment.bytes": str(rng.choice([600, 1500, 4000])),
                                 "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "500",
                                 "file.delete.delay.ms": str(rng.choice([0, 100]))})
        policy = "compact"
        for step in range(120):
            op = rng.random()
            if op < 0.55:
                n = rng.randint(1, 12)
                rows = []
                for _ in range(n):
                    key = b"key-%d" % rng.randint(0, 30)
                    value = None if rng.random() < 0.1 else b"v%d-%d" % (step, rng.randint(0, 10**6))
                    rows.append((key, value))
                res = cl.produce_batch("t", rows, partition=0, compression=rng.choice(CODECS),
                                       batch_bytes=rng.choice([60, 200, 5000]))
                for i, kv in enumerate(rows):
                    appended[res[0].first_offset + i] = kv
                    if kv[1] is None:
                        tombstone_time[kv[0]] = clock.milliseconds()
            elif op < 0.65:
                cl.log("t").roll()
            elif op < 0.75:
                clock.advance(rng.choice([10, 200, 600]))
            elif op < 0.80:
                policy = rng.choice(["compact", "delete", "compact"])
                cl.alter_topic_config("t", set={"cleanup.policy": policy})
            else:
                cl.clean("t")
                checkpoint = cl.cleaner.manager.checkpoints.get(("t", 0), 0)
                # a tombstone may be removed only once it was seen by a clean and its horizon passed;
                # we accept removal for any tombstone older than delete.retention.ms
                ok = {k for k, t in tombstone_time.items() if clock.milliseconds() - t >= 500}
                check(cl, appended, checkpoint, ok)
        cl.alter_topic_config("t", set={"cleanup.policy": "compact"})
        cl.clean("t")
        check(cl, appended, cl.cleaner.manager.checkpoints.get(("t", 0), 0),
              {k for k, t in tombstone_time.items() if clock.milliseconds() - t >= 500})
    with compactlog.open(tmp_path / "data", broker, time=clock) as cl:  # and it all reopens the same
        check(cl, appended, cl.cleaner.manager.checkpoints.get(("t", 0), 0),
              {k for k, t in tombstone_time.items() if clock.milliseconds() - t >= 500})
