"""The rewrite rule, in one place: how keys are looked up, which records and batches survive, and the
bytes they are rewritten as. The log cleaner, the Spark compaction job and the Pulsar-style compactor
all go through it, so none of them can drift from the others.

The rules are pure functions of the offset map's answers, the batch, the clock and the topic config;
the local cleaner and the compactor feed them from the in-memory offset map, the Spark job from a
shuffle. Kept records are copied byte for byte around their kept neighbours (a compiled kernel, never a
Python loop per record), under their original offsets.
"""

from __future__ import annotations

from enum import Enum
from typing import Callable, Iterable, Protocol

import numpy as np

from ..records import kernels
from ..records.batch import (
    COMPRESSION_MASK,
    DELETE_HORIZON_BIT,
    HEADER,
    INT64_MAX,
    INT64_MIN,
    LOG_APPEND_TIME,
    MAGIC,
    BatchInfo,
    RecordBatch,
    assemble_batch,
    build_empty_batch,
)
from ..records.codecs import Codec, compress
from ..records.columns import Chunk, by_buffer, chunks
from .offset_map import OffsetMap
from .transactions import AbortedRanges, BatchFates, CleanedTransactions

MAP_CHUNK_BYTES = 4 << 20  # batches scanned together while building the map


class BatchDecision(Enum):
    DELETE = "delete"  # drop the whole batch unread
    DELETE_EMPTY = "delete-empty"  # drop the batch if no record survives
    RETAIN_EMPTY = "retain-empty"  # keep at least the 61-byte header even if no record survives


def batch_decision(next_offset: int, upper_bound: int, last_of_producer: bool = False,
                   discard: bool = False) -> BatchDecision:
    """Kafka's batch retention: the batch holding a producer's last sequence (``last_of_producer``, from
    ``transactions.CleanedTransactions``) and the batch that ends exactly at the first uncleanable offset
    (so the log's last cleaned offset stays readable) are kept, empty if need be; a batch whose records
    all go (``discard``: an aborted transaction's, a marker past its horizon) is dropped unread; any
    other is dropped once no record of it survives."""
    if last_of_producer or next_offset == upper_bound:
        return BatchDecision.RETAIN_EMPTY
    if discard:
        return BatchDecision.DELETE
    return BatchDecision.DELETE_EMPTY


def retained(
    offsets: np.ndarray,
    mapped: np.ndarray,
    has_key: np.ndarray,
    is_tombstone: np.ndarray,
    latest_mapped_offset: int,
    delete_horizon: np.ndarray | int | None,
    now: int,
    exact: bool = False,
) -> np.ndarray:
    """Keep mask for one batch's records (Kafka's ``shouldRetainRecord``).

    * beyond the mapped range (``offset > latest_mapped_offset``): kept, keyless or not, untouched;
    * keyless: dropped;
    * otherwise kept iff it is the record the map chose for its key and it is not a tombstone whose
      batch's delete horizon has passed. With Kafka's offset strategy the map holds the highest offset,
      so "chosen" is ``offset >= mapped``; with a versioned strategy (``exact``) the map may choose an
      earlier record, so only ``offset == mapped`` (or an unmapped key) is chosen.

    ``delete_horizon`` is the batch's horizon per record (or one value for all); -1 or None = none yet.
    """
    beyond = offsets > latest_mapped_offset
    h = np.asarray(-1 if delete_horizon is None else delete_horizon)
    horizon_passed = (h >= 0) & (now >= h)
    live = ~is_tombstone | ~horizon_passed
    chosen = ((mapped < 0) | (offsets == mapped)) if exact else (offsets >= mapped)
    return beyond | (has_key & chosen & live)


