"""Producer state across restarts: which ``.snapshot`` files a partition keeps, which one is loaded and
what is replayed after it (Kafka's ProducerStateManager and UnifiedLog.rebuildProducerState).

Who uses it: the log (``log.py``), and read-only the snapshot of another process's partition
(``snapshot.py``: its LSO and open transactions). A snapshot named O holds the producers' state after
every batch below offset O, their open transactions included; replaying the batches after it reopens
and completes transactions as their batches and markers come (``transactions.apply_stored``). The log writes one as a segment rolls (O = the new segment's base, the state's end) and at a
clean close (O = the log end), once idempotent producers were seen (the state was loaded, or snapshots
are there): a partition never written by one keeps no snapshot and pays no read.

When the state is first needed after a start, the newest snapshot at or below the log end that reads
back whole is loaded and only the batches from O on are replayed; producers expired by then
(``producer.id.expiration.ms``, see ``producer_state.py``) are dropped. A damaged one is logged with its file
and skipped for the next older one (left in place as evidence, where Kafka deletes it; the next roll or
close writes a newer one). With none usable the state is rebuilt from the last two segments, as before
snapshots existed.

Which snapshots stay (Kafka's rules): at open, those above the log end (recovery cut the log below
them) and below the log start go, and so does every one not at a segment's base offset except the
newest (the one a clean close wrote); a truncation removes those above the new end; deleting segments
removes those below the new log start. Temporary files of a write a crash interrupted
(``<name>.snapshot.tmp``) are removed at open: the write is atomic, so the old file is still whole.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Iterable, Sequence

from ..errors import CorruptRecordError
from . import files
from .producer_snapshot import (
    CorruptSnapshotError,
    entries_from_state,
    read_snapshot,
    state_from_entries,
    write_snapshot,
)
from .producer_state import EXPIRATION_MS, ProducerStateManager
from .reader import Listing, fixed
from .segment import LogSegment
from .transactions import aborted_entry, apply_stored

log = logging.getLogger(__name__)

TEMP_SUFFIX = files.PRODUCER_SNAPSHOT_SUFFIX + ".tmp"  # what write_snapshot renames into place


def snapshot_offsets(directory: Path, names: Iterable[str] | None = None) -> list[int]:
    """The offsets of the ``.snapshot`` files in ``directory`` (or among ``names``, its listing), oldest first."""
    return sorted(files.base_offset_of(n) for n in (os.listdir(directory) if names is None else names)
                  if files.is_segment_file(n) and n.endswith(files.PRODUCER_SNAPSHOT_SUFFIX)
                  and n.count(".") == 1)


def delete_snapshot(directory: Path, offset: int, why: str) -> None:
    log.info("deleting producer snapshot %s of %s (%s)", offset, directory.name, why)
    files.producer_snapshot_file(directory, offset).unlink(missing_ok=True)


def delete_snapshots_outside(directory: Path, low: int, high: int, why: str,
                             names: Iterable[str] | None = None) -> list[int]:
    """Delete the snapshots below ``low`` or above ``high``; the offsets of those left, oldest first
    (``names``: the directory's listing, when the caller has it)."""
    kept = []
    for offset in snapshot_offsets(directory, names):
        if offset < low or offset > high:
            delete_snapshot(directory, offset, why)
        else:
            kept.append(offset)
    return kept


def tidy_at_open(directory: Path, segment_bases: Iterable[int], log_start: int, log_end: int) -> bool:
    """Remove torn writes' temporary files and the snapshots Kafka would not keep (see the module);
    whether any snapshot is left."""
    names = os.listdir(directory)  # one listing: only this process writes snapshots here
    for n in names:
        if files.is_segment_file(n) and n.endswith(TEMP_SUFFIX):
            log.warning("removing %s/%s, left by a producer snapshot write that did not finish", directory.name, n)
            (directory / n).unlink(missing_ok=True)
    kept = delete_snapshots_outside(directory, log_start, log_end, "outside the log's offsets", names)
    bases = set(segment_bases)
    for offset in kept[:-1]:
        if offset not in bases:
            delete_snapshot(directory, offset, "not at a segment's base offset")
    return bool(kept)


def take_snapshot(directory: Path, state: ProducerStateManager, offset: int, sync_dir: bool = True) -> None:
    """Write the state as of ``offset`` (every batch below it counted) to ``<offset>.snapshot``;
    ``sync_dir=False`` when the caller fsyncs the directory itself right after."""
    write_snapshot(files.producer_snapshot_file(directory, offset), entries_from_state(state), sync_dir)


def _walk(seg: LogSegment, position: int):
    """The segment's batches from ``position``; past damage kept in place (recovery keeps it, readers meet
    it), the sound batches after it, found by the recovery's own walk (``audit``), so that one damaged
    batch does not stop a rebuild of the producer state or of the ``.txnindex``."""
    # Where the next batch must start, by which the audit judges what follows damage: a segment's first
    # batch starts at its base offset (recovery holds it to that too), later ones after the last handed out.
    # Unknown, a batch whose base offset was flipped up would pass, and the sound batch after it fail.
    expected = seg.base_offset if position == 0 else None
    try:
        for p, b in seg.batches(position):
            expected = b.next_offset
            yield p, b
        return
    except CorruptRecordError as exc:
        resume = getattr(exc, "position", None)
        if resume is None:
            raise
        log.warning("replaying the producer state of %s around damage: %s", seg.file_name, exc)
    for p, b, damage in seg.audit(resume, expected, seg.bounds.gaps_below):
        if damage is None and b is not None:
            yield p, b


def _replay(state: ProducerStateManager, listing: Listing, start: int, end: int,
            index: set[int] | None = None) -> None:
    """Record the producers' batches holding offsets in [start, end), markers included; a batch failing
    its CRC is left out. ``index``: the base offsets of the segments whose ``.txnindex`` is being
    rebuilt, which get an entry for each aborted transaction whose marker they hold."""
    if start >= end:
        return  # nothing to replay: the walk to ``start`` could only meet damage at the log's end
    bases, segment_at = listing
    for i, base in enumerate(bases):
        following = bases[i + 1] if i + 1 < len(bases) else None
        if following is not None and following <= start:
            continue
        if base >= end:
            return
        seg = segment_at(i)
        position = 0
        if seg.base_offset < start:
            try:
                found = seg.translate_offset(start)
            except CorruptRecordError:  # damage before ``start``'s batch: walk the whole segment past it
                found = (0, None)
            if found is None:
                continue
            position = found[0]
        for _pos, b in _walk(seg, position):
            if b.base_offset >= end:
                return
            state.batches_replayed += 1
            if b.last_offset >= start and b.producer_id >= 0 and b.is_valid():
                entry = aborted_entry(apply_stored(state, b))
                if entry is not None and index is not None and seg.base_offset in index:
                    seg.txn_index.append(entry)


def replay(state: ProducerStateManager, listing: Listing, start: int, end: int) -> None:
    """Bring ``state``, the producers' state at ``start``, to ``end``: the batches in between recorded."""
    _replay(state, listing, start, end)


def load_state(directory: Path, segments: Sequence[LogSegment] | Listing, log_end: int,
               expiration_ms: int = EXPIRATION_MS, now: int | None = None, tail: int | None = 2) -> ProducerStateManager:
    """The producer state at ``log_end``: the newest good snapshot at or below it and the batches after
    it, or, with none usable, the batches of the last ``tail`` segments below ``log_end`` (None: all),
    without the producers expired at ``now`` (ms; None keeps all). The state comes back ``loaded``.
    ``segments``: the log's segments, or a listing (``reader.Listing``) that opens them as reached.

    Kafka drops the expired entries of the snapshot as it reads it and leaves those of the replayed
    batches to its next periodic check; dropping both here gives the state that check would leave."""
    listing: Listing = segments if len(segments) == 2 and callable(segments[1]) else fixed(segments)  # type: ignore[arg-type]
    for offset in reversed(snapshot_offsets(directory)):
        if offset > log_end:
            continue
        path = files.producer_snapshot_file(directory, offset)
        try:
            state = state_from_entries(read_snapshot(path), expiration_ms)
        except (CorruptSnapshotError, OSError) as exc:
            log.warning("ignoring producer snapshot %s: %s", path, exc)  # kept as evidence; a newer one follows
            continue
        state.loaded_from = offset
        _replay(state, listing, offset, log_end)
        break
    else:
        state = ProducerStateManager(expiration_ms)
        below = [b for b in listing[0] if b <= log_end]
        first = below[max(len(below) - tail, 0) if tail else 0] if below else 0
        _replay(state, listing, first, log_end)
    expired = state.remove_expired(now) if now is not None else 0
    log.info("loaded the producer state of %s (%d producers, %d expired ones dropped) from %s and %d batches after "
             "it", directory.name, len(state.producers), expired,
             "no snapshot" if state.loaded_from is None else f"snapshot {state.loaded_from}", state.batches_replayed)
    state.loaded = True
    return state


def rebuild_txn_indexes(directory: Path, segments: Sequence[LogSegment], bases: Sequence[int], log_end: int,
                        expiration_ms: int = EXPIRATION_MS, now: int | None = None) -> ProducerStateManager:
    """Write again the ``.txnindex`` entries of the segments at ``bases`` (recovery emptied them): the
    producer state at the first of them (its snapshot, or the log from its start when none is usable, as
    Kafka's recovery replays it), then every batch from there to ``log_end``, each ABORT marker that
    completes a transaction in one of those segments adding its entry. Returns the state at ``log_end``,
    ``loaded`` (the log keeps it)."""
    first = min(bases)
    listing = fixed(segments)
    state = load_state(directory, listing, first, expiration_ms, None, tail=None)
    state.loaded = False
    _replay(state, listing, first, log_end, set(bases))
    for seg in segments:
        if seg.base_offset in bases or seg is segments[-1]:
            seg.txn_index.flush()
        if seg is not segments[-1]:  # (recovery opened them all; reads open them as needed)
            seg.release_txn_index()
    expired = state.remove_expired(now) if now is not None else 0
    log.info("rebuilt the transaction indexes of %d segments of %s from offset %d (%d producers, %d expired)",
             len(bases), directory.name, first, len(state.producers), expired)
    state.loaded = True
    return state
