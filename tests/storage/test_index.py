"""The segment indexes (``storage/index.py``): an index without entries has no numpy array (opening an
empty log does not import numpy, ``tests/cli/test_startup_imports.py``), and behaves as one with an empty
array did; its first entry, appended or loaded, makes the array."""

from __future__ import annotations

import numpy as np
import pytest

from compactlog.storage import index as index_module
from compactlog.storage.index import CorruptIndexError, OffsetIndex, TimeIndex


def test_entry_dtypes_and_sizes():
    assert index_module.OFFSET_ENTRY is OffsetIndex.dtype
    assert index_module.TIME_ENTRY is TimeIndex.dtype
    assert OffsetIndex.dtype == np.dtype([("offset", ">i4"), ("position", ">i4")])
    assert TimeIndex.dtype == np.dtype([("timestamp", ">i8"), ("offset", ">i4")])
    for cls in (OffsetIndex, TimeIndex):
        assert cls.entry_size == cls.dtype.itemsize
    with pytest.raises(AttributeError):
        index_module.NO_SUCH_NAME  # noqa: B018


def test_an_index_without_entries_answers_as_an_empty_one(tmp_path):
    oi = OffsetIndex(tmp_path / "0.index", 100, 80)
    ti = TimeIndex(tmp_path / "0.timeindex", 100, 120)
    assert oi._entries is None and ti._entries is None  # no array (and no numpy needed) yet
    assert (tmp_path / "0.index").exists() and (tmp_path / "0.timeindex").exists()
    assert oi.lookup(150) == (100, 0) and oi.lookup_with_previous(150) == (0, None)
    assert oi.last_offset() == 100 and oi.entries == 0 and oi.size_in_bytes == 0 and not oi.is_full
    assert ti.lookup(5) == (-1, 100) and ti.last_entry() == (-1, 100)
    oi.sanity_check(0)
    ti.sanity_check()
    assert len(oi.view()) == 0 and oi.view().dtype == OffsetIndex.dtype
    oi.truncate_to(100)
    ti.truncate_to(100)
    assert oi._entries is None and (tmp_path / "0.index").stat().st_size == 0
    oi.close()
    ti.close()


def test_entries_appended_to_an_empty_index_and_loaded_again(tmp_path):
    path, tpath = tmp_path / "0.index", tmp_path / "0.timeindex"
    oi, ti = OffsetIndex(path, 100, 8 * 100), TimeIndex(tpath, 100, 12 * 100)
    for k in range(40):  # past the first array's 16 slots
        oi.append(100 + 3 * k, 50 * k)
        ti.maybe_append(1000 + k, 100 + 3 * k)
    oi.flush()
    ti.flush()
    for idx in (oi, OffsetIndex(path, 100, 8 * 100, read_only=True)):
        assert idx.entries == 40 and idx.last_offset() == 100 + 3 * 39
        assert idx.lookup(99) == (100, 0) and idx.lookup(100) == (100, 0) and idx.lookup(107) == (106, 100)
        assert idx.lookup_with_previous(107) == (50, (106, 100)) and idx.lookup(10_000) == (217, 1950)
        idx.sanity_check(2000)
        with pytest.raises(CorruptIndexError):
            idx.sanity_check(1950)  # the last position lies past the end of the log
    for idx in (ti, TimeIndex(tpath, 100, 12 * 100, read_only=True)):
        assert idx.entries == 40 and idx.lookup(999) == (-1, 100) and idx.lookup(1005) == (1005, 115)
        assert idx.last_entry() == (1039, 217)
        idx.sanity_check()
    oi.truncate_to(106)
    assert oi.entries == 2 and path.stat().st_size == 16
    oi.release_memory()
    assert oi.entries == 0 and oi.lookup(150) == (100, 0)
    oi.append(500, 7)  # an index whose memory was released takes entries again
    assert oi.lookup(600) == (500, 7)
    oi.close()
    ti.close()


def test_a_torn_index_file_is_refused(tmp_path):
    path = tmp_path / "0.index"
    path.write_bytes(b"\0" * 12)
    with pytest.raises(CorruptIndexError, match="not a multiple of the entry size 8"):
        OffsetIndex(path, 0, 800)


def test_a_missing_file_is_not_created_read_only(tmp_path):
    oi = OffsetIndex(tmp_path / "0.index", 0, 800, read_only=True)
    assert oi.entries == 0 and not (tmp_path / "0.index").exists()
