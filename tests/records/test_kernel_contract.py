"""The contract both kernel implementations share: names, signatures, column layout, named results and
KernelError.

Runs in both passes of the suite; where the compiled module is built it is checked even in the twin
pass (its names and layout do not depend on which one is bound).
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import os
import pickle
from pathlib import Path

import numpy as np
import pytest

from compactlog.records import _py, kernels, layout
from compactlog.records._protocols import KERNELS, RecordKernels
from compactlog.records.results import BinaryColumn, KernelError, MapPut, RecordsSummary

RECORDS_DIR = Path(kernels.__file__).parent
IMPLS = [pytest.param(_py, id="twin")]
if importlib.util.find_spec("compactlog.records._native") is not None:
    from compactlog.records import _native

    IMPLS.append(pytest.param(_native, id="compiled"))
else:  # pragma: no cover - only without a compiler
    _native = None
needs_built = pytest.mark.skipif(_native is None, reason="the compiled kernels are not built")

def golden() -> bytes:
    """The records section of the spec's golden batch (§1.8): two records, no headers."""
    return kernels.encode_records([b"key1", b"key2"], [b"value1", b"value2"], [283843, 1234], 283843, None, None)


def scan(impl, data: bytes, count: int) -> np.ndarray:
    cols = np.empty((count, kernels.NCOLS), dtype=np.int64)
    impl.scan_records(data, count, cols)
    return cols


# --- names and signatures -----------------------------------------------------------------------------
def test_kernels_is_every_member_of_the_protocol_and_only_those():
    assert KERNELS == kernels.KERNELS
    assert len(KERNELS) == len(set(KERNELS)) == 24
    for name in KERNELS:  # kernels.py binds each one to the implementation in use
        assert getattr(kernels, name) is getattr(kernels._impl, name)


@needs_built
def test_the_compiled_module_and_the_twin_expose_the_same_kernels():
    compiled = {name for name, value in vars(_native).items() if callable(value) and not name.startswith("_")}
    assert compiled == set(KERNELS)
    assert all(inspect.isfunction(getattr(_py, name)) for name in KERNELS)
    assert isinstance(_native, RecordKernels) and isinstance(_py, RecordKernels)


def _stub_functions() -> dict[str, ast.FunctionDef]:
    tree = ast.parse((RECORDS_DIR / "_native.pyi").read_text())
    return {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}


def test_the_stub_the_protocol_and_the_twin_agree_on_every_signature():
    """Same kernels, same number of arguments and of optional ones; the stub and the protocol take
    them positionally, as the compiled functions do."""
    stub = _stub_functions()
    assert set(stub) == set(KERNELS)
    for name in KERNELS:
        proto = list(inspect.signature(getattr(RecordKernels, name)).parameters.values())[1:]  # without self
        twin = list(inspect.signature(getattr(_py, name)).parameters.values())
        args = stub[name].args
        assert not args.args and not args.kwonlyargs and args.vararg is None, name
        assert all(p.kind is p.POSITIONAL_ONLY for p in proto), name
        shapes = {
            "protocol": (len(proto), sum(p.default is not p.empty for p in proto)),
            "twin": (len(twin), sum(p.default is not p.empty for p in twin)),
            "stub": (len(args.posonlyargs), len(args.defaults)),
        }
        assert len(set(shapes.values())) == 1, (name, shapes)
        assert stub[name].returns is not None, name


def test_native_is_what_the_environment_asked_for():
    if os.environ.get("COMPACTLOG_NO_EXTENSIONS"):
        assert kernels.NATIVE is False and kernels._impl is _py
    else:  # a build that exists but does not import is a failure here, not a quiet fall back
        assert kernels.NATIVE is (_native is not None)
        assert kernels._impl is (_native if _native is not None else _py)


