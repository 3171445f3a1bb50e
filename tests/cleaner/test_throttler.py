"""log.cleaner.io.max.bytes.per.second: the cleaner sleeps to hold its I/O to the configured rate."""

from __future__ import annotations

import compactlog
from compactlog.clock import MockTime
from compactlog.cleaner.throttler import Throttler


def test_sleeps_just_enough_to_bring_the_interval_down_to_the_rate():
    clock = MockTime()
    t = Throttler(1000.0, clock, check_interval_ms=300)
    clock.sleep(400)
    assert t.maybe_throttle(2500) == 2100  # 2.5 s worth of bytes in 0.4 s: sleep the other 2.1 s
    assert clock.nanoseconds() == 2_500_000_000
    clock.sleep(400)
    assert t.maybe_throttle(100) == 0  # 250 B/s is under the rate
    assert clock.nanoseconds() == 2_900_000_000


def test_nothing_is_checked_inside_one_interval():
    clock = MockTime()
    t = Throttler(1.0, clock, check_interval_ms=300)
    clock.sleep(200)
    assert t.maybe_throttle(10**9) == 0 and clock.nanoseconds() == 200_000_000


class TickingClock(MockTime):
    """Every reading of the monotonic clock moves it 100 ms, as real work would."""

    def nanoseconds(self) -> int:
        self.sleep(100)
        return super().nanoseconds()


def _clean(tmp_path, broker: dict) -> tuple[int, int]:
    clock = TickingClock()
    with compactlog.open(tmp_path, broker, time=clock) as cl:
        cl.create_topic("t", 1, {"cleanup.policy": "compact", "segment.bytes": "20000", "min.cleanable.dirty.ratio": "0.01"})
        cl.produce_batch("t", [(b"k%d" % (i % 50), b"x" * 200) for i in range(2000)])
        cl.log("t").roll()
        start = clock.nanoseconds()
        rounds = cl.clean("t").compactions
        s = rounds[0].stats
        return s.map_bytes_read + s.bytes_read + s.bytes_written, clock.nanoseconds() - start


def test_the_cleaner_holds_its_io_to_the_configured_rate(tmp_path):
    moved, elapsed_ns = _clean(tmp_path / "slow", {"log.cleaner.io.max.bytes.per.second": "100000"})
    assert moved > 400_000
    assert elapsed_ns / 1e9 >= moved / 100_000 * 0.8  # at most 100 kB/s, give or take the last interval
    _, free_ns = _clean(tmp_path / "free", {})
    assert free_ns < elapsed_ns / 10  # unthrottled by default
