"""Writing a replacement segment: the common half of cleaning and recompression.

A rewrite reads source segments, turns their batches into new bytes (fewer records, another codec)
and writes them into ``<base>.log.cleaned``; the log's ``replace_segments`` then swaps it in. The
writing may happen in another process (a Spark executor): it needs only the partition directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from ..clock import SYSTEM, Time
from . import files
from .segment import LogSegment, SegmentParams

OutChunk = list[tuple[bytes, int, int]]  # (batch bytes, max timestamp, last offset) per kept batch


def write_cleaned(directory: Path, base_offset: int, params: SegmentParams, chunks: Iterable[OutChunk],
                  last_modified_ms: int, time: Time = SYSTEM) -> tuple[LogSegment, int]:
    """Write ``chunks`` (one append each) into a fresh ``.cleaned`` segment, fsynced, with the given
    mtime; returns (the segment, bytes written). On any error the partial files are removed."""
    for suffix in files.SEGMENT_SUFFIXES:
        files.segment_file(directory, base_offset, suffix, files.CLEANED_SUFFIX).unlink(missing_ok=True)
    dest = LogSegment(directory, base_offset, params, time, temp_suffix=files.CLEANED_SUFFIX)
    written = 0
    try:
        for out in chunks:
            if out:
                data = b"".join(o for o, _, _ in out)
                max_ts, at = max((ts, last) for _, ts, last in out)
                dest.append(out[-1][2], max_ts, at, data)
                written += len(data)
        dest.on_become_inactive()
        dest.flush()
        dest.set_last_modified(last_modified_ms)
        return dest, written
    except BaseException:
        dest.delete_files()
        raise
