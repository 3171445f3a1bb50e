"""Injected time, so segment rolling, retention and cleaning can be tested without sleeping."""

from __future__ import annotations

import threading
import time as _time


class Time:
    """Wall-clock milliseconds and monotonic nanoseconds, as Kafka's ``Time`` offers them."""

    def milliseconds(self) -> int:
        return int(_time.time() * 1000)

    def nanoseconds(self) -> int:
        return _time.monotonic_ns()

    def sleep(self, ms: float) -> None:
        _time.sleep(ms / 1000)


SYSTEM = Time()


class MockTime(Time):
    """A clock that moves only when told to; ``sleep`` advances it instead of waiting."""

    def __init__(self, ms: int = 1_700_000_000_000) -> None:
        self._ms = ms
        self._ns = 0
        self._lock = threading.Lock()

    def milliseconds(self) -> int:
        return self._ms

    def nanoseconds(self) -> int:
        return self._ns

    def sleep(self, ms: float) -> None:
        with self._lock:
            self._ms += int(ms)
            self._ns += int(ms * 1_000_000)

    advance = sleep
