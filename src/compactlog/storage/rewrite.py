"""Writing a replacement segment: the common half of cleaning and recompression.

A rewrite reads source segments, turns their batches into new bytes (fewer records, another codec)
and writes them into ``<base>.log.cleaned``; the log's ``replace_segments`` then swaps it in. The
writing may happen in another process (a Spark executor) and in another directory of the same file
system, from which :func:`move_cleaned` brings the segment beside its log.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Iterable

from ..clock import SYSTEM, Time
from . import files
from .segment import LogSegment, SegmentParams
from .transaction_index import AbortedTxn

OutChunk = list[tuple[bytes, int, int]]  # (batch bytes, max timestamp, last offset) per kept batch


def write_cleaned(directory: Path, base_offset: int, params: SegmentParams, chunks: Iterable[OutChunk],
                  last_modified_ms: int, time: Time = SYSTEM,
                  txn_entries: Callable[[], Iterable[AbortedTxn]] | None = None) -> tuple[LogSegment, int]:
    """Write ``chunks`` (one append each) into a fresh ``.cleaned`` segment, fsynced, with the given
    mtime; returns (the segment, bytes written). On any error the partial files are removed.

    ``txn_entries``, asked once every chunk is written, gives the aborted transactions whose ABORT
    markers the new segment keeps: they go into its ``.txnindex.cleaned``, which the swap renames
    with the rest."""
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
        for txn in txn_entries() if txn_entries is not None else ():
            dest.txn_index.append(txn)
        dest.on_become_inactive()
        dest.flush()
        dest.set_last_modified(last_modified_ms)
        return dest, written
    except BaseException:
        dest.delete_files()
        raise


def move_cleaned(source_dir: Path, log_dir: Path, base_offset: int) -> None:
    """Move a cleaned segment written in ``source_dir`` into ``log_dir``, still ``.cleaned`` (so a crash
    from here on leaves only files that recovery removes); one file system, so each move is a rename."""
    for suffix in files.SEGMENT_SUFFIXES:
        src = files.segment_file(source_dir, base_offset, suffix, files.CLEANED_SUFFIX)
        if src.exists():
            os.replace(src, files.segment_file(log_dir, base_offset, suffix, files.CLEANED_SUFFIX))
