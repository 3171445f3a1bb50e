"""Bulk reads: ``read_runs`` hands out exactly the batches ``read_batches`` does, as runs lying in one
buffer each, checked the same way; a chunk scanned from a run (``Chunk.scan_run``) holds the same columns
as one scanned from the batch objects.

The Spark source reads this way, so these are its guarantees: every batch of [start, end) once, in order,
none outside it, damage met at the same batch with the same words."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import compactlog
from compactlog.errors import CorruptRecordError
from compactlog.reading import READ_COMMITTED, open_snapshot, read_batches, read_runs
from compactlog.records import Codec, build_batch, kernels
from compactlog.records.batch import BatchInfo, LOG_APPEND_TIME
from compactlog.records.columns import Chunk
from compactlog.records.runs import BatchRun

T = "t"
EXAMPLES = int(os.environ.get("DAMAGE_EXAMPLES", "40"))


def _write(path, sizes: list[int], segment_bytes: int, codec: Codec, log_append: bool = False) -> int:
    n = 0
    with compactlog.open(path) as cl:
        config = {"segment.bytes": str(segment_bytes)}
        if log_append:
            config["message.timestamp.type"] = "LogAppendTime"
        cl.create_topic(T, 1, config)
        lg = cl.log(T)
        for i, size in enumerate(sizes):
            keys = [b"k%d" % (n + j) for j in range(size)]
            lg.append(build_batch(keys, [b"v" * (j % 9) for j in range(size)], [1_000 + n + j for j in range(size)],
                                  codec=codec))
            n += size
    return n


def _flat(runs) -> list[tuple[int, int, bytes, str]]:
    out = []
    for run in runs:
        batches = run.batches()
        assert len(batches) == len(run) > 0
        for b in batches:
            assert b.buffer.obj is memoryview(run.buffer).obj  # every batch of a run lies in its one buffer
            out.append((b.base_offset, b.last_offset, bytes(b.buffer), str(b.origin)))
    return out


def _batches(batches) -> list[tuple[int, int, bytes, str]]:
    return [(b.base_offset, b.last_offset, bytes(b.buffer), str(b.origin)) for b in batches]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(1, 30), min_size=1, max_size=80),
       segment_bytes=st.sampled_from([700, 4000, 1 << 20]),
       codec=st.sampled_from([Codec.NONE, Codec.LZ4]),
       bounds=st.tuples(st.floats(0, 1.2), st.floats(0, 1.2)))
def test_runs_hold_exactly_the_batches_read_batches_hands_out(tmp_path_factory, sizes, segment_bytes, codec, bounds):
    path = tmp_path_factory.mktemp("runs")
    n = _write(path, sizes, segment_bytes, codec)
    start, end = sorted(int(b * n) for b in bounds)
    with open_snapshot(path, T, 0) as snap:
        want = _batches(read_batches(snap, start, end))
        assert _flat(read_runs(snap, start, end)) == want
        assert _flat(snap.runs(start, None)) == _batches(snap.batches(start, None))
    with compactlog.open(path) as cl:
        lg = cl.log(T)
        assert _flat(lg.runs(start, end)) == _batches(lg.batches(start, end)) == want
    if want:  # the range is covered: the first batch holds start, the last ends at or after end - 1
        assert want[0][0] <= max(start, 0) <= want[0][1] or start == 0
        assert all(a[1] + 1 == b[0] for a, b in zip(want, want[1:]))  # no batch missing, none twice


def test_runs_join_the_batches_of_one_read_buffer(tmp_path):
    """The segment walk hands out the last batch of each read apart; a bulk reader gets one run per
    buffer (so each Arrow batch the Spark source builds is a whole read, not a read and a stray batch)."""
    _write(tmp_path, [20] * 400, 1 << 30, Codec.NONE)
    with open_snapshot(tmp_path, T, 0) as snap:
        runs = list(snap.runs(0))
    assert all(a.buffer is not b.buffer for a, b in zip(runs, runs[1:]))  # a buffer's batches: one run
    assert sum(len(r) for r in runs) == 400
    if kernels.NATIVE:  # (the twin's walk may hand batches out one by one, each its own view)
        assert len(runs) <= 4  # 400 batches of about 300 bytes: one run per read


@pytest.mark.parametrize("where", ["records", "crc", "attributes"])
def test_damage_ends_the_runs_where_read_batches_meets_it(tmp_path, where):
    _write(tmp_path, [5] * 300, 1 << 30, Codec.NONE)
    log = next((tmp_path / f"{T}-0").glob("*.log"))
    data = bytearray(log.read_bytes())
    with open_snapshot(tmp_path, T, 0) as snap:
        positions = [int(str(b.origin).rsplit(" ", 1)[1]) for b in snap.batches(0)]
    at = positions[200] + {"records": 70, "crc": 18, "attributes": 22}[where]
    data[at] ^= 0x04
    log.write_bytes(bytes(data))
    with open_snapshot(tmp_path, T, 0) as snap:
        got = []
        with pytest.raises(CorruptRecordError) as by_runs:
            for run in snap.runs(0):
                got += [b.base_offset for b in run.batches()]
        with pytest.raises(CorruptRecordError) as by_batches:
            for _ in snap.batches(0):
                pass
    assert got == list(range(0, 1000, 5))  # every batch before the damaged one, none after
    assert str(by_runs.value) == str(by_batches.value)
    assert f"position {positions[200]}" in str(by_runs.value) and "corrupt" in str(by_runs.value)
    with open_snapshot(tmp_path, T, 0) as snap:  # a reader that does not check CRCs passes it
        assert sum(len(r) for r in snap.runs(0, check_crcs=False)) == 300


def _same_chunk(a: Chunk, b: Chunk) -> None:
    assert np.array_equal(a.rows, b.rows)
    assert np.array_equal(a.offsets, b.offsets)
    assert np.array_equal(a.timestamps(), b.timestamps())
    assert np.array_equal(a.timestamp_types(), b.timestamp_types())
    for pos, length in ((kernels.C_KEY_POS, kernels.C_KEY_LEN), (kernels.C_VAL_POS, kernels.C_VAL_LEN)):
        # key and value bytes (their positions differ where one side copied)
        assert [bytes(memoryview(a.data)[p : p + n]) if n >= 0 else None for p, n in a.cols[:, [pos, length]].tolist()] == \
               [bytes(memoryview(b.data)[p : p + n]) if n >= 0 else None for p, n in b.cols[:, [pos, length]].tolist()]


@pytest.mark.parametrize("codec", [Codec.NONE, Codec.ZSTD])
@pytest.mark.parametrize("log_append", [False, True])
def test_a_chunk_scanned_from_a_run_holds_what_the_batch_objects_give(tmp_path, codec, log_append):
    """Header fields read with numpy for the whole run (record counts, control batches, LogAppendTime
    timestamps) give the columns the per-batch scan gives; compressed runs take the per-batch scan."""
    _write(tmp_path, [1, 7, 3, 12] * 30, 1 << 30, codec, log_append)
    with compactlog.open(tmp_path) as cl:  # a transaction's marker among the data: no rows of its own
        lg = cl.log(T)
        info = BatchInfo(producer_id=9, producer_epoch=0, base_sequence=0, is_transactional=True)
        lg.append(build_batch([b"x"], [b"y"], [5], info=info))
        cl.partition(T, 0).write_txn_marker(9, 0, True, 0)
        lg.append(build_batch([b"z", None], [None, b"w"], [6, 7]))
    with open_snapshot(tmp_path, T, 0) as snap:
        runs = list(snap.runs(0))
    assert runs
    for run in runs:
        fast, slow = Chunk.scan_run(run), Chunk.scan(run.batches())
        _same_chunk(fast, slow)
        if log_append:
            assert set(fast.timestamp_types().tolist()) <= {LOG_APPEND_TIME}
    copied = BatchRun.of([b for r in runs for b in r.batches()])  # batches from anywhere, copied together
    _same_chunk(Chunk.scan_run(copied), Chunk.scan([b for r in runs for b in r.batches()]))


def test_read_committed_runs_leave_out_aborted_data_as_read_batches_does(tmp_path):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic(T, 1)
        lg, part = cl.log(T), cl.partition(T, 0)
        for i, commit in enumerate([True, False, True, False]):
            info = BatchInfo(producer_id=3, producer_epoch=0, base_sequence=2 * i, is_transactional=True)
            lg.append(build_batch([b"a%d" % i, b"b%d" % i], [b"1", b"2"], [1, 2], info=info))
            part.write_txn_marker(3, 0, commit, 0)
    with open_snapshot(tmp_path, T, 0) as snap:
        want = _batches(read_batches(snap, 0, None, isolation=READ_COMMITTED))
        got = [(b.base_offset, b.last_offset, bytes(b.buffer)) for r in read_runs(snap, 0, None, isolation=READ_COMMITTED)
               for b in r.batches()]
    assert got == [w[:3] for w in want]
    assert [w[0] for w in want] == [0, 2, 5, 6, 8, 11]  # the aborted batches (3, 9) are not there


def _offsets(items) -> list[int]:
    out = []
    for x in items:
        for b in (x.batches() if isinstance(x, BatchRun) else [x]):
            out.extend(range(b.base_offset, b.last_offset + 1))
    return out


@pytest.mark.parametrize("fail_at", [1, 2, 3])
def test_a_segment_swapped_away_mid_read_loses_nothing(tmp_path, fail_at):
    """A file gone when the walk reaches it (the owner's cleaner swapped it): the read lists again and
    goes on from the last batch handed out; a run held back while the next read was awaited is handed
    out first, not skipped."""
    from compactlog.storage import reader

    n = _write(tmp_path, [5] * 30, 1000, Codec.NONE)
    with open_snapshot(tmp_path, T, 0) as snap:
        bases, segment_at = snap._listing()
        assert len(bases) > fail_at

        for read in (reader.read_batches, reader.read_runs):
            failing = {fail_at}

            def flaky(k):
                if k in failing:
                    failing.discard(k)
                    raise FileNotFoundError("swapped away")
                return segment_at(k)

            got = _offsets(read((bases, flaky), 0, None, relist=snap._listing))
            assert got == list(range(n)), read.__name__


@pytest.mark.parametrize("field,xor", [(0, 0x40), (8 + 3, 0x10), (16, 0x01), (23 + 3, 0x05), (70, 0x04)])
@pytest.mark.parametrize("view", ["live", "read_committed"])
def test_damage_meets_a_bulk_reader_after_the_same_batches(tmp_path, field, xor, view):
    """Header or record damage in the middle of a read: a bulk reader gets every batch a batch reader
    gets before the error (none held back and dropped), then the same error."""
    _write(tmp_path, [5] * 300, 1 << 30, Codec.NONE)
    log = next((tmp_path / f"{T}-0").glob("*.log"))
    with open_snapshot(tmp_path, T, 0) as snap:
        positions = [int(str(b.origin).rsplit(" ", 1)[1]) for b in snap.batches(0)]
    data = bytearray(log.read_bytes())
    data[positions[150] + field] ^= xor
    log.write_bytes(bytes(data))
    level = READ_COMMITTED if view == "read_committed" else "read_uncommitted"
    outcomes = []
    for read in (read_batches, read_runs):
        got = []
        with open_snapshot(tmp_path, T, 0) as snap:
            try:
                for x in read(snap, 0, None, isolation=level):
                    got.append(x)
                    got[-1] = _offsets([x])
                error = None
            except CorruptRecordError as exc:
                error = str(exc)
        outcomes.append(([o for part in got for o in part], error))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][1] is not None and len(outcomes[0][0]) >= 5 * 149


def test_capped_cuts_a_run_at_batch_boundaries_by_record_count(tmp_path):
    from compactlog.records.columns import capped

    _write(tmp_path, [7] * 50 + [40] + [3] * 10, 1 << 30, Codec.NONE)
    with open_snapshot(tmp_path, T, 0) as snap:
        runs = list(snap.runs(0))
    pieces = [p for r in runs for p in capped(r, 20)]
    assert _offsets(pieces) == _offsets(runs)  # every batch once, in order
    for p in pieces:
        counts = [b.record_count for b in p.batches()]
        assert sum(counts) <= 20 or len(counts) == 1  # a batch of more goes alone
    assert [p for r in runs for p in capped(r)] == runs  # under the default cap: the runs themselves
