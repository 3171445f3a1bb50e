"""Randomized model test: after every run the compacted view equals a dict model of the log at the
horizon (latest record per key, tombstones and keyless records gone), followed by the live records."""

from __future__ import annotations

import random

import pytest

import compactlog
from compactlog.clock import MockTime
from compactlog.compaction.state import read_state, side_logs

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def expected_view(log_records: list[tuple[int, bytes | None, bytes | None]], horizon: int) -> list[tuple]:
    latest: dict[bytes, tuple[int, bytes | None]] = {}
    for off, k, v in log_records:
        if off < horizon and k is not None:
            latest[k] = (off, v)
    below = sorted((off, k, v) for k, (off, v) in latest.items() if v is not None)
    return below + [r for r in log_records if r[0] >= horizon]


@pytest.mark.parametrize("seed", range(6))
def test_compacted_view_matches_the_model(tmp_path, seed):
    rng = random.Random(seed)
    small_map = seed % 2 == 0  # the keys overflow the map: several passes per run
    broker = {"log.cleaner.dedupe.buffer.size": str(24 * 40)} if small_map else {}
    with compactlog.open(tmp_path / "d", broker, time=MockTime()) as cl:
        cl.create_topic("t", 1, {"segment.bytes": str(rng.choice([700, 3000, 20000]))})
        runs = 0
        ids = [0]
        for step in range(80):
            if rng.random() < 0.8:
                rows = []
                for _ in range(rng.randint(1, 15)):
                    key = None if rng.random() < 0.05 else b"key-%d" % rng.randint(0, 80)
                    value = None if key is not None and rng.random() < 0.15 else b"v%d-%d" % (step, rng.randint(0, 999))
                    rows.append((key, value))
                if all(k is not None for k, _ in rows):
                    cl.produce_batch("t", rows, partition=0, compression=rng.choice(CODECS))
                else:
                    for k, v in rows:
                        cl.produce("t", v, key=k, partition=0)
            else:
                state = cl.compact_topic("t")[0]
                runs += state is not None
                if state is not None:
                    ids.append(state.side_log)
                log_records = [(r.offset, r.key, r.value) for r in cl.consume("t", 0, from_beginning=True)]
                horizon = read_state(cl.log("t").dir).horizon
                got = [(r.offset, r.key, r.value) for r in cl.consume("t", 0, from_beginning=True, read_compacted=True)]
                assert got == expected_view(log_records, horizon), f"step {step}"
                assert len(side_logs(cl.log("t").dir)) == 1
        assert runs >= 5
        passes = [b - a for a, b in zip(ids, ids[1:])]  # each pass writes a side log with the next id
        assert (max(passes) > 1) == small_map, passes
