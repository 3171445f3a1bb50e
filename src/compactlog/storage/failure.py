"""Taking a data directory offline after an I/O error (Kafka's LogDirFailureChannel).

When a write to a log directory fails (a full disk, a file-size limit, an I/O error), Kafka takes the
directory offline: it accepts no more writes until the broker restarts and recovery has run. We do the
same per data directory: the failed write is rolled back to the last complete batch, the first error
is remembered, every later write is refused with a ``KafkaStorageError`` that names it, and closing
does not write the clean-shutdown marker, so the next open checks the logs. Reads go on: what is
stored was stored whole.
"""

from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from typing import Iterator

from ..errors import KafkaStorageError

log = logging.getLogger(__name__)


def describe(exc: OSError) -> str:
    """An OS error as a person reads it: its message and the file it names."""
    what = exc.strerror or str(exc)
    return f"{what}: {exc.filename}" if exc.filename else what


class LogDirFailure:
    """The offline state of one data directory; shared by every Log in it."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = str(directory)
        self.error: str | None = None

    @property
    def offline(self) -> bool:
        return self.error is not None

    def check(self) -> None:
        """Refuse a write while the directory is offline."""
        if self.error is not None:
            raise KafkaStorageError(
                f"The data directory {self.directory} is offline after an I/O error ({self.error}); "
                f"nothing more is written to it until it is closed and opened again"
            )

    def fail(self, exc: OSError, doing: str) -> KafkaStorageError:
        """Take the directory offline (the first error is the one remembered) and return the error to raise."""
        reason = f"{doing}: {describe(exc)}"
        if self.error is None:
            self.error = reason
            log.error("data directory %s is offline after an I/O error while %s", self.directory, reason)
        return KafkaStorageError(f"I/O error while {reason}; the data directory {self.directory} is now offline "
                                 f"(nothing more is written until it is reopened)")

    @contextmanager
    def guard(self, doing: str) -> Iterator[None]:
        """Run a write: refused while offline; an OSError takes the directory offline."""
        self.check()
        try:
            yield
        except OSError as exc:
            raise self.fail(exc, doing) from exc
