"""Opening a partition directory after a clean or unclean shutdown (Kafka's LogLoader).

The passes, in order:

1. Temp files: delete ``*.deleted``; delete every ``.swap`` at or above the smallest ``.cleaned`` base
   offset (that swap belongs to an operation that never finished writing); delete every ``.cleaned``.
2. Finish interrupted swaps: for each ``.log.swap`` find the offset range it covers and delete the
   ordinary segment files in that range (they were being replaced).
3. Drop the ``.swap`` suffix from what is left.
4. Load every ``.log`` as a segment; index files without a log are deleted; a segment with a missing or
   insane offset index is recovered at once.
5. Unless the shutdown was clean, recover every segment from the one holding the recovery point: CRC
   check each batch, rebuild its indexes, truncate at the first bad or partial batch and delete all
   later segments.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from ..clock import Time
from . import files
from .segment import LogSegment, SegmentParams

log = logging.getLogger(__name__)


@dataclass
class LoadedLog:
    segments: list[LogSegment]
    next_offset: int
    recovery_point: int
    log_start_offset: int
    truncated_bytes: int


def _temp_suffix(name: str) -> str:
    for s in (files.CLEANED_SUFFIX, files.SWAP_SUFFIX, files.DELETED_SUFFIX):
        if name.endswith(s):
            return s
    return ""


def _strip(name: str, suffix: str) -> str:
    return name[: -len(suffix)] if suffix else name


def clean_temp_files(directory: Path) -> None:
    """Passes 1-3: leave only ordinary segment files, finishing or undoing interrupted swaps."""
    names = [n for n in os.listdir(directory) if files.is_segment_file(n)]
    cleaned = [n for n in names if n.endswith(files.CLEANED_SUFFIX)]
    swaps = [n for n in names if n.endswith(files.SWAP_SUFFIX)]
    min_cleaned = min((files.base_offset_of(n) for n in cleaned), default=None)
    for n in names:
        if n.endswith(files.DELETED_SUFFIX):
            (directory / n).unlink(missing_ok=True)
    kept_swaps = []
    for n in swaps:
        if min_cleaned is not None and files.base_offset_of(n) >= min_cleaned:
            (directory / n).unlink(missing_ok=True)
        else:
            kept_swaps.append(n)
    for n in cleaned:
        (directory / n).unlink(missing_ok=True)

    swap_logs = [n for n in kept_swaps if _strip(n, files.SWAP_SUFFIX).endswith(files.LOG_SUFFIX)]
    if swap_logs:
        ranges = []
        for n in swap_logs:
            seg = LogSegment(directory, files.base_offset_of(n), temp_suffix=files.SWAP_SUFFIX)
            ranges.append((seg.base_offset, seg.read_next_offset()))
            seg.close_handlers()
        lo, hi = min(r[0] for r in ranges), max(r[1] for r in ranges)
        for n in os.listdir(directory):
            if files.is_segment_file(n) and not _temp_suffix(n) and lo <= files.base_offset_of(n) < hi:
                log.info("removing %s, replaced by an interrupted swap", n)
                (directory / n).unlink()
    for n in kept_swaps:
        os.replace(directory / n, directory / _strip(n, files.SWAP_SUFFIX))
    files.fsync_dir(directory)


def load_log(
    directory: Path,
    params: SegmentParams,
    time: Time,
    recovery_point: int,
    log_start_offset: int,
    clean_shutdown: bool,
) -> LoadedLog:
    """Open every segment of ``directory`` and recover what an unclean shutdown may have torn."""
    clean_temp_files(directory)
    names = sorted(n for n in os.listdir(directory) if files.is_segment_file(n))
    logs = {files.base_offset_of(n) for n in names if n.endswith(files.LOG_SUFFIX)}
    for n in names:
        if not n.endswith(files.LOG_SUFFIX) and files.base_offset_of(n) not in logs:
            log.info("deleting orphan index file %s", n)
            (directory / n).unlink()
    segments: list[LogSegment] = []
    for base in sorted(logs):
        index_missing = not files.segment_file(directory, base, files.INDEX_SUFFIX).exists()
        seg = LogSegment(directory, base, params, time)
        if index_missing or seg.needs_recovery:
            seg.recover()
        else:
            try:
                seg.offset_index.sanity_check(seg.size)
                seg.time_index.sanity_check()
            except Exception:
                seg.recover()
        segments.append(seg)

    truncated = 0
    if not clean_shutdown and segments:
        start = 0
        for i, seg in enumerate(segments):
            if seg.base_offset <= recovery_point:
                start = i
        i = start
        while i < len(segments):
            seg = segments[i]
            cut = seg.recover()
            truncated += cut
            if cut:
                log.warning("truncated %d bytes of a torn or corrupt tail in %s", cut, seg.log_path)
                for later in segments[i + 1 :]:
                    truncated += later.size
                    later.delete_files()
                del segments[i + 1 :]
            i += 1

    next_offset = segments[-1].read_next_offset() if segments else log_start_offset
    if segments and next_offset < log_start_offset:
        for seg in segments:
            seg.delete_files()
        segments = []
        next_offset = log_start_offset
    if not segments:
        segments = [LogSegment(directory, log_start_offset, params, time)]
        next_offset = log_start_offset
    start = max(log_start_offset, segments[0].base_offset)
    rp = next_offset if clean_shutdown else min(recovery_point, next_offset)
    return LoadedLog(segments, next_offset, rp, start, truncated)
