"""LogCleaner: the cleaner threads, their memory, metrics and stats lines (Kafka's ``LogCleaner``).

Each thread owns a Cleaner with an offset map of ``log.cleaner.dedupe.buffer.size / threads`` bytes
and loops: clean the filthiest log; run segment deletion for idle compacted logs; sleep
``log.cleaner.backoff.ms`` when nothing was cleaned. A partition whose cleaning fails is marked
uncleanable (logged, counted) and the others keep cleaning.
"""

from __future__ import annotations

import logging
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from ..clock import SYSTEM, Time
from ..errors import CompactLogError
from ..storage.failure import describe
from ..storage.log import Log
from .cleaner import Cleaner, CleanerStats, CleaningAbortedError, IoObserver
from .manager import CleanerManager, TopicPartition
from .selection import LogToClean
from .offset_map import OffsetMap
from .throttler import Throttler

log = logging.getLogger(__name__)
MB = float(1 << 20)


@dataclass(frozen=True)
class CleanResult:
    """One finished round: which log, its dirty section and the stats, for reports."""

    topic: str
    partition: int
    first_dirty: int
    end_offset: int
    stats: CleanerStats
    finished_ms: int = -1  # when the round ended (the cleaner's clock); -1 when not known
    thread: str = ""  # the thread that ran it (a cleaner thread's name, or the caller's for clean_now)

    def stats_report(self, thread: int = 0) -> str:
        """The message Kafka's cleaner logs after this round (:func:`stats_report`), as ``clean`` prints it."""
        return stats_report(thread, f"{self.topic}-{self.partition}", self.first_dirty, self.end_offset, self.stats)


IDLE, CLEANING, DEAD = "idle", "cleaning", "dead"


@dataclass(frozen=True)
class ThreadState:
    """What one cleaning thread is doing, for status pages: idle, cleaning a partition, or dead."""

    name: str
    state: str  # IDLE, CLEANING or DEAD
    since_ms: int  # when it entered this state
    topic: str | None = None  # the partition being cleaned (CLEANING only)
    partition: int | None = None


def stats_report(thread: int, name: str, first_dirty: int, end: int, s: CleanerStats) -> str:
    """The multi-line INFO message Kafka's cleaner logs after each cleaned log."""
    total = s.elapsed
    mb_read = s.bytes_read / MB
    return "\n".join([
        f"Log cleaner thread {thread} cleaned log {name} (dirty section = [{first_dirty}, {end}])",
        f"\t{mb_read:,.1f} MB of log processed in {total:,.1f} seconds ({mb_read / total:,.1f} MB/sec).",
        f"\tIndexed {s.map_bytes_read / MB:,.1f} MB in {s.map_seconds:,.1f} seconds "
        f"({s.map_bytes_read / MB / max(s.map_seconds, 1e-9):,.1f} Mb/sec, {100 * s.map_seconds / total:,.1f}% of total time)",
        f"\tBuffer utilization: {100 * s.buffer_utilization:,.1f}%",
        f"\tCleaned {mb_read:,.1f} MB in {s.clean_seconds:,.1f} seconds "
        f"({mb_read / max(s.clean_seconds, 1e-9):,.1f} Mb/sec, {100 * s.clean_seconds / total:,.1f}% of total time)",
        f"\tStart size: {s.bytes_read / MB:,.1f} MB ({s.messages_read:,} messages)",
        f"\tEnd size: {s.bytes_written / MB:,.1f} MB ({s.messages_written:,} messages)",
        f"\t{100 * (1 - s.bytes_written / max(s.bytes_read, 1)):,.1f}% size reduction "
        f"({100 * (1 - s.messages_written / max(s.messages_read, 1)):,.1f}% fewer messages)",
    ])