def record_versions(strategy: str, base_timestamp: int, cols: np.ndarray, data, header_versions) -> np.ndarray | None:
    """The per-record version a ``compaction.strategy`` ranks by (None for Kafka's offset strategy).

    ``timestamp``: the record timestamp; ``header:<name>``: that header's value as a long (KIP-280),
    -1 when missing, so records without it lose to records with it and ties go to the later offset.
    """
    if strategy == "offset":
        return None
    if strategy == "timestamp":
        from ..records.kernels import C_TS_DELTA

        return base_timestamp + cols[:, C_TS_DELTA]
    out = np.empty(len(cols), dtype=np.int64)
    header_versions(data, cols, strategy[len("header:"):].encode(), out)
    return out


class WriteCounts(Protocol):
    """What a rewrite counts as it goes (the cleaner's stats have these two)."""

    messages_written: int
    invalid_messages: int


def map_keys(m: OffsetMap, batches: Iterable[RecordBatch], start: int, strategy: str,
             account: Callable[[list[RecordBatch], Chunk], None] = lambda _g, _c: None,
             aborted: AbortedRanges | None = None) -> bool:
    """Put the keys of ``batches`` (records at or after ``start``) into ``m``; False once it is full.
    Records of the ``aborted`` transactions are not put (they must never shadow committed ones).

    On a full map everything before the stopping batch counts as processed (Kafka's ``latestOffset``),
    so the next round starts there."""
    for group in (run for g in chunks(batches, MAP_CHUNK_BYTES) for run in by_buffer(g)):
        chunk = Chunk.scan(group, verify=True)  # a run of one read buffer: scanned where it lies
        account(group, chunk)
        versions = chunk_versions(strategy, chunk)
        gone = aborted.aborted(group) if aborted else None
        if gone:  # their rows read as keyless, which the map skips (the chunk serves nothing else after)
            chunk.cols[without_batches(chunk, gone), kernels.C_KEY_LEN] = -1
        if not m.put_batch(chunk.data, chunk.cols, 0, start, versions):
            stop = int(np.searchsorted(chunk.rows, m.stopped_row, side="right")) - 1
            done = [b.last_offset for b in group[:stop] if b.last_offset >= start]
            m.latest_offset = max([m.latest_offset, *done[-1:]])
            return False
        lasts = [b.last_offset for b in group if b.last_offset >= start]
        if lasts:
            m.latest_offset = max(m.latest_offset, lasts[-1])
    return True


def lookup(m: OffsetMap, chunk: Chunk, first_dirty: int, strategy: str) -> tuple[np.ndarray, bool]:
    """Each row's mapped offset (-1 when unmapped) and whether only the mapped record itself is chosen
    (a versioned strategy). A record before ``first_dirty`` (kept by an earlier round) that outranks
    every mapped record of its key (a higher version) stays, and the map now points at it."""
    cols = chunk.cols
    mapped, mapped_versions = m.get_batch(chunk.data, cols)
    if mapped_versions is not None and chunk.batches[0].base_offset < first_dirty:
        offsets = cols[:, kernels.C_OFFSET_DELTA]
        versions = chunk_versions(strategy, chunk)
        has_key = cols[:, kernels.C_KEY_LEN] >= 0
        wins = has_key & (mapped >= 0) & (offsets < first_dirty) & (versions > mapped_versions)
        if wins.any():
            rows = np.flatnonzero(wins)
            m.set_rows(chunk.data, cols, rows, offsets[rows], versions[rows])
            mapped[rows] = offsets[rows]
    return mapped, mapped_versions is not None


def chunk_versions(strategy: str, chunk: Chunk) -> np.ndarray | None:
    """Per-row versions for a ``compaction.strategy`` (None for Kafka's offset rule)."""
    if strategy == "offset":
        return None
    if strategy == "timestamp":
        return chunk.timestamps()
    return record_versions(strategy, 0, chunk.cols, chunk.data, kernels.header_versions)


def without_batches(chunk: Chunk, batches: Iterable[int]) -> np.ndarray:
    """The rows of the chunk's batches ``batches`` (indexes into ``chunk.batches``)."""
    rows = chunk.rows
    return np.concatenate([np.arange(rows[i], rows[i + 1]) for i in batches] or [np.empty(0, dtype=np.int64)])


