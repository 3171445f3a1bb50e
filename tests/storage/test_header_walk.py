"""The compiled header walk (``kernels.walk_headers``) is the rules of ``integrity.header_problem`` and
nothing else: on random headers and on chains of real batches with flipped bytes, both implementations
pass exactly the batches a Python walk with ``header_problem`` passes, and write their rows.

Also: the checked reader (``LogSegment.batches``, ``locate``) answers the same with the compiled walk and
with every header checked in Python, the walk's limits (``position``, a full ``out``) and its refusals."""

from __future__ import annotations

import importlib.util
import os
import struct
from array import array

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import compactlog
from compactlog.errors import CorruptRecordError
from compactlog.records import _py, build_batch
from compactlog.records.batch import HEADER, HEADER_SIZE, BatchInfo, RecordBatch
from compactlog.storage import segment as segment_module
from compactlog.storage.integrity import MAX_RELATIVE_OFFSET, Bounds, header_problem

IMPLS = [pytest.param(_py, id="twin")]
if importlib.util.find_spec("compactlog.records._native") is not None:
    from compactlog.records import _native

    IMPLS.append(pytest.param(_native, id="compiled"))

INT64 = (-(1 << 63), (1 << 63) - 1)
INT64_MAX = INT64[1]
EXAMPLES = int(os.environ.get("DAMAGE_EXAMPLES", "200"))


def reference_walk(data: bytes, position: int, segment_base: int, expected: int, known: bool, upper: int | None,
                   gaps_below: int | None, cap: int) -> list[tuple[int, int, int, int]]:
    """The rows a walk must write: whole batches that ``header_problem`` passes, one after another."""
    rows = []
    p, bounds = position, Bounds(upper, gaps_below)
    while len(rows) < cap and len(data) - p >= HEADER_SIZE:
        size = 12 + struct.unpack_from(">i", data, p + 8)[0]
        if not HEADER_SIZE <= size <= len(data) - p:
            break
        batch = RecordBatch(data[p : p + size])
        if header_problem(batch, segment_base, expected, bounds, known) is not None or batch.last_offset > INT64_MAX:
            break
        rows.append((p, size, batch.base_offset, batch.last_offset))
        expected, known, p = batch.next_offset, True, p + size
    return rows


def walk(impl, data: bytes, position: int, segment_base: int, expected: int, known: bool, upper: int | None,
         gaps_below: int | None, cap: int = 64) -> list[tuple[int, int, int, int]]:
    out = array("q", bytes(32 * cap))
    n = impl.walk_headers(data, position, segment_base, expected, known, upper, gaps_below, out)
    return [tuple(out[4 * i : 4 * i + 4]) for i in range(n)]


def near(centre: st.SearchStrategy[int]) -> st.SearchStrategy[int]:
    """Offsets around interesting values (and anywhere in int64): where the rules' edges are."""
    return st.one_of(
        centre,
        centre.flatmap(lambda c: st.integers(-3, 3).map(lambda d: min(max(c + d, INT64[0]), INT64_MAX))),
        st.integers(*INT64),
    )


segment_bases = st.one_of(st.sampled_from([0, 100, INT64_MAX - MAX_RELATIVE_OFFSET]), st.integers(0, INT64_MAX))


@st.composite
def single(draw):
    seg = draw(segment_bases)
    expected = draw(st.one_of(st.just(seg), near(st.just(seg + 5 if seg < INT64_MAX - 5 else seg))))
    base = draw(near(st.just(expected)))
    delta = draw(st.one_of(st.integers(-2, 10), st.integers(-(1 << 31), (1 << 31) - 1),
                           st.just(MAX_RELATIVE_OFFSET)))
    last = base + max(delta, 0)
    upper = draw(st.one_of(st.none(), near(st.just(min(last + 1, INT64_MAX))), st.integers(*INT64)))
    gaps = draw(st.one_of(st.none(), near(st.just(base)), st.integers(*INT64)))
    length = draw(st.one_of(st.just(HEADER_SIZE - 12), st.integers(HEADER_SIZE - 14, HEADER_SIZE + 40),
                            st.integers(-(1 << 31), (1 << 31) - 1)))
    magic = draw(st.one_of(st.just(2), st.integers(-128, 127)))
    header = HEADER.pack(base, length, 0, magic, 0, 0, delta, 0, 0, -1, -1, -1, 0)
    data = header + bytes(draw(st.integers(0, 50)))
    return data, seg, expected, draw(st.booleans()), upper, gaps