# --- the column layout ----------------------------------------------------------------------------------
def test_the_layout_numbers_each_column_once():
    columns = {name: n for name, n in layout.LAYOUT.items() if name.startswith("C_")}
    assert sorted(columns.values()) == list(range(layout.NCOLS))
    assert set(layout.POSITION_COLUMNS) <= set(columns.values())
    for name, n in layout.LAYOUT.items():
        assert getattr(layout, name) == getattr(kernels, name, n) == getattr(_py, name) == n


@needs_built
def test_the_compiled_module_was_built_with_this_layout():
    assert _native.LAYOUT == layout.LAYOUT
    assert _native.POSITION_COLUMNS == layout.POSITION_COLUMNS


def test_the_generated_header_is_the_layouts():
    header = RECORDS_DIR / "_layout.h"
    if not header.exists():
        pytest.skip("no _layout.h here (installed without building in place)")
    assert header.read_text() == layout.c_header()


def test_a_layout_with_a_column_twice_does_not_build(monkeypatch):
    monkeypatch.setitem(layout.LAYOUT, "C_END", layout.C_POS)
    with pytest.raises(ValueError, match="each once"):
        layout.c_header()


@pytest.mark.parametrize("impl", IMPLS)
def test_both_implementations_fill_each_column_by_its_name(impl):
    data = golden()
    cols = scan(impl, data, 2)
    expected = {
        "C_POS": [0, 17], "C_END": [17, 36], "C_OFFSET_DELTA": [0, 1], "C_TS_DELTA": [0, 1234 - 283843],
        "C_KEY_POS": [5, 24], "C_KEY_LEN": [4, 4], "C_VAL_POS": [10, 29], "C_VAL_LEN": [6, 6],
        "C_HDR_POS": [17, 36], "C_HDR_COUNT": [0, 0],
    }
    assert set(expected) == {name for name in layout.LAYOUT if name.startswith("C_")}
    for name, values in expected.items():
        assert cols[:, layout.LAYOUT[name]].tolist() == values, name
    # scan_many moves exactly the position columns by the section's start
    pad = 5
    many = np.empty((2, layout.NCOLS), dtype=np.int64)
    impl.scan_many(b"\x00" * pad + data, np.array([pad]), np.array([pad + len(data)]), np.array([2]), many)
    shift = np.zeros(layout.NCOLS, dtype=np.int64)
    shift[list(layout.POSITION_COLUMNS)] = pad
    assert (many - cols).tolist() == [shift.tolist()] * 2


# --- named results ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("impl", IMPLS)
def test_several_values_come_back_as_named_results(impl):
    data = kernels.encode_records([b"a", None, b"c"], [b"1", b"2", None], [10, 7, 12], 10, None,
                                  [(), ((b"\xff", None),), ()])
    cols = scan(impl, data, 3)
    summary = impl.summarize_records(data, 3)
    assert type(summary) is RecordsSummary
    assert summary == RecordsSummary(null_keys=1, min_ts_delta=-3, max_ts_delta=2, sequential_offsets=True,
                                     invalid_header_keys=1)
    column = impl.gather_column(data, cols, layout.C_KEY_POS, layout.C_KEY_LEN)
    assert type(column) is BinaryColumn
    assert column.values == b"ac" and column.null_count == 1 and column.validity == bytes([0b101])
    assert np.frombuffer(column.offsets, dtype=np.int32).tolist() == [0, 1, 1, 2]
    slots = 8
    table = np.zeros(slots * layout.SLOT, dtype=np.uint8)
    put = impl.offset_map_put(table, slots, 1, 0, data, cols, 100, 0, 0)
    assert type(put) is MapPut
    assert put == MapPut(size=1, next_row=2, full=True, probes=1, last_put=100, puts=1)


