"""CleanerManager: cleaning states, the ``cleaner-offset-checkpoint`` and the choice of the next log.

Per-partition states (absent = none), with every legal move in one table, as Kafka's manager keeps them::

    none        --begin-->          in-progress     (chosen by a cleaner thread)
    none        --pause-->          paused(1)
    in-progress --done-->           none            (checkpoint advanced)
    in-progress --abort-->          aborted         (the thread notices, deletes its .cleaned files)
    aborted     --done-->           paused(1)       (checkpoint unchanged)
    paused(n)   --pause-->          paused(n+1)
    paused(n)   --resume-->         paused(n-1) or none

A move missing from the table is a bug and raises IllegalCleanerStateError. Everything here holds
``self.lock``; a thread asking to abort waits on ``self.cond`` until the cleaner has let go.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Iterable

from ..errors import CompactLogError
from ..storage import files
from ..storage.checkpoint import OffsetCheckpointFile
from ..storage.log import Log
from .selection import LogToClean, SegmentFacts, eligible, filthiest, log_to_clean

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
NONE, IN_PROGRESS, ABORTED, PAUSED = "none", "in-progress", "aborted", "paused"

# (state kind, event) -> next state kind; paused counts are handled by the caller of the table.
TRANSITIONS: dict[tuple[str, str], str] = {
    (NONE, "begin"): IN_PROGRESS,
    (NONE, "pause"): PAUSED,
    (IN_PROGRESS, "done"): NONE,
    (IN_PROGRESS, "abort"): ABORTED,
    (ABORTED, "done"): PAUSED,
    (PAUSED, "pause"): PAUSED,
    (PAUSED, "resume"): PAUSED,  # or NONE when the count reaches 0
}


class IllegalCleanerStateError(RuntimeError):
    """A cleaning state change that the state table does not allow."""


class CleanerManager:
    def __init__(self, data_dir: Path) -> None:
        self.checkpoint_file = OffsetCheckpointFile(Path(data_dir) / files.CLEANER_OFFSET_CHECKPOINT)
        self.lock = threading.RLock()
        self.cond = threading.Condition(self.lock)
        self.states: dict[TopicPartition, tuple[str, int]] = {}
        self.uncleanable: dict[TopicPartition, str] = {}  # partition -> why its cleaning failed (KIP-346)
        try:
            self.checkpoints = self.checkpoint_file.read()
        except (OSError, CompactLogError) as exc:  # a hint: cleaning starts over, which is only slower
            log.warning("ignoring %s: %s", self.checkpoint_file.path.name, exc)
            self.checkpoints = {}

    # states ------------------------------------------------------------------------------------
    def state(self, tp: TopicPartition) -> tuple[str, int]:
        return self.states.get(tp, (NONE, 0))

    def _move(self, tp: TopicPartition, event: str) -> None:
        with self.lock:
            self._move_locked(tp, event)

    def _move_locked(self, tp: TopicPartition, event: str) -> None:
        kind, n = self.state(tp)
        nxt = TRANSITIONS.get((kind, event))
        if nxt is None:
            raise IllegalCleanerStateError(f"cannot {event} cleaning of {tp[0]}-{tp[1]} in state {kind}")
        if nxt == NONE:
            self.states.pop(tp, None)
        elif nxt == PAUSED:
            count = {"pause": n + 1, "resume": n - 1, "done": 1}[event]
            if count <= 0:
                self.states.pop(tp, None)
            else:
                self.states[tp] = (PAUSED, count)
        else:
            self.states[tp] = (nxt, 0)
        self.cond.notify_all()

    def abort_and_pause(self, tp: TopicPartition) -> None:
        """Stop any cleaning of ``tp`` and keep it paused; returns once the cleaner has let go."""
        with self.lock:
            kind, _ = self.state(tp)
            if kind == IN_PROGRESS:
                self._move(tp, "abort")
                while self.state(tp)[0] != PAUSED:
                    self.cond.wait()
            else:
                self._move(tp, "pause")

    def resume(self, tp: TopicPartition) -> None:
        with self.lock:
            self._move(tp, "resume")

    def forget(self, tp: TopicPartition) -> None:
        """A partition that is gone from the logs (its topic deleted): drop its state, its uncleanable mark
        and its checkpoint. Called after ``abort_and_pause`` and after the log left the logs the cleaner
        chooses from: had it been resumed before, a cleaner thread could take it in between and swap
        segments into a directory already renamed for deletion (an I/O error that takes the directory
        offline)."""
        with self.lock:
            self.states.pop(tp, None)
            self.uncleanable.pop(tp, None)
            if self.checkpoints.pop(tp, None) is not None:
                self.checkpoint_file.write(self.checkpoints)
            self.cond.notify_all()

    def is_aborted(self, tp: TopicPartition) -> bool:
        return self.state(tp)[0] == ABORTED

    def done_cleaning(self, tp: TopicPartition, end_offset: int | None) -> None:
        """Finish a round: advance the checkpoint (only if it completed) and release the partition."""
        with self.lock:
            kind, _ = self.state(tp)
            if kind == IN_PROGRESS and end_offset is not None:
                self.update_checkpoint(tp, end_offset)
            self._move(tp, "done")

    def update_checkpoint(self, tp: TopicPartition, offset: int, live: Iterable[TopicPartition] | None = None) -> None:
        with self.lock:
            if live is not None:
                keep = set(live)
                self.checkpoints = {k: v for k, v in self.checkpoints.items() if k in keep}
            self.checkpoints[tp] = offset
            self.checkpoint_file.write(self.checkpoints)

    def truncate_checkpoint(self, tp: TopicPartition, offset: int) -> None:
        """Lower the checkpoint when a log is truncated below it."""
        with self.lock:
            if self.checkpoints.get(tp, -1) > offset:
                self.checkpoints[tp] = offset
                self.checkpoint_file.write(self.checkpoints)

    def mark_uncleanable(self, tp: TopicPartition, reason: str) -> None:
        with self.lock:
            self.uncleanable[tp] = reason

    # selection ------------------------------------------------------------------------------------
    def to_clean(self, tp: TopicPartition, lg: Log, now: int) -> LogToClean:
        segs = lg.segments
        facts = [SegmentFacts(s.base_offset, s.size, s.largest_timestamp, s.rolling_timestamp) for s in segs]
        c = lg.config
        return log_to_clean(
            tp, facts, log_start_offset=lg.log_start_offset, log_end_offset=lg.log_end_offset,
            checkpoint=self.checkpoints.get(tp), min_compaction_lag_ms=c.min_compaction_lag_ms,
            max_compaction_lag_ms=c.max_compaction_lag_ms, now=now, last_stable_offset=lg.last_stable_offset,
        )

    def grab_filthiest(self, logs: dict[TopicPartition, Log], now: int,
                       only: set[TopicPartition] | None = None) -> tuple[LogToClean | None, list[LogToClean]]:
        """Pick the filthiest cleanable compacted log and mark it in progress; also return every
        candidate's figures (for the max-dirty-percent and compaction-delay metrics)."""
        with self.lock:
            candidates = self._candidates(logs, now, only)
            chosen = filthiest(candidates, lambda tp: logs[tp].config.min_cleanable_dirty_ratio)
            if chosen is not None:
                self._move(chosen.key, "begin")
            return chosen, candidates

    def grab_eligible(self, logs: dict[TopicPartition, Log], now: int,
                      only: set[TopicPartition] | None = None) -> list[LogToClean]:
        """Every eligible log at once, each marked in progress: the distributed job cleans them together."""
        with self.lock:
            chosen = eligible(self._candidates(logs, now, only), lambda tp: logs[tp].config.min_cleanable_dirty_ratio)
            for c in chosen:
                self._move(c.key, "begin")
            return chosen

    def _candidates(self, logs: dict[TopicPartition, Log], now: int,
                    only: set[TopicPartition] | None) -> list[LogToClean]:
        with self.lock:
            candidates = []
            for tp, lg in logs.items():
                if not lg.config.compact or tp in self.states or tp in self.uncleanable:
                    continue
                if only is not None and tp not in only:
                    continue
                try:
                    c = self.to_clean(tp, lg, now)
                except Exception as exc:
                    log.exception("cannot compute what to clean of %s-%s; marking it uncleanable", *tp)
                    self.uncleanable[tp] = f"cannot compute what to clean: {exc}"
                    continue
                if c.checkpoint_reset:
                    self.update_checkpoint(tp, c.first_dirty_offset)
                candidates.append(c)
            return candidates

    def begin_maintenance(self, tp: TopicPartition) -> bool:
        """Claim an idle compacted log for segment deletion (Kafka's step after each clean)."""
        with self.lock:
            if tp in self.states or tp in self.uncleanable:
                return False
            self._move(tp, "begin")
            return True
