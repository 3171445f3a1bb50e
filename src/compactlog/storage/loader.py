"""Opening a partition directory after a clean or unclean shutdown (Kafka's LogLoader).

The passes, in order:

1. Temp files: delete ``*.deleted``; delete every ``.swap`` at or above the smallest ``.cleaned`` base
   offset (that swap belongs to an operation that never finished writing); delete every ``.cleaned``.
2. Finish interrupted swaps: for each ``.log.swap`` find the offset range it covers and delete the
   ordinary segment files in that range (they were being replaced).
3. Drop the ``.swap`` suffix from what is left.
4. Load every ``.log`` as a segment; index files without a log are deleted; a segment with a missing or
   insane offset index, or a damaged ``.txnindex``, is recovered at once.
5. Unless the shutdown was clean, recover every segment from the one holding the recovery point: CRC
   and offset checks on each batch, indexes rebuilt. After a clean shutdown, check the active
   segment's tail anyway (from its last index entry) and recover it if anything is off.
6. Check that offsets follow from segment to segment, and hold the checkpoints against the log.

Recovering a segment empties its ``.txnindex``; the segments recovered that hold control batches are
listed (``txn_rebuild``) for the log to write their entries again from the markers and the producer
state (Kafka rebuilds them within segment recovery; ``producer_recovery.rebuild_txn_indexes``).

Where we differ from Kafka, and why (docs/differences.md): only a torn tail of the last segment is
cut; damage anywhere else is kept in place and reported, because Kafka's rule (truncate at the first
bad batch and delete every later segment) drops sound data silently. A log start offset checkpoint
beyond the log end, like a recovery point or cleaner checkpoint beyond it, means data is gone (a
segment or the partition's folder deleted by hand, a file truncated): the log goes on from there, so
no offset is handed out twice (Kafka deletes every segment and starts again at the checkpoint's offset,
or at 0).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..clock import Time
from ..records.batch import BatchInfo, build_batch
from . import files
from .integrity import MAX_RELATIVE_OFFSET, Bounds, Damage
from .segment import LogSegment, SegmentParams
from .transactions import check_index_entries

log = logging.getLogger(__name__)


@dataclass
class LoadedLog:
    segments: list[LogSegment]
    next_offset: int
    recovery_point: int
    log_start_offset: int
    truncated_bytes: int
    damage: list[Damage] = field(default_factory=list)
    gaps_below: int = 0  # offsets may be missing (cleaned away) only below this
    txn_rebuild: list[int] = field(default_factory=list)  # bases of recovered segments holding markers


def cover(seg: LogSegment, lo: int, hi: int) -> bool:
    """Append to ``seg`` an empty batch holding offsets [lo, hi): the records there are lost, and the
    offsets stay taken, so no offset is handed out twice and the log has no gap (the cleaner keeps the
    same kind of batch to keep an offset range). False when the range does not fit the segment."""
    if lo >= hi or hi - 1 - seg.base_offset > MAX_RELATIVE_OFFSET or lo < seg.base_offset:
        return False
    seg.append(hi - 1, -1, hi - 1, build_batch([], [], info=BatchInfo(base_offset=lo), last_offset_delta=hi - lo - 1))
    return True


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


def _lookups(opened: list[LogSegment], seg: LogSegment):
    """``find`` and ``walk`` for :func:`check_index_entries` over ``seg`` and the segments opened before
    it (in order). Searched from ``seg`` back: an aborted transaction starts in its marker's segment or
    one shortly before it."""
    def holding(offset: int) -> int:
        """The index in ``opened + [seg]`` of the segment that would hold ``offset`` (-1: none)."""
        if seg.base_offset <= offset:
            return len(opened)
        for i in range(len(opened) - 1, -1, -1):
            if opened[i].base_offset <= offset:
                return i
        return -1

    def at(i: int) -> LogSegment:
        return seg if i == len(opened) else opened[i]

    def find(offset: int):
        i = holding(offset)
        found = at(i).translate_offset(offset) if i >= 0 else None
        return found[1] if found else None

    def walk(start: int, end: int):
        i = max(holding(start), 0)
        for j in range(i, len(opened) + 1):
            s = at(j)
            found = s.translate_offset(start) if s.base_offset <= start else (0, None)
            if found is None:
                continue
            for _, batch in s.batches(found[0]):
                if batch.base_offset >= end:
                    return
                yield batch
    return find, walk


def load_log(
    directory: Path,
    params: SegmentParams,
    time: Time,
    recovery_point: int,
    log_start_offset: int,
    clean_shutdown: bool,
    gaps_allowed_below: int | None = 0,
    full_recovery: bool = False,
    used_below: int = 0,
) -> LoadedLog:
    """Open every segment of ``directory`` and recover what an unclean shutdown may have torn.

    ``gaps_allowed_below``: the cleaner's checkpoint. Offsets may be missing between batches and
    segments only below it (cleaning removed them); a gap above it means a segment went missing. None
    (a compacted log whose checkpoint is unknown): below the active segment, which no cleaning touches.
    ``full_recovery``: recover every segment, whatever the shutdown was.
    ``used_below``: offsets below it were handed out (other evidence than the recovery point and the
    log start offset, such as the cleaner's checkpoint): a log that ends before it goes on from it.
    """
    name = directory.name
    clean_temp_files(directory)
    names = sorted(n for n in os.listdir(directory) if files.is_segment_file(n))
    logs = {files.base_offset_of(n) for n in names if n.endswith(files.LOG_SUFFIX)}
    for n in names:  # only index files: Kafka keeps others here (producer-state .snapshot files)
        if n.endswith(files.INDEX_SUFFIXES) and files.base_offset_of(n) not in logs:
            log.info("deleting orphan index file %s", n)
            (directory / n).unlink()
    if gaps_allowed_below is None:
        gaps_allowed_below = max(logs, default=0)
    segments: list[LogSegment] = []
    damage: list[Damage] = []
    rebuild: set[int] = set()
    for base in sorted(logs):
        # Either index missing: rebuilt from the log. Kafka rebuilds a missing .index but opens a missing
        # .timeindex empty, and a segment with no time index seems to hold no timestamp: seeks by time skip it.
        index_missing = not all(files.segment_file(directory, base, suffix).exists()
                                for suffix in (files.INDEX_SUFFIX, files.TIME_INDEX_SUFFIX))
        seg = LogSegment(directory, base, params, time)
        if index_missing or seg.needs_recovery:
            rec = seg.recover(base, cut_tail=False, gaps_below=gaps_allowed_below)
            damage += rec.damage
        else:
            try:
                seg.offset_index.sanity_check(seg.size)
                seg.time_index.sanity_check()
                if files.segment_file(directory, base, files.TXN_INDEX_SUFFIX).exists():
                    seg.txn_index.sanity_check()
                    check_index_entries(seg.txn_index.all_aborted_txns(), *_lookups(segments, seg))
                rec = None
            except Exception:
                log.warning("rebuilding the indexes of %s: they do not match the log", seg.file_name)
                rec = seg.recover(base, cut_tail=False, gaps_below=gaps_allowed_below)
                damage += rec.damage
        if rec is not None and rec.markers:
            rebuild.add(base)
        segments.append(seg)

    for i, seg in enumerate(segments):  # what recovery's walks hold each batch against, as the log's readers do
        seg.bounds = Bounds(segments[i + 1].base_offset if i + 1 < len(segments) else None, gaps_allowed_below, False)
    truncated = 0
    if segments:
        if full_recovery:
            first = 0
        elif clean_shutdown:
            first = len(segments) - 1 if not segments[-1].tail_is_sound(gaps_allowed_below) else len(segments)
            if first < len(segments):
                log.warning("the tail of %s does not check out after a clean shutdown: recovering it", segments[-1].file_name)
        else:
            first = max((i for i, seg in enumerate(segments) if seg.base_offset <= recovery_point), default=0)
        expected = None
        for i in range(first, len(segments)):
            seg = segments[i]
            rec = seg.recover(seg.base_offset if expected is None else max(expected, seg.base_offset),
                              cut_tail=i == len(segments) - 1, gaps_below=gaps_allowed_below,
                              flushed_below=recovery_point)
            damage = [d for d in damage if not d.file == seg.file_name] + rec.damage
            if rec.markers:
                rebuild.add(seg.base_offset)
            truncated += rec.truncated
            if rec.truncated:
                log.warning("truncated %d bytes of a torn or corrupt tail in %s", rec.truncated, seg.file_name)
            expected = rec.next_offset
    for d in damage:
        if not (d.tail and segments and d.file == segments[-1].file_name and d.position >= segments[-1].size):
            log.warning("%s: corrupt data kept in place (reads of it fail; see compactlog verify): %s", name, d)

    ends = [seg.read_next_offset() for seg in segments]
    for prev, prev_end, seg in zip(segments, ends, segments[1:]):
        if seg.base_offset < prev_end:
            damage.append(Damage(seg.file_name, 0, f"segment base offset {seg.base_offset} overlaps the previous "
                                                   f"segment, which ends at offset {prev_end - 1}", False))
            log.warning("%s: %s", name, damage[-1])
        elif seg.base_offset > prev_end and seg.base_offset > gaps_allowed_below:
            if full_recovery and cover(prev, prev_end, seg.base_offset):
                log.warning("%s: offsets %d..%d are missing between segments (a segment file was removed?); an empty "
                            "batch now holds them", name, prev_end, seg.base_offset - 1)
            elif not full_recovery:
                log.warning("%s: offsets %d..%d are missing between segments (a segment file was removed?)", name,
                            prev_end, seg.base_offset - 1)

    next_offset = ends[-1] if segments else log_start_offset
    used = max(recovery_point, log_start_offset, used_below)
    if log_start_offset > next_offset:  # not obeyed (it would hide the records there), but evidence of offsets used
        log.warning("%s: ignoring the log-start-offset-checkpoint entry %d, beyond the log end offset %d",
                    name, log_start_offset, next_offset)
        log_start_offset = segments[0].base_offset if segments else 0
    if used > next_offset:
        log.warning("%s: offsets %d..%d were used (the recovery-point, log-start or cleaner checkpoint says so) but "
                    "are missing from the log (a segment or the partition's folder removed?); going on at offset %d "
                    "so that no offset is handed out twice", name, next_offset, used - 1, used)
        kept_tail = segments and any(d.tail and d.file == segments[-1].file_name and d.position < segments[-1].size
                                     for d in damage)
        # An empty batch after damage kept at the end would let readers step over it: appends just go on
        # after it, from ``used``, and a read of the offsets in between meets the damage.
        if not kept_tail and not (segments and cover(segments[-1], next_offset, used)):
            if segments and segments[-1].size == 0:
                segments.pop().delete_files()
            segments.append(LogSegment(directory, used, params, time))
        next_offset = used
    if not segments:
        segments = [LogSegment(directory, log_start_offset, params, time)]
        next_offset = log_start_offset
    start = max(log_start_offset, segments[0].base_offset)
    rp = next_offset if clean_shutdown else min(recovery_point, next_offset)
    for seg in segments[:-1]:  # recovery emptied some .txnindex files: what was written is made durable
        seg.release_txn_index()
    live = {seg.base_offset for seg in segments}
    return LoadedLog(segments, next_offset, rp, start, truncated, damage, gaps_allowed_below, sorted(rebuild & live))
