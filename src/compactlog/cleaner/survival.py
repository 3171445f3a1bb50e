"""Which records and batches survive cleaning: the one definition, shared with the Spark job.

Everything here is a pure function of the offset map's answers, the batch, the clock and the topic
config; the local cleaner feeds it from its in-memory map, the distributed job from a shuffle.
"""

from __future__ import annotations

from enum import Enum

import numpy as np


class BatchDecision(Enum):
    DELETE = "delete"  # drop the whole batch unread
    DELETE_EMPTY = "delete-empty"  # drop the batch if no record survives
    RETAIN_EMPTY = "retain-empty"  # keep at least the 61-byte header even if no record survives


def batch_decision(next_offset: int, upper_bound: int, is_control: bool) -> BatchDecision:
    """Kafka keeps the batch that ends exactly at the first uncleanable offset, so the log's last
    cleaned offset stays readable. Control batches are kept as they are: we store no transactions
    (transactional appends are rejected), so no marker here can be discarded."""
    if next_offset == upper_bound or is_control:
        return BatchDecision.RETAIN_EMPTY
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


def needs_delete_horizon(has_horizon: bool, kept_tombstones: int) -> bool:
    """A batch first rewritten with a surviving tombstone gets the KIP-534 horizon (now + delete.retention.ms)."""
    return not has_horizon and kept_tombstones > 0
