"""The data directory (Kafka's log directory) as a place on disk, for commands that handle paths near
one without opening it: which paths are part of its storage, and whether it holds a topic's metadata.
The names of its files live in ``storage.files``; these questions are answered from there.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .storage import files


def holds_topic(data_dir: str | os.PathLike[str], topic: str) -> bool:
    """Whether ``data_dir`` holds metadata of a topic named ``topic`` (read without its lock; a missing
    directory holds none)."""
    return files.topic_file(Path(data_dir), topic).exists()


def overwrites_data_dir(output: str | os.PathLike[str], data_dir: str | os.PathLike[str]) -> bool:
    """Whether replacing ``output`` would remove the data directory or part of its storage: the directory
    itself, one above it, or its topic metadata, partition directories and files (a new directory inside
    it, such as ``data/exports``, is fine)."""
    out, data = Path(output).resolve(), Path(data_dir).resolve()
    if out == data or data.is_relative_to(out):
        return True
    if not out.is_relative_to(data):
        return False
    top = data / out.relative_to(data).parts[0]
    partition_like = re.fullmatch(r".+-[0-9]+(\..+)?", top.name) is not None
    return top.name == files.TOPICS_DIR or top.is_file() or (top.is_dir() and (partition_like or any(top.glob("*.log"))))
