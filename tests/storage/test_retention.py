"""Retention deletes whole old segments by log start offset, size and time; never the active one."""

from __future__ import annotations

import os

from storage_helpers import batch, make_config

from compactlog.storage.log import Log
from compactlog.storage.retention import SegmentFacts, segments_to_delete

TS = 1_700_000_000_000


def facts(*sizes_and_ts):
    base = 0
    out = []
    for size, ts in sizes_and_ts:
        out.append(SegmentFacts(base, size, ts))
        base += 10
    return out


def decide(segs, **kw):
    args = dict(log_start_offset=0, log_end_offset=len(segs) * 10, now=TS, retention_ms=-1,
                retention_bytes=-1, delete_policy=True)
    args.update(kw)
    return segments_to_delete(segs, **args)


def test_retention_ms_deletes_old_segments_oldest_first_and_stops_at_first_young():
    segs = facts((100, TS - 5000), (100, TS - 50), (100, TS - 5000), (100, TS))
    d = decide(segs, retention_ms=1000)
    assert d.count == 1 and d.reason == "retention.ms"


def test_retention_bytes_deletes_while_excess_covers_a_whole_segment():
    segs = facts((100, TS), (100, TS), (100, TS), (100, TS))
    assert decide(segs, retention_bytes=250).count == 1
    assert decide(segs, retention_bytes=100).count == 3
    assert decide(segs, retention_bytes=400) is None


def test_log_start_offset_rule_applies_even_without_delete_policy():
    segs = facts((100, TS), (100, TS), (100, TS))
    d = decide(segs, log_start_offset=20, delete_policy=False)
    assert d.count == 2 and d.reason == "log-start-offset"
    assert decide(segs, retention_ms=0, delete_policy=False) is None


def test_empty_last_segment_is_never_deleted():
    segs = facts((100, TS - 5000), (0, -1))
    assert decide(segs, retention_ms=1000, log_end_offset=10).count == 1


def test_log_rolls_when_every_segment_expires_and_start_offset_advances(tmp_path, clock):
    one = batch([b"k"], [b"x" * 100], ts=TS)
    lg = Log(tmp_path / "t-0", make_config(segment_bytes=len(one) * 2, retention_ms=1000, file_delete_delay_ms=60000),
             time=clock)
    clock.advance(0)
    for _ in range(6):
        lg.append(batch([b"k"], [b"x" * 100], ts=clock.milliseconds()))
    clock.advance(5000)
    deleted = lg.delete_old_segments()
    assert deleted == 3
    assert lg.log_start_offset == 6 and lg.log_end_offset == 6
    assert len(lg.segments) == 1 and lg.active_segment.size == 0
    names = os.listdir(lg.dir)
    assert sum(n.endswith(".log.deleted") for n in names) == 3  # kept for file.delete.delay.ms
    clock.advance(60001)
    assert lg.delete_expired_files() == 3
    assert not any(n.endswith(".deleted") for n in os.listdir(lg.dir))
    assert lg.append(batch([b"k"], ts=clock.milliseconds())).first_offset == 6
