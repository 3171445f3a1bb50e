"""Who runs compactions, when, and what they report (Pulsar's ``compactionStatus`` and monitor).

At most one run per partition at a time: a second request while one runs gets
``CompactionInProgressError``, as Pulsar answers "Compaction already in progress". Status is RUNNING
while a run is under way, ERROR with its text after a failed run (until one succeeds), SUCCESS with the
published horizon and figures, or NOT_RUN. Unlike Pulsar's in-memory status, the last outcome is kept
on disk: every CLI command is its own process. A monitor thread of a
long-running process checks ``compaction.threshold.bytes`` of every topic: when the bytes of the live
log beyond the horizon exceed it (0 = off), the partition is compacted.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ..cleaner.cleaner import IoObserver
from ..clock import Time
from ..errors import CompactLogError, KafkaStorageError
from ..storage.failure import describe
from ..storage.log import Log
from .compactor import Compactor
from .state import CompactionState, clear_error, read_error, read_state, record_error

log = logging.getLogger(__name__)


class CompactionInProgressError(CompactLogError):
    """A compaction of this partition is already running."""

    code, name = 42, "INVALID_REQUEST"


@dataclass(frozen=True)
class CompactionStatus:
    topic: str
    partition: int
    status: str  # NOT_RUN, RUNNING, SUCCESS, ERROR
    error: str | None
    state: CompactionState | None  # the published horizon and the last successful run's figures


def backlog_bytes(lg: Log, horizon: int) -> int:
    """Bytes of the live log not yet covered by the compacted view (segments ending after the horizon)."""
    segs = lg.segments
    total = 0
    for i, s in enumerate(segs):
        nxt = segs[i + 1].base_offset if i + 1 < len(segs) else lg.log_end_offset
        if nxt > horizon:
            total += s.size
    return total


class CompactionService:
    def __init__(self, logs, time: Time) -> None:
        self.logs = logs
        self.time = time
        b = logs.broker
        self.threads = b.get("log.compaction.threads")
        self.memory = min(b.get("log.cleaner.dedupe.buffer.size") // self.threads, 2**31 - 1)
        self.load_factor = b.get("log.cleaner.io.buffer.load.factor")
        self.lock = threading.Lock()
        self.running: set[tuple[str, int]] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.checkpoint = lambda _stage: None  # tests stop runs at a stage through this

    def compact(self, topic: str, partition: int, on_io: IoObserver | None = None) -> CompactionState | None:
        """Run one compaction of the partition now; None when nothing was appended since the last."""
        tp = (topic, partition)
        lg = self.logs.get_log(topic, partition)
        with self.lock:
            if tp in self.running:
                raise CompactionInProgressError(f"Compaction of {topic}-{partition} is already in progress.")
            self.running.add(tp)
        started = self.time.milliseconds()
        try:
            state = Compactor(self.memory, self.load_factor, self.time, self.checkpoint).compact(lg, on_io)
            clear_error(lg.dir)
            return state
        except OSError as exc:  # a full disk, an I/O error: typed, and said without a traceback
            failure = KafkaStorageError(f"compaction of {topic}-{partition} failed: {describe(exc)}; "
                                        f"the live log and the published view are unchanged")
            self._record_error(lg.dir, started, str(failure))
            raise failure from exc
        except BaseException as exc:
            self._record_error(lg.dir, started, f"{type(exc).__name__}: {exc}")
            raise
        finally:
            with self.lock:
                self.running.discard(tp)

    @staticmethod
    def _record_error(partition_dir, started: int, error: str) -> None:
        try:
            record_error(partition_dir, started, error)
        except OSError as exc:  # the disk that failed the run may refuse this too: the log keeps it
            log.error("cannot record the failed compaction in %s (%s): %s", partition_dir, describe(exc), error)

    def status(self, topic: str, partition: int) -> CompactionStatus:
        tp = (topic, partition)
        lg = self.logs.get_log(topic, partition)
        with self.lock:
            running = tp in self.running
        state, failed = read_state(lg.dir), read_error(lg.dir)
        if running:
            return CompactionStatus(topic, partition, "RUNNING", None, state)
        if failed is not None:
            return CompactionStatus(topic, partition, "ERROR", failed[1], state)
        return CompactionStatus(topic, partition, "NOT_RUN" if state is None else "SUCCESS", None, state)

    def due(self) -> list[tuple[str, int]]:
        """Partitions whose bytes beyond the horizon exceed their topic's ``compaction.threshold.bytes``."""
        out = []
        for tp, lg in list(self.logs.logs.items()):
            threshold = lg.config.compaction_threshold_bytes
            if threshold and tp not in self.running:
                st = read_state(lg.dir)
                if backlog_bytes(lg, st.horizon if st else lg.log_start_offset) > threshold:
                    out.append(tp)
        return out

    def compact_many(self, tps: list[tuple[str, int]], on_io: IoObserver | None = None
                     ) -> dict[tuple[str, int], CompactionState | None | BaseException]:
        """Compact partitions, ``log.compaction.threads`` at a time (each run with its share of the
        dedupe buffer); per partition its state, or the exception its run raised."""
        def run(tp: tuple[str, int]) -> CompactionState | None | BaseException:
            try:
                return self.compact(*tp, on_io=on_io)
            except Exception as exc:
                return exc

        if self.threads == 1 or len(tps) < 2:
            return {tp: run(tp) for tp in tps}
        with ThreadPoolExecutor(min(self.threads, len(tps)), thread_name_prefix="compaction") as pool:
            return dict(zip(tps, pool.map(run, tps)))

    def check(self) -> list[tuple[str, int]]:
        """One monitor tick: compact every partition that is due; returns those it compacted."""
        done = []
        for tp, outcome in self.compact_many(self.due()).items():
            if not isinstance(outcome, BaseException):
                done.append(tp)
            elif isinstance(outcome, CompactLogError):
                if not isinstance(outcome, CompactionInProgressError):
                    log.error("compaction of %s-%s failed: %s", *tp, outcome)
            else:
                log.error("compaction of %s-%s failed", *tp, exc_info=outcome)
        return done

    def start(self, interval_ms: int | None = None) -> None:
        """Start the monitor; ``log.compaction.monitor.interval.ms`` of the broker config unless given."""
        if interval_ms is None:
            interval_ms = self.logs.broker.get("log.compaction.monitor.interval.ms")
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, args=(interval_ms,), name="compaction-monitor", daemon=True)
            self._thread.start()

    def _run(self, interval_ms: int) -> None:
        while not self._stop.wait(interval_ms / 1000):
            self.check()

    def shutdown(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