@needs_built
def test_both_implementations_give_equal_named_results():
    data = kernels.encode_records([b"k%d" % i for i in range(50)], [b"v"] * 50, list(range(50)), 0, None, None)
    cols = scan(_py, data, 50)
    assert _native.summarize_records(data, 50) == _py.summarize_records(data, 50)
    for pos, length in ((layout.C_KEY_POS, layout.C_KEY_LEN), (layout.C_VAL_POS, layout.C_VAL_LEN)):
        assert _native.gather_column(data, cols, pos, length) == _py.gather_column(data, cols, pos, length)
    tables = [np.zeros(64 * layout.SLOT, dtype=np.uint8) for _ in range(2)]
    puts = [impl.offset_map_put(t, 64, 40, 0, data, cols, 0, 0, 0) for impl, t in zip((_native, _py), tables)]
    assert puts[0] == puts[1] and puts[0].full and puts[0].next_row == 40
    assert tables[0].tobytes() == tables[1].tobytes()


# --- KernelError ----------------------------------------------------------------------------------------
BAD_SECOND = golden() + b"\x00"  # section 1 below: two good records, then a byte too many


@pytest.mark.parametrize("impl", IMPLS)
def test_a_bad_section_of_scan_many_is_named_by_the_error_not_its_text(impl):
    data = golden() + BAD_SECOND
    g = len(golden())
    with pytest.raises(KernelError) as exc:
        impl.scan_many(data, np.array([0, g]), np.array([g, len(data)]), np.array([2, 2]),
                       np.empty((4, layout.NCOLS), dtype=np.int64))
    assert type(exc.value) is KernelError
    assert exc.value.section == 1
    assert exc.value.reason == "1 bytes still remaining after 2 records"
    assert str(exc.value) == "section 1: 1 bytes still remaining after 2 records"


@pytest.mark.parametrize("impl", IMPLS)
def test_records_that_do_not_parse_raise_kernel_error_without_a_section(impl):
    calls = (
        lambda: scan(impl, BAD_SECOND, 2),
        lambda: impl.summarize_records(BAD_SECOND, 2),
        lambda: impl.decode_records(tuple, None, 0, 0, BAD_SECOND, 2, 0, 0, None),
        lambda: impl.summarize_records(b"", -1),
    )
    for call in calls:
        with pytest.raises(KernelError) as exc:
            call()
        assert exc.value.section is None and str(exc.value) == exc.value.reason


@pytest.mark.parametrize("impl", IMPLS)
def test_a_timestamp_outside_int64_is_a_kernel_error(impl):
    data = kernels.encode_records([None], [None], [5], 0, None, None)
    with pytest.raises(KernelError, match="outside the int64 range"):
        impl.decode_records(tuple, None, 0, 0, data, 1, 0, 2**63 - 1, None)


@pytest.mark.parametrize("impl", IMPLS)
def test_a_callers_mistake_stays_a_plain_value_error(impl):
    """Buffers that do not fit are the caller's bug, not bad records: no KernelError to be caught as one."""
    with pytest.raises(ValueError) as exc:
        impl.scan_many(golden(), np.array([0]), np.array([999]), np.array([2]), np.empty((2, layout.NCOLS), np.int64))
    assert type(exc.value) is ValueError and str(exc.value) == "section 0 does not fit the buffers"


def test_a_kernel_error_survives_pickling():
    for err in (KernelError("invalid record length 0"), KernelError("invalid record length 0", 3)):
        back = pickle.loads(pickle.dumps(err))
        assert (type(back), str(back), back.reason, back.section) == (KernelError, str(err), err.reason, err.section)


def test_a_type_checker_holds_both_modules_to_the_protocol(tmp_path):
    """kernels.py binds ``_py`` and ``_native`` (through its stub) to a ``RecordKernels`` variable: mypy
    fails there if either one's signatures or result types drift from the protocol."""
    if os.environ.get("COMPACTLOG_NO_EXTENSIONS"):
        pytest.skip("a static check: the other pass of the suite runs it")
    api = pytest.importorskip("mypy.api", reason="mypy is not installed")
    files = [str(RECORDS_DIR / name) for name in ("kernels.py", "_native.pyi")]
    out, err, status = api.run(["--follow-imports=silent", "--cache-dir", str(tmp_path), "--no-error-summary", *files])
    assert status == 0, out + err
