"""Throttler: holds the cleaner's I/O to ``log.cleaner.io.max.bytes.per.second`` (Kafka's ``Throttler``).

Callers report bytes as they read or write them; once per check interval the observed rate is
compared with the allowed one, and the caller sleeps just long enough to bring the interval's average
down to it. Sleeping goes through the injected clock, so tests run on a mock clock without waiting.
"""

from __future__ import annotations

import threading

from ..clock import Time

CHECK_INTERVAL_MS = 300


class Throttler:
    def __init__(self, bytes_per_second: float, time: Time, check_interval_ms: int = CHECK_INTERVAL_MS) -> None:
        self.rate = bytes_per_second
        self.time = time
        self.check_interval_ns = check_interval_ms * 1_000_000
        self.lock = threading.Lock()  # one throttler is shared by all cleaner threads, as in Kafka
        self.period_start_ns = time.nanoseconds()
        self.observed = 0.0

    @property
    def enabled(self) -> bool:
        return 0 < self.rate < 1.7e308

    def maybe_throttle(self, observed: float) -> float:
        """Account ``observed`` bytes; returns the milliseconds slept (0 when within the rate)."""
        if not self.enabled:
            return 0.0
        with self.lock:
            self.observed += observed
            now = self.time.nanoseconds()
            elapsed_ns = now - self.period_start_ns
            if elapsed_ns <= self.check_interval_ns:
                return 0.0
            slept = 0.0
            if self.observed * 1e9 / elapsed_ns > self.rate:
                desired_ms = self.observed * 1000 / self.rate
                slept = desired_ms - elapsed_ns / 1e6
                if slept > 0:
                    self.time.sleep(slept)
            self.period_start_ns = self.time.nanoseconds()
            self.observed = 0.0
            return max(slept, 0.0)
