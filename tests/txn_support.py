"""Transactional data built through the embedded API, for the read_committed tests of every reader.

``build(data_dir)`` writes topic ``TOPIC`` (one partition, small segments so that transactions span
segment files) with three transactional producers interleaved with plain records:

- ``C`` commits a transaction whose batches straddle ``A``'s;
- ``A`` aborts one (its ABORT marker gets a ``.txnindex`` entry), then a second one that began just
  before ``O``'s and ends after it: a read_committed reader's last batch below the LSO is aborted data;
- ``O`` opens a transaction and leaves it open: the last stable offset stays at its first offset, and
  what follows it (``C``'s second transaction, committed, and plain records) waits behind it;

``commit_open(part)`` ends ``O``'s transaction with a COMMIT marker (the test may instead have the
broker write it). ``COMMITTED_BEFORE`` / ``COMMITTED_AFTER`` are the values a read_committed reader sees
before and after that commit, ``ALL`` what a read_uncommitted one sees (never a control record).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import compactlog
from compactlog.records.batch import BatchInfo, build_batch

TOPIC = "txn-events"
C, A, O = 9001, 9002, 9003  # producer ids, far above the ones the broker hands out
EPOCH = 0
COORDINATOR_EPOCH = 0
# record i is stamped T0 + i s: half an hour ahead, so every marker (stamped as written) is older than any record
T0 = int(time.time() * 1000) + 1_800_000

# (kind, producer, values): "data" batches (producer None: a plain, non-transactional batch) and "commit"
# / "abort" markers, in the order they are appended
SCRIPT = [
    ("data", None, [b"plain-0", b"plain-1"]),
    ("data", C, [b"c1-a", b"c1-b"]),
    ("data", A, [b"a2-a"]),
    ("data", C, [b"c1-c"]),
    ("data", A, [b"a2-b", b"a2-c"]),
    ("data", None, [b"plain-2"]),
    ("abort", A, []),
    ("data", C, [b"c1-d"]),
    ("commit", C, []),
    ("data", None, [b"plain-3"]),
    ("data", A, [b"a5-a"]),  # A's second transaction, aborted after O's opens: aborted data just below the LSO
    ("data", O, [b"o3-a", b"o3-b"]),  # opens the transaction that stays open: the LSO
    ("data", C, [b"c4-a"]),
    ("data", None, [b"plain-4"]),
    ("commit", C, []),
    ("abort", A, []),
    ("data", O, [b"o3-c"]),
    ("data", None, [b"plain-5"]),
]

COMMITTED_BEFORE = [b"plain-0", b"plain-1", b"c1-a", b"c1-b", b"c1-c", b"plain-2", b"c1-d", b"plain-3"]
COMMITTED_AFTER = COMMITTED_BEFORE + [b"o3-a", b"o3-b", b"c4-a", b"plain-4", b"o3-c", b"plain-5"]
ALL = [v for kind, _p, values in SCRIPT if kind == "data" for v in values]


@dataclasses.dataclass
class Built:
    lso: int  # the last stable offset while O's transaction is open: its first offset
    end: int  # the log end offset before the commit
    control_offsets: list[int]  # offsets of the markers written by build
    offsets: dict[bytes, int]  # offset of each value
    timestamps: dict[bytes, int]  # timestamp of each value


def _batch(producer: int | None, values: list[bytes], sequences: dict[int, int], ts: int) -> bytes:
    keys = [f"k-{v.decode()}".encode() for v in values]
    if producer is None:
        return build_batch(keys, values, [ts] * len(values))
    seq = sequences.get(producer, 0)
    sequences[producer] = seq + len(values)
    info = BatchInfo(producer_id=producer, producer_epoch=EPOCH, base_sequence=seq, is_transactional=True)
    return build_batch(keys, values, [ts] * len(values), info=info)


def build(data_dir: Path, segment_bytes: int = 400) -> Built:
    """Write ``SCRIPT`` into ``TOPIC`` of a fresh data directory (closed after)."""
    sequences: dict[int, int] = {}
    offsets: dict[bytes, int] = {}
    stamps: dict[bytes, int] = {}
    controls: list[int] = []
    lso = -1
    with compactlog.open(data_dir) as cl:
        cl.create_topic(TOPIC, partitions=1, config={"segment.bytes": str(segment_bytes)})
        part = cl.partition(TOPIC, 0)
        for i, (kind, producer, values) in enumerate(SCRIPT):
            if kind == "data":
                first = part.append(_batch(producer, values, sequences, T0 + i * 1000)).first_offset
                if producer == O and lso < 0:
                    lso = first
                for j, v in enumerate(values):
                    offsets[v], stamps[v] = first + j, T0 + i * 1000
            else:
                controls.append(part.write_txn_marker(producer, EPOCH, kind == "commit", COORDINATOR_EPOCH))
        assert part.last_stable_offset == lso, (part.last_stable_offset, lso)
        end = part.log_end_offset
    return Built(lso, end, controls, offsets, stamps)


def commit_open(part) -> int:
    """Commit ``O``'s open transaction in ``part`` (a ``Partition``); the marker's offset."""
    return part.write_txn_marker(O, EPOCH, True, COORDINATOR_EPOCH)
