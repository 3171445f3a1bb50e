"""The contract both kernel implementations share: the column layout.

Runs in both passes of the suite; where the compiled module is built it is checked even in the twin
pass (its names and layout do not depend on which one is bound).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from compactlog.records import _py, kernels, layout

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
