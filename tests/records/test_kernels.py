"""The compiled kernels and their Python twin give the same answers and the same errors."""

from __future__ import annotations

import mmap
import os

import google_crc32c
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactlog.records import _py, kernels
from compactlog.records.batch import Record

try:
    from compactlog.records import _native
except ImportError:  # pragma: no cover - no compiler on this machine
    _native = None

IMPLS = [pytest.param(_py, id="twin")] + ([pytest.param(_native, id="native")] if _native else [])
GOLDEN_RECORDS = bytes.fromhex(
    "20000000086b6579310c76616c756531002400e1bf2202086b6579320c76616c75653200"
)


def test_native_kernels_are_in_use_when_built():
    if os.environ.get("CI") and not os.environ.get("COMPACTLOG_NO_EXTENSIONS"):
        assert kernels.NATIVE, "CI expects the compiled kernels to be built by the install"


@pytest.mark.parametrize("impl", IMPLS)
def test_golden_vector_records_section(impl):
    assert impl.encode_records([b"key1", b"key2"], [b"value1", b"value2"], [283843, 1234], 283843, None, None) == GOLDEN_RECORDS


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("n", [0, 1, -1, 63, -64, 64, 8191, 8192, 2**20, 2**27, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63)])
def test_varint_boundaries_round_trip(impl, n):
    ts_base = 0 if abs(n) < 2**62 else n  # keep the delta representable
    data = impl.encode_records([b"k"], [b"v"], [n], ts_base, [min(max(n, -(2**31)), 2**31 - 1)], None)
    cols = np.empty((1, _py.NCOLS), dtype=np.int64)
    impl.scan_records(data, 1, cols)
    assert cols[0, _py.C_TS_DELTA] == n - ts_base
    assert cols[0, _py.C_OFFSET_DELTA] == min(max(n, -(2**31)), 2**31 - 1)


MALFORMED = [
    (GOLDEN_RECORDS[:-1], 2),  # record runs past the batch
    (GOLDEN_RECORDS, 3),  # fewer records than the count
    (GOLDEN_RECORDS + b"\x00", 2),  # bytes remaining
    (b"\x01", 1),  # record length varint of -1
    (b"\xff\xff\xff\xff\xff\xff", 1),  # overlong varint
    (b"\x08\x00\x00\x00\x07\x00\x00\x00", 1),  # key of -4 bytes
    (b"\x08\x00\x00\x00\x06\x00\x00\x00", 1),  # key of 3 bytes runs past the record
    (b"\x08\x00\x00\x00\x01\x01\x03\x00", 1),  # header count -2
    (b"\x0a\x00\x00\x00\x01\x01\x00\x00\x00\x00", 1),  # length mismatch
    (b"\x0a\x00\x00\x00\x01\x01\x02\x01\x61\x00", 1),  # header key runs past the record
    (b"\x0c\x00\x00\x00\x01\x01\x02\x01\x61\x03\x00\x00", 1),  # header value length -2
    (b"\x04\x00\x00", 1),  # varint premature EOF inside the record
]


@pytest.mark.parametrize("data, count", MALFORMED)
def test_malformed_records_fail_with_the_same_message_in_both(data, count):
    messages = []
    for impl in [p.values[0] for p in IMPLS]:
        cols = np.empty((count, _py.NCOLS), dtype=np.int64)
        with pytest.raises(ValueError) as exc:
            impl.scan_records(data, count, cols)
        with pytest.raises(ValueError) as exc2:
            impl.decode_records(Record, None, 0, 0, data, count, 0, 0, None)
        assert str(exc.value) == str(exc2.value)
        messages.append(str(exc.value))
    assert len(set(messages)) == 1, messages


records_strategy = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=40)),
        st.one_of(st.none(), st.binary(max_size=300)),
        st.integers(min_value=-1, max_value=2**45),
        st.lists(st.tuples(st.text(max_size=8).map(lambda s: s.encode()), st.one_of(st.none(), st.binary(max_size=8))), max_size=3),
    ),
    max_size=30,
)


