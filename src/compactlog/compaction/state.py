"""The published compaction state of a partition and the side logs on disk.

``<partition dir>/compaction-state`` is the commit point: one JSON document naming the horizon and the
side log that holds the compacted records below it (Pulsar keeps the same pair in one cursor update).
It is replaced with ``atomic_write``, so after a crash it names either the old or the new side log.
Side logs live in ``<partition dir>/compacted.<id>/``; any not named by the state is garbage left by
an interrupted run and is removed.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

from ..storage import files

STATE_FILE = files.COMPACTION_STATE_FILE
ERROR_FILE = files.COMPACTION_ERROR_FILE  # the last run's failure, until a run succeeds
SIDE_LOG_PREFIX = files.SIDE_LOG_PREFIX
_SIDE_LOG = re.compile(r"^compacted\.(\d+)$")


@dataclass(frozen=True)
class CompactionState:
    """What the last successful run published, and what it did."""

    horizon: int  # offsets below it are served from the side log
    side_log: int  # id of the side log directory
    run_ms: int  # when the run started (wall clock)
    duration_ms: int
    records_before: int  # records read (previous side log + live records up to the horizon)
    bytes_before: int
    records_after: int  # records in the new side log
    bytes_after: int


def side_log_dir(partition_dir: Path, side_log: int) -> Path:
    return Path(partition_dir) / f"{SIDE_LOG_PREFIX}{side_log}"


def read_state(partition_dir: Path) -> CompactionState | None:
    path = Path(partition_dir) / STATE_FILE
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    return CompactionState(**json.loads(raw))


def publish(partition_dir: Path, state: CompactionState) -> None:
    """The commit point of a run: the new (horizon, side log) pair, atomically."""
    files.atomic_write(Path(partition_dir) / STATE_FILE, json.dumps(asdict(state), sort_keys=True) + "\n")


def side_logs(partition_dir: Path) -> list[int]:
    out = []
    for p in Path(partition_dir).iterdir():
        m = _SIDE_LOG.match(p.name)
        if m and p.is_dir():
            out.append(int(m.group(1)))
    return sorted(out)


def remove_unpublished(partition_dir: Path) -> list[int]:
    """Delete every side log the published state does not name (left by an interrupted or superseded
    run); returns their ids."""
    state = read_state(partition_dir)
    keep = None if state is None else state.side_log
    gone = [i for i in side_logs(partition_dir) if i != keep]
    for i in gone:
        shutil.rmtree(side_log_dir(partition_dir, i), ignore_errors=True)
    if gone:
        files.fsync_dir(Path(partition_dir))
    return gone


def record_error(partition_dir: Path, run_ms: int, error: str) -> None:
    files.atomic_write(Path(partition_dir) / ERROR_FILE, json.dumps({"run_ms": run_ms, "error": error}) + "\n")


def read_error(partition_dir: Path) -> tuple[int, str] | None:
    try:
        d = json.loads((Path(partition_dir) / ERROR_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    return d["run_ms"], d["error"]


def clear_error(partition_dir: Path) -> None:
    (Path(partition_dir) / ERROR_FILE).unlink(missing_ok=True)