class LogCleaner:
    """Cleans the compacted logs of a LogManager, in background threads or one round on demand."""

    def __init__(self, logs, time: Time = SYSTEM) -> None:
        self.logs = logs
        self.time = time
        b = logs.broker
        self.num_threads = max(1, b.get("log.cleaner.threads"))
        self.memory_per_thread = min(b.get("log.cleaner.dedupe.buffer.size") // self.num_threads, 2**31 - 1)
        self.load_factor = b.get("log.cleaner.io.buffer.load.factor")
        self.backoff_ms = b.get("log.cleaner.backoff.ms")
        self.throttler = Throttler(b.get("log.cleaner.io.max.bytes.per.second"), time)
        self.enabled = b.get("log.cleaner.enable")
        self.manager = CleanerManager(logs.dir)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.dead_threads = 0
        self.last_run_ms = time.milliseconds()
        self.last_stats: list[CleanResult] = []
        self.thread_states: dict[str, ThreadState] = {}  # by thread name; each entry replaced whole
        self.bytes_read_total = 0  # over every round since start (a chart's bytes cleaned over time)
        self.bytes_written_total = 0
        self._stats_lock = threading.Lock()
        self.max_dirty_percent = 0.0
        self.max_compaction_delay_secs = 0.0
        self.max_clean_time_secs = 0.0
        self.max_buffer_utilization = 0.0
        logs.on_partition_deleted.append(self.manager.abort_and_pause)  # paused until it has left the logs
        logs.on_partition_removed.append(self.manager.forget)
        logs.on_config_changed.append(self._config_changed)
        logs.around_truncation.append(self._paused_for_truncation)

    def _new_cleaner(self) -> Cleaner:
        return Cleaner(OffsetMap(self.memory_per_thread, self.load_factor), self.time, self._check_abort,
                       throttler=self.throttler)

    def _check_abort(self, lg: Log) -> None:
        if self.manager.is_aborted((lg.topic, lg.partition)):
            raise CleaningAbortedError(f"cleaning of {lg.name} was aborted")

    def _config_changed(self, topic: str, cfg) -> None:
        """A policy change must not race a round that started under the old one: pause, then resume."""
        for tp in [k for k in self.logs.logs if k[0] == topic]:
            self.manager.abort_and_pause(tp)
            self.manager.resume(tp)

    @contextmanager
    def _paused_for_truncation(self, topic: str, partition: int, offset: int):
        tp = (topic, partition)
        self.manager.abort_and_pause(tp)
        try:
            yield
            self.manager.truncate_checkpoint(tp, offset)
        finally:
            self.manager.resume(tp)

    # one iteration ------------------------------------------------------------------------------
    def clean_filthiest(self, cleaner: Cleaner, thread: int = 0,
                        only: set[TopicPartition] | None = None) -> tuple[bool, CleanResult | None]:
        """One thread iteration. Returns (a log was chosen, the finished round or None if it was
        aborted or failed)."""
        now = self.time.milliseconds()
        logs = dict(self.logs.logs)
        chosen, candidates = self.manager.grab_filthiest(logs, now, only)
        if chosen is not None and not self._still_live(chosen.key, logs[chosen.key]):
            chosen = None
        self.max_dirty_percent = 100 * max((c.dirty_ratio for c in candidates), default=0.0)
        self.max_compaction_delay_secs = max((c.compaction_delay_ms for c in candidates), default=0) / 1000
        self.last_run_ms = now
        result = None
        worker = threading.current_thread().name
        if chosen is not None:
            tp = chosen.key
            lg = logs[tp]
            self._set_state(worker, CLEANING, tp)
            try:
                end, stats = cleaner.clean(lg, chosen.first_dirty_offset, chosen.first_uncleanable_offset)
                result = CleanResult(tp[0], tp[1], chosen.first_dirty_offset, end, stats,
                                     self.time.milliseconds(), worker)
                self._record(result, thread)  # the round's figures first: whoever sees the checkpoint move sees them
                self.manager.done_cleaning(tp, end)
                lg.delete_expired_files()
            except CleaningAbortedError:
                log.info("cleaning of %s aborted", lg.name)
                self.manager.done_cleaning(tp, None)
            except (OSError, CompactLogError) as exc:  # a full disk, a corrupt batch: said in one line
                reason = describe(exc) if isinstance(exc, OSError) else str(exc)
                log.error("cleaning of %s failed (%s); it is now uncleanable until restart or deletion", lg.name, reason)
                self.manager.done_cleaning(tp, chosen.first_dirty_offset)
                self.manager.mark_uncleanable(tp, reason)
            except Exception as exc:  # a bug: with its traceback
                log.exception("cleaning of %s failed; it is now uncleanable until restart or deletion", lg.name)
                self.manager.done_cleaning(tp, chosen.first_dirty_offset)
                self.manager.mark_uncleanable(tp, f"{type(exc).__name__}: {exc}")
            finally:
                self._set_state(worker, IDLE)
        self._delete_compacted_segments(only)
        return chosen is not None, result

    def _set_state(self, worker: str, state: str, tp: TopicPartition | None = None) -> None:
        old = self.thread_states.get(worker)
        if old is not None and old.state == state == IDLE:
            return  # idle since the first idle moment, not since the last empty look
        self.thread_states[worker] = ThreadState(worker, state, self.time.milliseconds(),
                                                 *(tp if tp is not None else (None, None)))

    def threads(self) -> list[ThreadState]:
        """The cleaner threads' states, and those of callers of :meth:`clean_now` while they clean."""
        return sorted(self.thread_states.values(), key=lambda t: t.name)

    def _record(self, r: CleanResult, thread: int) -> None:
        with self._stats_lock:  # rounds of several threads end at once
            self.last_stats.append(r)
            del self.last_stats[:-100]
            self.bytes_read_total += r.stats.bytes_read
            self.bytes_written_total += r.stats.bytes_written
        self.max_clean_time_secs = max(self.max_clean_time_secs, r.stats.elapsed)
        self.max_buffer_utilization = max(self.max_buffer_utilization, 100 * r.stats.buffer_utilization)
        log.info("%s", stats_report(thread, f"{r.topic}-{r.partition}", r.first_dirty, r.end_offset, r.stats))
        if r.stats.invalid_messages:
            log.warning("Cleaned log %s-%s contained %d invalid (keyless) messages", r.topic, r.partition,
                        r.stats.invalid_messages)

    def _delete_compacted_segments(self, only: set[TopicPartition] | None) -> None:
        """Retention for compacted logs (full rules with compact,delete; log start offset only with compact)."""
        for tp, lg in list(self.logs.logs.items()):
            if not lg.config.compact or (only is not None and tp not in only):
                continue
            if self.manager.begin_maintenance(tp) and self._still_live(tp, lg):
                try:
                    lg.delete_old_segments()
                except CompactLogError as exc:
                    log.error("deleting old segments of %s failed (%s)", lg.name, exc)
                    self.manager.mark_uncleanable(tp, f"deleting old segments failed: {exc}")
                except Exception as exc:
                    log.exception("deleting old segments of %s failed", lg.name)
                    self.manager.mark_uncleanable(tp, f"deleting old segments failed: {type(exc).__name__}: {exc}")
                finally:
                    self.manager.done_cleaning(tp, None)

    def clean_now(self, topic: str | None = None, max_rounds: int = 1000,
                  on_io: IoObserver | None = None) -> list[CleanResult]:
        """Clean every eligible log (of ``topic``) until none is eligible; for ``compactlog clean``.
        ``on_io(log name, phase, bytes)`` hears of every chunk read, for a progress bar."""
        only = None if topic is None else {k for k in self.logs.logs if k[0] == topic}
        cleaner = self._new_cleaner()
        if on_io is not None:
            cleaner.on_io = on_io
        results = []
        worker = threading.current_thread().name
        try:
            for _ in range(max_rounds):
                chosen, r = self.clean_filthiest(cleaner, 0, only)
                if not chosen:
                    break
                if r is not None:
                    results.append(r)
        finally:
            if worker not in self._thread_names():
                self.thread_states.pop(worker, None)  # a caller is listed only while it cleans
        return results

    def _thread_names(self) -> set[str]:
        return {t.name for t in self._threads}

    # cleaning done outside the cleaner's threads (the Spark compaction and recompression jobs) ------
    def claim_eligible(self, topic: str | None = None) -> list[LogToClean]:
        """Every log (of ``topic``) the cleaner would clean now, by its own rules, each claimed (in
        progress) so that no cleaner thread touches it until :meth:`release` is called."""
        logs = dict(self.logs.logs)
        only = None if topic is None else {tp for tp in logs if tp[0] == topic}
        return [c for c in self.manager.grab_eligible(logs, self.time.milliseconds(), only)
                if self._still_live(c.key, logs[c.key])]

    def _still_live(self, tp: TopicPartition, lg: Log) -> bool:
        """Whether a log claimed from a copy of the logs is still the one served; if its topic was
        deleted since the copy was taken, the claim is released and False returned. (Once a log is
        claimed, a delete waits for the claim to end, so checking after the claim closes the gap.)"""
        if self.logs.logs.get(tp) is lg:
            return True
        self.manager.done_cleaning(tp, None)
        return False

    def was_aborted(self, tp: TopicPartition) -> bool:
        """Whether a claimed log was asked to stop meanwhile (deleted, truncated, paused)."""
        return self.manager.is_aborted(tp)

    def release(self, tp: TopicPartition, cleaned_up_to: int | None) -> None:
        """End a claim: the cleaner's checkpoint moves to ``cleaned_up_to`` (None: the job did not
        finish, so it stays where it was)."""
        self.manager.done_cleaning(tp, cleaned_up_to)

    @contextmanager
    def paused(self, tps: list[TopicPartition]) -> Iterator[None]:
        """No cleaning of ``tps`` while the block runs (a job rewriting their segments another way)."""
        done = []
        try:
            for tp in tps:
                self.manager.abort_and_pause(tp)
                done.append(tp)
            yield
        finally:
            for tp in done:
                self.manager.resume(tp)

    # threads ------------------------------------------------------------------------------------
    def start(self) -> None:
        if not self.enabled or self._threads:
            return
        for i in range(self.num_threads):
            t = threading.Thread(target=self._run, args=(i,), name=f"kafka-log-cleaner-thread-{i}", daemon=True)
            self._set_state(t.name, IDLE)
            t.start()
            self._threads.append(t)

    def _run(self, thread: int) -> None:
        cleaner = self._new_cleaner()
        try:
            while not self._stop.is_set():
                if not self.clean_filthiest(cleaner, thread)[0]:
                    self._stop.wait(self.backoff_ms / 1000)
        except BaseException:  # noqa: BLE001 - a dead thread is counted, as Kafka's DeadThreadCount
            self.dead_threads += 1
            self._set_state(threading.current_thread().name, DEAD)
            log.exception("log cleaner thread %d died", thread)

    def shutdown(self) -> None:
        self._stop.set()
        with self.manager.lock:
            for tp, (kind, _) in list(self.manager.states.items()):
                if kind == "in-progress":
                    self.manager._move(tp, "abort")
        for t in self._threads:
            t.join()
            self.thread_states.pop(t.name, None)
        self._threads = []

    def metrics(self) -> dict[str, float]:
        """Kafka's cleaner metrics, by their names."""
        return {
            "max-dirty-percent": self.max_dirty_percent,
            "max-clean-time-secs": self.max_clean_time_secs,
            "max-buffer-utilization-percent": self.max_buffer_utilization,
            "max-compaction-delay-secs": self.max_compaction_delay_secs,
            "time-since-last-run-ms": self.time.milliseconds() - self.last_run_ms,
            "uncleanable-partitions-count": len(self.manager.uncleanable),
            "DeadThreadCount": self.dead_threads,
        }


__all__ = ["CleanResult", "LogCleaner", "ThreadState", "stats_report"]