@pytest.mark.parametrize("impl", IMPLS)
@settings(max_examples=EXAMPLES * 2, deadline=None)
@given(case=single())
def test_one_header_passes_exactly_when_header_problem_finds_nothing(impl, case):
    data, seg, expected, known, upper, gaps = case
    assert walk(impl, data, 0, seg, expected, known, upper, gaps) == \
        reference_walk(data, 0, seg, expected, known, upper, gaps, 64)


@pytest.mark.parametrize("impl", IMPLS)
def test_a_last_offset_beyond_int64_ends_the_walk(impl):
    """Found by the property above (a build without the check wrote a wrapped last offset): a header
    whose base offset plus lastOffsetDelta passes int64 is left to the Python rules."""
    seg = base = INT64_MAX - MAX_RELATIVE_OFFSET + 1
    delta = MAX_RELATIVE_OFFSET  # last offset: INT64_MAX + 1
    data = HEADER.pack(base, HEADER_SIZE - 12, 0, 2, 0, 0, delta, 0, 0, -1, -1, -1, 0)
    assert header_problem(RecordBatch(data), seg, base, Bounds(), True) is None  # Python ints: it passes there
    assert walk(impl, data, 0, seg, base, True, None, None) == []


def chain(base_offset: int, counts: list[int], gaps: list[int]) -> bytes:
    out, offset = [], base_offset
    for count, gap in zip(counts, gaps):
        offset += gap
        out.append(build_batch([b"k%d" % i for i in range(count)], [b"v"] * count, info=BatchInfo(base_offset=offset)))
        offset += count
    return b"".join(out)


@pytest.mark.parametrize("impl", IMPLS)
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seg=st.sampled_from([0, 1000]), counts=st.lists(st.integers(1, 4), min_size=1, max_size=12),
       jumps=st.lists(st.sampled_from([0, 0, 0, 1, 7]), min_size=12, max_size=12),
       flips=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 60), st.integers(1, 255)),
                      max_size=3),
       known=st.booleans(), upper=st.one_of(st.none(), st.integers(0, 1100)),
       gaps=st.one_of(st.none(), st.integers(0, 1100)), start=st.sampled_from([None, 0, 1]),
       cap=st.sampled_from([1, 2, 64]))
def test_a_chain_with_flipped_header_bytes_walks_as_header_problem_says(impl, seg, counts, jumps, flips, known,
                                                                          upper, gaps, start, cap):
    data = bytearray(chain(seg, counts, jumps))
    positions = [p for p, _ in _batches(bytes(data))]
    for where, byte, xor in flips:  # flip a byte inside some batch's 61-byte header
        data[positions[int(where * len(positions))] + byte] ^= xor
    data = bytes(data)
    expected = seg if start is None else seg + start
    assert walk(impl, data, 0, seg, expected, known, upper, gaps, cap) == \
        reference_walk(data, 0, seg, expected, known, upper, gaps, cap)
    if len(positions) > 1:  # from a later batch too (``position``)
        p = positions[1]
        assert walk(impl, data, p, seg, expected, known, upper, gaps, cap) == \
            reference_walk(data, p, seg, expected, known, upper, gaps, cap)


def _batches(data: bytes):
    p = 0
    while p < len(data):
        size = 12 + struct.unpack_from(">i", data, p + 8)[0]
        yield p, size
        p += size


