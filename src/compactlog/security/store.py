"""One JSON file of security metadata in the data directory, shared by the broker and the command line.

Kafka keeps SCRAM credentials and ACLs in its metadata log, so every broker sees a change made by
``kafka-configs.sh`` or ``kafka-acls.sh`` at once. Here the broker process owns the data directory, but
these two files must still be writable by the CLI while it runs; so:

* writers take an exclusive ``flock`` on ``__security/.lock`` around read-modify-write (the broker
  answering CreateAcls and the CLI adding a user cannot lose each other's change), and replace the
  file with ``files.atomic_write`` (a reader sees the old file or the new one, never half of one);
* readers ``stat`` the file on every use and parse it again only when its identity (inode, size,
  modification time) changed, which costs one system call on the request path.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any, Callable

from ..errors import InvalidConfigError
from ..storage import files


def security_dir(data_dir: str | os.PathLike[str]) -> Path:
    return Path(data_dir) / files.SECURITY_DIR


class JsonFile:
    """A JSON document in ``__security``, cached until the file changes."""

    def __init__(self, data_dir: str | os.PathLike[str], name: str, empty: Callable[[], dict]) -> None:
        self.dir = security_dir(data_dir)
        self.path = self.dir / name
        self.empty = empty
        self._stamp: tuple[int, int, int] | None = None
        self._data: dict = empty()

    def _identity(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_size, st.st_mtime_ns

    def read(self) -> dict:
        """The current document (the cached one unless the file changed since the last read)."""
        stamp = self._identity()
        if stamp != self._stamp:
            self._data = self._parse() if stamp is not None else self.empty()
            self._stamp = stamp
        return self._data

    def _parse(self) -> dict:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return self.empty()
        except (OSError, ValueError) as exc:
            raise InvalidConfigError(f"cannot read {self.path}: {exc}") from None
        if not isinstance(data, dict):
            raise InvalidConfigError(f"{self.path} does not hold a JSON object")
        return data

    def update(self, change: Callable[[dict], Any]) -> Any:
        """Apply ``change`` to a fresh copy of the document under the lock and write it back.

        ``change`` edits the dict in place and returns what the caller wants back; nothing is written
        when it raises.
        """
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)  # salted secrets and ACLs: the owner's only
        fd = os.open(self.dir / files.SECURITY_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            data = self._parse() if self.path.exists() else self.empty()
            result = change(data)
            files.atomic_write(self.path, json.dumps(data, indent=1, sort_keys=True) + "\n")
            os.chmod(self.path, 0o600)
            self._stamp = None  # read again next time, with the new identity
            return result
        finally:
            os.close(fd)