def filter_batches(chunk: Chunk, mapped: np.ndarray, exact: bool, latest_mapped_offset: int, upper_bound: int,
                   now: int, delete_retention_ms: int, stats: WriteCounts | None = None, *,
                   keep_control: bool = True, txn: CleanedTransactions | None = None) -> list[tuple[bytes, int, int]]:
    """The surviving bytes of each batch of a chunk: (bytes, max timestamp, last offset) per kept batch.

    ``mapped`` is the chosen offset of each row's key (-1 when unmapped), wherever it came from: the
    local cleaner's offset map or the Spark job's shuffle. ``txn`` is the round's walk over transactions
    (``transactions.CleanedTransactions``), which the chunk's batches advance: it says which batches lose
    their records, which markers stay and which batches stay even when emptied. Everything after that
    is this one function, so both write the same bytes.
    """
    cols, batches = chunk.cols, chunk.batches
    offsets = cols[:, kernels.C_OFFSET_DELTA]
    has_key = cols[:, kernels.C_KEY_LEN] >= 0
    tomb = cols[:, kernels.C_VAL_LEN] < 0
    found = [b.delete_horizon_ms for b in batches]
    horizons = -1 if found.count(None) == len(found) else chunk.per_row([-1 if h is None else h for h in found])
    keep = retained(offsets, mapped, has_key, tomb, latest_mapped_offset, horizons, now, exact=exact)
    fates = txn.fates(batches, now) if txn is not None else None
    if fates is not None and fates.discard:
        keep[without_batches(chunk, fates.discard)] = False
    return write_survivors(chunk, keep, upper_bound, now + delete_retention_ms, stats, keep_control=keep_control,
                           invalid=int((~has_key & (offsets <= latest_mapped_offset)).sum()), fates=fates)


