"""The cleaner's pure rules: survival, grouping, selection, the state table."""

from __future__ import annotations

import numpy as np
import pytest

from compactlog.cleaner.grouping import SegmentSize, group_segments_by_size
from compactlog.cleaner.manager import CleanerManager, IllegalCleanerStateError
from compactlog.cleaner.selection import SegmentFacts, filthiest, log_to_clean
from compactlog.cleaner.survival import BatchDecision, batch_decision, retained

NOW = 1_000_000


def test_latest_offset_per_key_survives_and_keyless_records_go():
    offsets = np.array([10, 11, 12, 13, 14])
    mapped = np.array([12, 11, 12, -1, 14])
    has_key = np.array([True, True, True, False, True])
    tomb = np.zeros(5, dtype=bool)
    assert retained(offsets, mapped, has_key, tomb, 14, None, NOW).tolist() == [False, True, True, False, True]


def test_records_beyond_the_mapped_range_are_untouched():
    keep = retained(np.array([20, 21]), np.array([-1, -1]), np.array([False, True]), np.array([False, True]), 19, 0, NOW)
    assert keep.tolist() == [True, True]


def test_tombstones_live_until_their_batch_horizon_passes():
    args = (np.array([5]), np.array([5]), np.array([True]), np.array([True]), 9)
    assert retained(*args, None, NOW).tolist() == [True]  # no horizon yet: kept (and the batch gets one)
    assert retained(*args, NOW + 1, NOW).tolist() == [True]
    assert retained(*args, NOW, NOW).tolist() == [False]


def test_batch_ending_at_the_upper_bound_is_kept_even_when_empty():
    assert batch_decision(100, 100, False) is BatchDecision.RETAIN_EMPTY
    assert batch_decision(99, 100, False) is BatchDecision.DELETE_EMPTY


def test_grouping_respects_size_index_and_offset_range():
    segs = [SegmentSize(0, 400, 8, 12), SegmentSize(10, 400, 8, 12), SegmentSize(20, 400, 8, 12), SegmentSize(30, 100, 8, 12)]
    assert group_segments_by_size(segs, 1000, 1000, 40) == [[0, 1], [2, 3]]
    assert group_segments_by_size(segs, 1000, 24, 40) == [[0, 1], [2, 3]]  # 2 x 12 time-index bytes fit
    assert group_segments_by_size(segs, 1000, 23, 40) == [[0], [1], [2], [3]]
    far = [SegmentSize(0, 10, 0, 0), SegmentSize(2**31, 10, 0, 0)]
    assert group_segments_by_size(far, 1000, 1000, 2**31 + 5) == [[0], [1]]


def segs(*specs):
    return [SegmentFacts(b, s, lt, ft) for b, s, lt, ft in specs]


def test_dirty_ratio_and_bounds():
    s = segs((0, 100, NOW - 10_000, NOW - 20_000), (10, 100, NOW - 5_000, NOW - 6_000), (20, 100, NOW, NOW), (30, 0, -1, -1))
    c = log_to_clean("t", s, log_start_offset=0, log_end_offset=30, checkpoint=10, min_compaction_lag_ms=0,
                     max_compaction_lag_ms=2**63 - 1, now=NOW)
    assert (c.first_dirty_offset, c.first_uncleanable_offset, c.clean_bytes, c.cleanable_bytes) == (10, 30, 100, 200)
    assert c.dirty_ratio == pytest.approx(2 / 3) and not c.needs_compaction_now


def test_min_compaction_lag_holds_back_young_segments():
    s = segs((0, 100, NOW - 10_000, 1), (10, 100, NOW - 100, 1), (20, 0, -1, -1))
    c = log_to_clean("t", s, log_start_offset=0, log_end_offset=20, checkpoint=None, min_compaction_lag_ms=1000,
                     max_compaction_lag_ms=2**63 - 1, now=NOW)
    assert c.first_uncleanable_offset == 10 and c.cleanable_bytes == 100


def test_max_compaction_lag_forces_a_clean_below_the_ratio():
    s = segs((0, 1000, NOW - 10_000, NOW - 10_000), (10, 10, NOW - 5_000, NOW - 5_000), (20, 0, -1, -1))
    c = log_to_clean("t", s, log_start_offset=0, log_end_offset=20, checkpoint=10, min_compaction_lag_ms=0,
                     max_compaction_lag_ms=1000, now=NOW)
    assert c.compaction_delay_ms == 4000 and c.dirty_ratio < 0.5
    assert filthiest([c], lambda _: 0.5) is c
    relaxed = log_to_clean("t", s, log_start_offset=0, log_end_offset=20, checkpoint=10, min_compaction_lag_ms=0,
                           max_compaction_lag_ms=10**9, now=NOW)
    assert filthiest([relaxed], lambda _: 0.5) is None


def test_checkpoint_outside_the_log_resets_to_the_log_start():
    s = segs((50, 100, 1, 1), (60, 0, -1, -1))
    c = log_to_clean("t", s, log_start_offset=50, log_end_offset=60, checkpoint=10, min_compaction_lag_ms=0,
                     max_compaction_lag_ms=2**63 - 1, now=NOW)
    assert c.first_dirty_offset == 50 and c.checkpoint_reset


def test_filthiest_picks_the_highest_ratio_above_the_minimum():
    s1 = segs((0, 100, 1, 1), (10, 100, 1, 1), (20, 0, -1, -1))
    a = log_to_clean("a", s1, log_start_offset=0, log_end_offset=20, checkpoint=10, min_compaction_lag_ms=0,
                     max_compaction_lag_ms=2**63 - 1, now=NOW)
    b = log_to_clean("b", s1, log_start_offset=0, log_end_offset=20, checkpoint=0, min_compaction_lag_ms=0,
                     max_compaction_lag_ms=2**63 - 1, now=NOW)
    assert filthiest([a, b], lambda _: 0.5) is b
    assert filthiest([a], lambda _: 0.5) is None  # 0.5 is not strictly above 0.5


def test_state_table(tmp_path):
    m = CleanerManager(tmp_path)
    tp = ("t", 0)
    m._move(tp, "begin")
    with pytest.raises(IllegalCleanerStateError):
        m.resume(tp)
    m._move(tp, "abort")
    assert m.is_aborted(tp)
    m.done_cleaning(tp, 99)
    assert m.state(tp) == ("paused", 1) and tp not in m.checkpoints
    m.abort_and_pause(tp)
    assert m.state(tp) == ("paused", 2)
    m.resume(tp)
    m.resume(tp)
    assert m.state(tp) == ("none", 0)
    with pytest.raises(IllegalCleanerStateError):
        m.done_cleaning(tp, 5)
