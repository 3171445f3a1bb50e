"""A crash at every stage of the segment swap leaves the old or the new segments, never a mix."""

from __future__ import annotations

import os

import pytest
from storage_helpers import batch, make_config

from compactlog.storage import files
from compactlog.storage.log import Log
from compactlog.storage.segment import LogSegment, SegmentParams

TS = 1_700_000_000_000


def build(tmp_path, clock):
    """Three closed segments of 4 batches each, keys k0..k3 repeated, plus an active one."""
    lg = Log(tmp_path / "t-0", make_config(segment_bytes=4 * len(batch([b"k0"]))), time=clock)
    for i in range(13):
        lg.append(batch([f"k{i % 4}"], [f"v{i}".encode()]))
    return lg


def cleaned_copy(lg: Log, olds: list[LogSegment]) -> LogSegment:
    """A `.cleaned` segment holding only the last batch of each old segment (stand-in for a cleaner)."""
    new = LogSegment(lg.dir, olds[0].base_offset, SegmentParams(), lg.time, temp_suffix=files.CLEANED_SUFFIX)
    for old in olds:
        last = list(old.batches(0))[-1][1]
        new.append(last.last_offset, last.max_timestamp, last.last_offset, bytes(last.buffer))
    new.on_become_inactive()
    new.flush()
    return new


def offsets(lg: Log) -> list[int]:
    return [r.offset for b in lg.batches(0) for r in b.records()]


def reopen(tmp_path, clock) -> Log:
    return Log(tmp_path / "t-0", make_config(segment_bytes=4 * len(batch([b"k0"]))), time=clock, recovery_point=0)


def test_complete_swap_keeps_offsets_and_drops_replaced_records(tmp_path, clock):
    lg = build(tmp_path, clock)
    olds = list(lg.segments[:2])
    new = cleaned_copy(lg, olds)
    lg.replace_segments([new], olds)
    assert offsets(lg) == [3, 7, 8, 9, 10, 11, 12]
    lg.close()
    assert offsets(reopen(tmp_path, clock)) == [3, 7, 8, 9, 10, 11, 12]


def test_crash_with_only_cleaned_files_keeps_the_old_segments(tmp_path, clock):
    lg = build(tmp_path, clock)
    cleaned_copy(lg, list(lg.segments[:2])).close_handlers()
    lg.close()
    d = tmp_path / "t-0"
    assert any(n.endswith(".cleaned") for n in os.listdir(d))
    lg = reopen(tmp_path, clock)
    assert offsets(lg) == list(range(13))
    assert not any(n.endswith((".cleaned", ".swap", ".deleted")) for n in os.listdir(d))


def test_crash_after_rename_to_swap_completes_the_swap(tmp_path, clock):
    lg = build(tmp_path, clock)
    new = cleaned_copy(lg, list(lg.segments[:2]))
    new.change_suffix(files.CLEANED_SUFFIX, files.SWAP_SUFFIX)
    new.close_handlers()
    lg.close()
    assert offsets(reopen(tmp_path, clock)) == [3, 7, 8, 9, 10, 11, 12]


def test_crash_after_old_segments_renamed_deleted_completes_the_swap(tmp_path, clock):
    lg = build(tmp_path, clock)
    olds = list(lg.segments[:2])
    new = cleaned_copy(lg, olds)
    new.change_suffix(files.CLEANED_SUFFIX, files.SWAP_SUFFIX)
    new.close_handlers()
    lg.close()
    for old in olds:
        for p in [old.log_path, *old.index_paths()]:
            os.replace(p, str(p) + files.DELETED_SUFFIX)
    lg = reopen(tmp_path, clock)
    assert offsets(lg) == [3, 7, 8, 9, 10, 11, 12]
    assert not any(n.endswith((".swap", ".deleted")) for n in os.listdir(tmp_path / "t-0"))


def test_swap_below_a_newer_cleaned_file_is_an_unfinished_operation(tmp_path, clock):
    """A .swap at or above the smallest .cleaned base belongs to an operation that never finished."""
    lg = build(tmp_path, clock)
    segs = list(lg.segments)
    swap = cleaned_copy(lg, [segs[1]])
    swap.change_suffix(files.CLEANED_SUFFIX, files.SWAP_SUFFIX)
    swap.close_handlers()
    cleaned_copy(lg, [segs[0]]).close_handlers()
    lg.close()
    assert offsets(reopen(tmp_path, clock)) == list(range(13))


@pytest.mark.parametrize("delay", [0, 60_000])
def test_readers_of_a_replaced_segment_keep_reading(tmp_path, clock, delay):
    lg = Log(tmp_path / "t-0", make_config(segment_bytes=4 * len(batch([b"k0"])), file_delete_delay_ms=delay), time=clock)
    for i in range(13):
        lg.append(batch([f"k{i % 4}"], [f"v{i}".encode()]))
    reader = lg.batches(0)
    first = next(reader)
    olds = list(lg.segments[:2])
    lg.replace_segments([cleaned_copy(lg, olds)], olds)
    rest = [b.base_offset for b in reader]
    # the reader saw the old segment through; it may continue in the old or new view but never skips
    seen = [first.base_offset, *rest]
    assert seen == sorted(seen)
    assert 12 in seen