def write_survivors(chunk: Chunk, keep: np.ndarray, upper_bound: int, new_horizon: int,
                    stats: WriteCounts | None = None, *, keep_control: bool = True,
                    invalid: int = 0, fates: BatchFates | None = None) -> list[tuple[bytes, int, int]]:
    """The bytes of each batch of ``chunk`` holding its ``keep`` rows (Kafka's ``filterTo``): a batch kept
    whole is copied as it is; one that lost records is rebuilt around the rest under the same offsets;
    an emptied one is dropped, or kept as its 61-byte header when it ends at ``upper_bound`` (Kafka keeps
    the last offset of the cleaned range readable). A rebuilt batch keeping a tombstone gains the delete
    horizon ``new_horizon`` (KIP-534) if it has none.

    The bytes are bytes-like (views of the source batches, or of one buffer all the chunk's uncompressed
    rebuilt batches are assembled into by one kernel call); compressed batches are rebuilt one by one.

    ``fates`` (from the round's transaction walk) names the batches kept even when emptied and the
    markers that stay for now but gain the delete horizon ``new_horizon``; without it a control batch
    is copied as it is.

    The Pulsar-style compactor writes its side log through this too, with its own ``keep`` (tombstones
    never kept), no control batch (``keep_control=False``) and no emptied batch (``upper_bound=-1``)."""
    batches = chunk.batches
    tomb = chunk.cols[:, kernels.C_VAL_LEN] < 0
    # running counts of kept rows and kept tombstones, read at the batches' first rows: batch i keeps
    # first[i + 1] - first[i] rows, which are kept_rows[first[i]:first[i + 1]]
    running = np.zeros((2, len(keep) + 1), dtype=np.int64)
    np.cumsum(keep, out=running[0, 1:])
    np.cumsum(keep & tomb, out=running[1, 1:])
    first = running[0, chunk.rows]
    kept_n = np.diff(first)
    kept, kept_tombs, sizes = kept_n.tolist(), np.diff(running[1, chunk.rows]).tolist(), np.diff(chunk.rows).tolist()
    # the first and largest timestamp deltas of each batch's kept rows
    kept_rows = np.flatnonzero(keep)
    deltas = chunk.cols[kept_rows, kernels.C_TS_DELTA]
    some = kept_n > 0
    first_delta, max_delta = np.zeros(len(batches), dtype=np.int64), np.zeros(len(batches), dtype=np.int64)
    if some.any():
        first_delta[some] = deltas[first[:-1][some]]
        max_delta[some] = np.maximum.reduceat(deltas, first[:-1][some])
    first_l, first_delta_l, max_delta_l = first.tolist(), first_delta.tolist(), max_delta.tolist()
    out: list = []
    pending: list[tuple[int, bytes, int, int]] = []  # (place in out, header, shift, max timestamp)

    def assemble_pending() -> None:
        """Build the uncompressed rebuilt batches met so far, in one kernel call."""
        if not pending:
            return
        bounds = np.asarray([(first_l[i], first_l[i + 1]) for i, *_ in pending], dtype=np.int64)
        ends = np.empty(len(pending), dtype=np.int64)
        data = kernels.assemble_batches(chunk.data, chunk.cols, kept_rows, bounds,
                                        np.asarray([shift for _, _, shift, _ in pending], dtype=np.int64),
                                        b"".join(header for _, header, _, _ in pending), ends)
        view, start = memoryview(data), 0
        for (i, _, _, max_ts), end in zip(pending, ends.tolist()):
            out[places[i]] = (view[start:end], max_ts, batches[i].last_offset)
            start = end
        pending.clear()

    places: dict[int, int] = {}
    written = 0
    said = fates if fates is not None else BatchFates()
    discard, retain, mark = said.discard, said.retain_empty, said.mark
    for i, b in enumerate(batches):
        if b.is_control:
            if not keep_control:
                continue
            if fates is None:
                out.append((b.buffer, b.max_timestamp, b.last_offset))
                written += b.record_count
            elif i not in discard and b.record_count:
                marked = i in mark and not b.has_delete_horizon
                out.append((marker_with_horizon(b, new_horizon) if marked else b.buffer, b.max_timestamp, b.last_offset))
                written += b.record_count
            elif batch_decision(b.next_offset, upper_bound, i in retain) is BatchDecision.RETAIN_EMPTY:
                out.append((build_empty_batch(b), b.max_timestamp, b.last_offset))
            continue
        if kept[i] == sizes[i] and sizes[i] and (b.has_delete_horizon or not kept_tombs[i]):
            out.append((b.buffer, b.max_timestamp, b.last_offset))
            written += b.record_count
            continue
        if kept[i] == 0:  # (a batch an earlier round emptied too: it stays only if it must, as in Kafka)
            if batch_decision(b.next_offset, upper_bound, i in retain, i in discard) is BatchDecision.RETAIN_EMPTY:
                out.append((build_empty_batch(b), b.max_timestamp, b.last_offset))
            continue
        gains_horizon = not b.has_delete_horizon and kept_tombs[i]
        horizon = new_horizon if gains_horizon else None
        written += kept[i]
        if not b.attributes & COMPRESSION_MASK:
            facts = rebuilt_header(b, kept[i], first_delta_l[i], max_delta_l[i], horizon)
            if facts is not None:
                places[i] = len(out)
                out.append(None)
                pending.append((i, *facts))
                continue
        assemble_pending()  # (its errors come first, as they would have, batch by batch)
        data = regather(b, chunk, kept_rows[first_l[i] : first_l[i + 1]], horizon)
        out.append((data, RecordBatch(data).max_timestamp, b.last_offset))
    assemble_pending()
    if stats is not None:
        stats.messages_written += written
        stats.invalid_messages += invalid
    return out


