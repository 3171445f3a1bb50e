"""The broker's own small files in a data directory, read and replaced durably.

Kafka keeps ``meta.properties`` (the cluster and node ids) in each log directory; compactlog keeps it
there too, and beside it ``producer-id-block``, the end of the last block of producer ids handed out
(Kafka's controller keeps that in its metadata log). What they hold is the broker's business; how they
are named, read and written (beside, fsync'd, renamed over, the folder fsync'd) is the storage's, whose
``files`` module is the one home of file names. The broker reaches them here rather than under the API.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import KafkaStorageError
from .storage import files

META_PROPERTIES = files.META_PROPERTIES
PRODUCER_ID_BLOCK = files.PRODUCER_ID_BLOCK
BROKER_FILES = (META_PROPERTIES, PRODUCER_ID_BLOCK)


def path_of(data_dir: str | os.PathLike[str], name: str) -> Path:
    """Where one of the broker's files lives in ``data_dir``."""
    if name not in BROKER_FILES:
        raise ValueError(f"{name!r} is not one of the broker's files ({', '.join(BROKER_FILES)})")
    return Path(data_dir) / name


def read_text(data_dir: str | os.PathLike[str], name: str, encoding: str = "utf-8") -> str | None:
    """The file's text, None when there is none; ``KafkaStorageError`` naming it when it cannot be read."""
    path = path_of(data_dir, name)
    try:
        return path.read_text(encoding=encoding)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise KafkaStorageError(f"cannot read {path}: {exc.strerror or exc}") from None


def write_text(data_dir: str | os.PathLike[str], name: str, text: str) -> None:
    """Replace the file with ``text`` so that a crash leaves the old text or the new, never part of one."""
    files.atomic_write(path_of(data_dir, name), text)


__all__ = ["BROKER_FILES", "META_PROPERTIES", "PRODUCER_ID_BLOCK", "path_of", "read_text", "write_text"]
