"""Where a Spark job's tasks leave their output until the driver takes it: ``<data>/__staging/<job>``.

Appends stage batches there, compaction and recompression their rewritten segments. Only the driver
creates a job's directory (before the job) and removes it (after it, whatever happened); tasks only
add to it. That split matters when a job fails: Spark kills the other tasks but does not wait for them,
and a Python worker may run on for a moment after its task was killed. A late task then finds no
directory and fails, instead of leaving behind a file nobody would remove, or a ``.cleaned`` segment
beside a log for a later cleaning to trip over.

The directory is on the data directory's file system, so taking a staged segment into its partition
is a rename.
"""

from __future__ import annotations

import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

from ..errors import InvalidRequestError
from ..storage.manager import require_data_dir

STAGING_DIR = "__staging"


@dataclass(frozen=True)
class JobStaging:
    """One job's staging directory; pickled with the job's tasks."""

    directory: str

    @classmethod
    def begin(cls, data_dir: str | Path) -> "JobStaging":
        """Driver side, before the job: a fresh directory (a missing data directory is named, not made)."""
        out = cls(str(require_data_dir(data_dir) / STAGING_DIR / uuid.uuid4().hex))
        Path(out.directory).mkdir(parents=True)
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

    def remove(self) -> None:
        """Driver side, after the job. A late task may add a file while the tree goes, so repeat until
        the directory itself is gone; from then on no task can add anything."""
        for _ in range(1000):
            shutil.rmtree(self.directory, ignore_errors=True)
            if not Path(self.directory).exists():
                return
        raise InvalidRequestError(f"could not remove the staging directory {self.directory}")

    def clear(self) -> None:
        """Driver side, between the micro-batches of a streaming query: empty, but still there for the
        next micro-batch's tasks (no task of the query runs meanwhile)."""
        self.remove()
        Path(self.directory).mkdir(parents=True)

    def _gone(self) -> InvalidRequestError:
        return InvalidRequestError(f"the job was aborted: its staging directory {self.directory} is gone")
