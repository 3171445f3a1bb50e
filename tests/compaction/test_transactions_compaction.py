"""The compactor on logs holding transactions: the cleaner's rule (aborted records never mapped nor
kept, no markers in the view), never past the last stable offset, and the same committed data as the
log cleaner leaves."""

from __future__ import annotations

import shutil

import pytest
from txn_logs import START_MS, build, committed_latest

import compactlog
from compactlog.clock import MockTime
from compactlog.records.batch import BatchInfo, build_batch


def latest(records) -> dict[bytes, bytes]:
    out: dict[bytes, bytes | None] = {}
    for r in records:
        out[r.key] = r.value
    return {k: v for k, v in out.items() if v is not None}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_compactor_and_cleaner_keep_the_same_committed_data(tmp_path, seed):
    build(tmp_path / "base", seed)
    shutil.copytree(tmp_path / "base", tmp_path / "cleaned")
    now = START_MS + 10**6
    with compactlog.open(tmp_path / "base", time=MockTime(now)) as cl:
        model = committed_latest(cl)
        lso = cl.partition("t", 0).last_stable_offset
        assert lso < cl.partition("t", 0).log_end_offset, "a transaction is left open"
        state = cl.compact_topic("t")[0]
        assert state.horizon == lso
        view = list(cl.consume("t", 0, from_beginning=True, read_compacted=True, isolation_level="read_committed"))
        below = [r for r in view if r.offset < state.horizon]
        assert latest(view) == model
        # below the horizon: exactly the latest committed record of each live key, nothing aborted, no marker
        assert sorted((r.key, r.value) for r in below) == sorted(model.items())
    with compactlog.open(tmp_path / "cleaned", time=MockTime(now)) as cl:
        cl.clean("t")
        assert cl.cleaner.manager.checkpoints[("t", 0)] <= lso
        assert committed_latest(cl) == model


def test_an_open_transaction_waits_for_its_end(tmp_path):
    with compactlog.open(tmp_path / "d", time=MockTime()) as cl:
        cl.create_topic("t", 1, {"segment.bytes": "1500"})
        part = cl.partition("t", 0)
        for i in range(10):
            cl.produce("t", b"v%d" % i, key=b"k")
        txn = BatchInfo(producer_id=5, producer_epoch=0, base_sequence=0, is_transactional=True)
        part.append(build_batch([b"k", b"x"], [b"open", b"x1"], [cl.time.milliseconds()] * 2, info=txn))
        cl.produce("t", b"after", key=b"a")
        assert cl.compact_topic("t")[0].horizon == 10  # the transaction's first offset
        assert cl.compact_topic("t")[0] is None  # nothing new below the LSO
        part.write_txn_marker(5, 0, False, 0)
        state = cl.compact_topic("t")[0]
        assert state.horizon == 14
        view = [(r.key, r.value) for r in cl.consume("t", 0, from_beginning=True, read_compacted=True)]
        assert view == [(b"k", b"v9"), (b"a", b"after")]  # the aborted records are gone, k keeps v9


def test_the_latest_value_of_a_key_is_never_an_aborted_one(tmp_path):
    from compactlog.key_lookup import find_latest

    with compactlog.open(tmp_path / "d", time=MockTime()) as cl:
        cl.create_topic("t", 1, {"segment.bytes": "1500"})
        part = cl.partition("t", 0)
        cl.produce("t", b"committed", key=b"k", partition=0)
        txn = BatchInfo(producer_id=5, producer_epoch=0, base_sequence=0, is_transactional=True)
        part.append(build_batch([b"k"], [b"aborted"], [cl.time.milliseconds()], info=txn))
        part.write_txn_marker(5, 0, False, 0)
        assert find_latest(cl, "t", b"k").record.value == b"committed"
        cl.compact_topic("t")
        assert find_latest(cl, "t", b"k").record.value == b"committed"
