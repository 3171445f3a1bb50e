"""Where a job's tasks leave their output until the driver takes it: ``<data>/__staging/<job>``.

A job here is work done beside the log that owns the data directory: the Spark jobs (appends stage
batches there, compaction and recompression their rewritten segments) and the in-process
recompression (``compactlog.recompression``). Only the driver, the side that holds the data directory,
creates a job's directory (before the job) and removes it (after it, whatever happened); tasks only
add to it. That split matters when a job fails: Spark kills the other tasks but does not wait for them,
and a Python worker may run on for a moment after its task was killed. A late task then finds no
directory and fails, instead of leaving behind a file nobody would remove, or a ``.cleaned`` segment
beside a log for a later cleaning to trip over.

The directory is on the data directory's file system, so taking a staged segment into its partition
is a rename.

A driver that dies mid-job cannot remove its directory, which may hold a whole job's rewritten
segments. So the compaction and recompression drivers hold an exclusive ``flock`` on a file in it for
the job's life; the kernel releases it when the driver dies, and the next job to begin removes every
directory whose lock it can take. A job running in another process (or this one) holds its lock and
is left alone. Appends cannot take part (see :meth:`JobStaging.begin`).
"""

from __future__ import annotations

import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

from ..errors import InvalidRequestError
from ..storage import files
from ..storage.files import try_lock
from ..storage.topics import require_data_dir

STAGING_DIR = files.STAGING_DIR
DRIVER_LOCK = ".driver"
_held: dict[str, int] = {}  # driver side: the descriptors holding the locks of this process's live jobs


@dataclass(frozen=True)
class JobStaging:
    """One job's staging directory; pickled with the job's tasks."""

    directory: str

    @classmethod
    def begin(cls, data_dir: str | Path, locked: bool = True, group: str | None = None) -> "JobStaging":
        """Driver side, before the job: a fresh directory (a missing data directory is named, not made).

        ``locked=False`` for the data source's writes: Spark calls a Python data source's driver side
        in short-lived Python workers (one creates the writer, another commits), so no process lives as
        long as the job to hold a lock. Their directories carry no lock file, and no sweep touches them.
        ``group`` (unlocked only): the directory goes in ``__staging/<group>``, which the jobs of one
        streaming query share, so that its commit or abort can remove what every writer of a
        micro-batch staged (``JobStaging.group``)."""
        root = require_data_dir(data_dir) / STAGING_DIR
        name = uuid.uuid4().hex
        if group is not None:
            if locked or not group or "/" in group or group.startswith("."):
                raise ValueError(f"a staging group is a plain name of unlocked jobs, not {group!r}")
            name = f"{group}/{name}"
        out = cls(str(root / name))
        if not locked:
            Path(out.directory).mkdir(parents=True)
        else:
            building = root / f".{name}"  # locked before it gets the name a sweeper looks at
            building.mkdir(parents=True)
            fd = try_lock(building / DRIVER_LOCK)
            assert fd is not None, "a new file in a new directory is nobody else's"
            os.rename(building, out.directory)
            _held[out.directory] = fd
        sweep_abandoned(root)
        return out

    def new_file(self, suffix: str) -> Path:
        """Task side: an empty file of its own in the job's directory."""
        path = Path(self.directory) / f"{uuid.uuid4().hex}{suffix}"
        try:
            path.touch(exist_ok=False)
        except FileNotFoundError:
            raise self._gone() from None
        return path

    def new_dir(self) -> Path:
        """Task side: a directory of its own (one per task attempt, so retried or speculative attempts
        never write into each other's files)."""
        path = Path(self.directory) / uuid.uuid4().hex
        try:
            path.mkdir()
        except FileNotFoundError:
            raise self._gone() from None
        return path

    def group(self) -> "JobStaging | None":
        """The directory of the group this job's directory was made in (see ``begin``), or None."""
        parent = Path(self.directory).parent
        return None if parent.name == STAGING_DIR else JobStaging(str(parent))

    def remove(self) -> None:
        """Driver side, after the job: the directory and everything in it, then its lock."""
        _remove_tree(self.directory)
        fd = _held.pop(self.directory, None)
        if fd is not None:
            os.close(fd)

    def _gone(self) -> InvalidRequestError:
        return InvalidRequestError(f"the job was aborted: its staging directory {self.directory} is gone")


def sweep_abandoned(root: Path) -> list[str]:
    """Remove the staging directories under ``root`` whose driver is gone (their lock can be taken);
    returns them. Directories still being set up (their names start with a dot) are left alone."""
    removed = []
    for child in sorted(root.iterdir()) if root.is_dir() else []:
        if str(child) in _held or child.name.startswith(".") or not child.is_dir():
            continue
        try:
            fd = try_lock(child / DRIVER_LOCK, create=False)
        except FileNotFoundError:
            continue  # not a directory of ours
        if fd is None:
            continue  # a live job
        try:
            _remove_tree(str(child))
            removed.append(str(child))
        finally:
            os.close(fd)
    return removed


def _remove_tree(directory: str) -> None:
    """A late task may add a file while the tree goes, so repeat until the directory itself is gone;
    from then on no task can add anything."""
    for _ in range(1000):
        shutil.rmtree(directory, ignore_errors=True)
        if not Path(directory).exists():
            return
    raise InvalidRequestError(f"could not remove the staging directory {directory}")