@pytest.mark.parametrize("impl", IMPLS)
@settings(max_examples=60, deadline=None)
@given(recs=records_strategy, gaps=st.integers(min_value=1, max_value=5))
def test_encode_scan_decode_round_trip(impl, recs, gaps):
    keys = [r[0] for r in recs]
    values = [r[1] for r in recs]
    ts = [r[2] for r in recs]
    headers = [tuple(r[3]) for r in recs]
    deltas = [i * gaps for i in range(len(recs))]
    base = ts[0] if ts else 0
    data = impl.encode_records(keys, values, ts, base, deltas, headers)
    assert data == _py.encode_records(keys, values, ts, base, deltas, headers)
    out = impl.decode_records(Record, "t", 3, 0, data, len(recs), 100, base, None)
    assert [r.offset for r in out] == [100 + d for d in deltas]
    assert [r.key for r in out] == keys and [r.value for r in out] == values and [r.timestamp for r in out] == ts
    assert [r.headers for r in out] == [tuple((k.decode(), v) for k, v in h) for h in headers]
    assert all(r.topic == "t" and r.partition == 3 for r in out)
    over = impl.decode_records(Record, None, 0, 1, data, len(recs), 0, base, 42)
    assert all(r.timestamp == 42 for r in over)


@pytest.mark.parametrize("impl", IMPLS)
def test_crc32c_matches_google_crc32c_on_any_buffer(impl, tmp_path):
    rng = np.random.default_rng(1)
    for n in (0, 1, 7, 8, 9, 63, 4097, 100_003):
        b = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        assert impl.crc32c(b) == google_crc32c.value(b)
        assert impl.crc32c(memoryview(b)[3:]) == google_crc32c.value(b[3:])
        assert impl.crc32c(bytearray(b)) == google_crc32c.value(b)
    p = tmp_path / "f"
    p.write_bytes(b"kafka" * 1000)
    with open(p, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        assert impl.crc32c(m) == google_crc32c.value(b"kafka" * 1000)


@pytest.mark.parametrize("impl", IMPLS)
def test_murmur2_matches_kafka_python(impl):
    from kafka.partitioner.default import murmur2

    rng = np.random.default_rng(2)
    for n in range(0, 40):
        b = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        assert impl.murmur2(b) & 0xFFFFFFFF == murmur2(b)
    keys = [b"k%d" % i for i in range(100)] + [None]
    assert impl.partition_for_keys(keys, 7) == [(murmur2(k) & 0x7FFFFFFF) % 7 for k in keys[:-1]] + [-1]


def test_both_implementations_provide_every_kernel():
    for name in kernels.KERNELS:
        assert callable(getattr(_py, name)), name
        if _native is not None:
            assert callable(getattr(_native, name)), name
        assert getattr(kernels, name) is getattr(_native if kernels.NATIVE else _py, name)


@pytest.mark.parametrize("impl", IMPLS)
def test_gather_column_builds_arrow_binary_arrays(impl):
    import pyarrow as pa

    keys = [b"a", None, b"", b"longer key", None]
    values = [b"1", b"22", None, b"", b"5" * 300]
    data = _py.encode_records(keys, values, [0] * 5, 0, None, None)
    cols = np.empty((5, _py.NCOLS), np.int64)
    _py.scan_records(data, 5, cols)
    for col, expected in ((( _py.C_KEY_POS, _py.C_KEY_LEN), keys), ((_py.C_VAL_POS, _py.C_VAL_LEN), values)):
        offsets, vals, validity, nulls = impl.gather_column(data, cols, *col)
        arr = pa.Array.from_buffers(pa.binary(), 5, [None if validity is None else pa.py_buffer(validity),
                                                     pa.py_buffer(offsets), pa.py_buffer(vals)], null_count=nulls)
        assert arr.to_pylist() == expected