@pytest.mark.parametrize("impl", IMPLS)
def test_the_walk_stops_where_out_is_full_and_at_a_batch_cut_by_the_buffer(impl):
    data = chain(0, [1, 2, 3], [0, 0, 0])
    sizes = [s for _, s in _batches(data)]
    assert [r[0] for r in walk(impl, data, 0, 0, 0, True, None, None)] == [0, sizes[0], sizes[0] + sizes[1]]
    assert walk(impl, data, 0, 0, 0, True, None, None, cap=2) == walk(impl, data, 0, 0, 0, True, None, None)[:2]
    assert len(walk(impl, data[:-1], 0, 0, 0, True, None, None)) == 2
    assert walk(impl, data, sizes[0], 0, 1, True, None, None)[0] == (sizes[0], sizes[1], 1, 2)
    assert walk(impl, data, len(data), 0, 6, True, None, None) == []
    assert walk(impl, data, 0, 0, 0, True, None, None, cap=0) == []


@pytest.mark.parametrize("impl", IMPLS)
def test_a_callers_mistake_is_a_value_error(impl):
    data = chain(0, [1], [0])
    with pytest.raises(ValueError):
        impl.walk_headers(data, len(data) + 1, 0, 0, True, None, None, array("q", bytes(32)))
    with pytest.raises(ValueError):
        impl.walk_headers(data, 0, 0, 0, True, None, None, array("i", bytes(32)))
    with pytest.raises((ValueError, BufferError)):  # not writable
        impl.walk_headers(data, 0, 0, 0, True, None, None, bytes(32))


# --- the checked reader: the compiled walk and the Python one answer alike -------------------------------
@pytest.fixture
def log_dir(tmp_path):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1, {"index.interval.bytes": "500"})
        for i in range(300):
            cl.append_batch("t", 0, build_batch([b"k%d" % i] * (1 + i % 3), [b"x" * (i % 40)] * (1 + i % 3)))
    return tmp_path


def _python_only(monkeypatch):
    monkeypatch.setattr(segment_module, "walk_headers", lambda *args: 0)


def _answers(path, offsets):
    cl = compactlog.open(path)
    lg = cl.log("t", 0)
    seg = lg.segments[0]
    out = []
    for o in offsets:
        try:
            got = lg.locate(o, 700, True)
            found = seg.translate_offset(o)
            out.append((got[1:] if got else None, found and (found[0], found[1].base_offset)))
        except CorruptRecordError as exc:
            out.append(str(exc))
    try:
        out.append([(p, b.base_offset, b.size) for p, b in seg.batches(0)])
    except CorruptRecordError as exc:
        out.append(str(exc))
    cl.close()
    return out


def test_locate_and_batches_answer_alike_with_either_walk(log_dir, monkeypatch):
    offsets = list(range(0, 600, 7))
    compiled = _answers(log_dir, offsets)
    _python_only(monkeypatch)
    assert _answers(log_dir, offsets) == compiled


@pytest.mark.parametrize("field,xor", [(0, 0x40), (7, 0x01), (8 + 3, 0x10), (16, 0x01), (23 + 3, 0x05)])
def test_damage_is_met_alike_with_either_walk(log_dir, monkeypatch, field, xor):
    """A flipped base offset, length, magic or lastOffsetDelta in the middle of the log: the same errors
    and the same answers on both sides of it, from the compiled walk (which hands the batch to the Python
    walk) and from the Python walk alone."""
    log = next((log_dir / "t-0").glob("*.log"))
    data = bytearray(log.read_bytes())
    at = [p for p, _ in _batches(bytes(data))][150]
    data[at + field] ^= xor
    log.write_bytes(bytes(data))
    offsets = list(range(0, 600, 5))
    compiled = _answers(log_dir, offsets)
    assert any(isinstance(a, str) for a in compiled)
    _python_only(monkeypatch)
    assert _answers(log_dir, offsets) == compiled