def marker_with_horizon(batch: RecordBatch, horizon: int) -> bytes:
    """A control batch rebuilt with the delete horizon ``horizon`` (Kafka stamps a marker it may remove
    once, then removes it when a later round finds the horizon passed): its records as they are, their
    timestamp deltas moved to the horizon as base timestamp, as for a tombstone's batch."""
    data, cols = batch.scan()
    return regather(batch, Chunk([batch], data, cols, np.asarray([0, len(cols)], dtype=np.int64)),
                    np.arange(len(cols), dtype=np.int64), min(horizon, INT64_MAX))  # (past int64: never)


def rebuilt_timestamps(batch: RecordBatch, first_delta: int, max_delta: int,
                       delete_horizon: int | None) -> tuple[int, int, int, int]:
    """(attributes, base timestamp, max timestamp, timestamp shift of the kept records) of a batch rebuilt
    around kept records whose first and largest timestamp deltas are given: the base timestamp becomes
    the first kept record's timestamp, or the delete horizon when the batch has or gains one (KIP-534)."""
    horizon = batch.delete_horizon_ms if delete_horizon is None else delete_horizon
    attrs = batch.attributes & 0xFF
    if horizon is not None:
        base_ts, attrs = horizon, attrs | DELETE_HORIZON_BIT
    else:
        base_ts = batch.base_timestamp + first_delta  # the first kept record's timestamp
    max_ts = batch.max_timestamp if batch.timestamp_type == LOG_APPEND_TIME else batch.base_timestamp + max_delta
    return attrs, base_ts, max_ts, batch.base_timestamp - base_ts


def rebuilt_header(batch: RecordBatch, count: int, first_delta: int, max_delta: int,
                   delete_horizon: int | None) -> tuple[bytes, int, int] | None:
    """(header, timestamp shift, max timestamp) of an uncompressed batch rebuilt around ``count`` kept
    records, packed as ``assemble_batch`` packs it but for batchLength and the CRC, which
    ``kernels.assemble_batches`` fills in; None when a timestamp leaves the int64 range (``regather``
    then fails on it as it always did)."""
    attrs, base_ts, max_ts, shift = rebuilt_timestamps(batch, first_delta, max_delta, delete_horizon)
    if not (INT64_MIN <= base_ts <= INT64_MAX and INT64_MIN <= max_ts <= INT64_MAX and INT64_MIN <= shift <= INT64_MAX):
        return None
    header = HEADER.pack(batch.base_offset, 0, batch.partition_leader_epoch, MAGIC, 0, attrs, batch.last_offset_delta,
                         base_ts, max_ts, batch.producer_id, batch.producer_epoch, batch.base_sequence, count)
    return header, shift, max_ts


def regather(batch: RecordBatch, chunk: Chunk, rows: np.ndarray, delete_horizon: int | None = None) -> bytes:
    """One batch rebuilt around its kept ``rows``, as Kafka's cleaner rebuilds it: the same base offset,
    extent, producer fields, leader epoch and codec (at its default level); the base timestamp becomes
    the first kept record's timestamp, or the delete horizon when the batch has one (KIP-534). Each kept
    record is copied byte for byte, only its timestamp delta moved to the new base, so absolute
    timestamps stay as they were."""
    rows = rows.astype(np.int64)
    deltas = chunk.cols[rows, kernels.C_TS_DELTA]
    attrs, base_ts, max_ts, shift = rebuilt_timestamps(batch, int(deltas[0]), int(deltas.max()), delete_horizon)
    if shift:
        body = kernels.rebase_records(chunk.data, chunk.cols, rows, shift)
    else:
        body = kernels.gather_records(chunk.data, chunk.cols, rows)
    codec = Codec(batch.attributes & COMPRESSION_MASK)
    if codec is not Codec.NONE:
        body = compress(codec, body)
    info = BatchInfo(batch.base_offset, batch.timestamp_type, batch.producer_id, batch.producer_epoch,
                     batch.base_sequence, batch.partition_leader_epoch, batch.is_transactional, batch.is_control)
    return assemble_batch(info, attrs, batch.last_offset_delta, base_ts, max_ts, len(rows), body)
