"""The two-phase compactor (Pulsar's ``TwoPhaseCompactor``, on Kafka segments).

A run fixes its horizon H = the log end offset when it starts; records appended later are the next
run's. Its source is the previous side log (the compacted records below the previous horizon) followed
by the live records from that horizon up to H, so each run is incremental.

* Phase one maps each key of the source to its latest offset (or its best version under a
  ``compaction.strategy``) in the cleaner's bounded offset map.
* Phase two writes the records the map chose into a new side log, batches keeping their base offsets
  and extents. Tombstones (null values) delete their key and are not written; keyless records are
  dropped (Pulsar's default since 3.2); control batches never reach the compacted view, nor do the
  records of aborted transactions (which never enter the map either: the cleaner's rule).

H never passes the last stable offset: the records of a transaction still open wait for a later run.

When the keys do not fit the map, phase one stops where it filled; phase two then writes an
intermediate side log in which the mapped range is compacted and the rest is copied, and the next pass
maps on from there. Memory stays bounded by the map, whatever the number of keys.

Commit: the new side log is fsynced, then ``state.publish`` names it with H in one atomic write, then
the previous side log is deleted. Nothing is ever written to the live log.
"""

from __future__ import annotations

import itertools
import shutil
import time as _time
from typing import Callable, Iterator

import numpy as np

from ..cleaner.cleaner import IoObserver
from ..cleaner.offset_map import OffsetMap
from ..cleaner.survival import lookup, map_keys, retained, without_batches, write_survivors
from ..cleaner.transactions import AbortedRanges
from ..clock import Time
from ..records import kernels
from ..records.batch import RecordBatch
from ..records.columns import Chunk, chunks
from ..storage.log import Log
from ..storage.snapshot import PartitionSnapshot
from .sidelog import SideLogWriter
from .state import CompactionState, publish, read_state, remove_unpublished, side_log_dir, side_logs

READ_CHUNK_BYTES = 1 << 20


def side_log_batches(chunk: Chunk, keep: np.ndarray) -> list[tuple[bytes, int, int]]:
    """The kept records of each batch of ``chunk`` as (bytes, max timestamp, last offset), written by the
    cleaner's rule: whole batches copied, partly kept ones rebuilt around their kept records (same base
    offset and extent), emptied batches and control batches left out."""
    return write_survivors(chunk, keep, upper_bound=-1, new_horizon=0, keep_control=False)


class Compactor:
    """Runs compactions of single partitions with one offset map of ``memory`` bytes."""

    def __init__(self, memory: int, load_factor: float, time: Time,
                 checkpoint: Callable[[str], None] = lambda _stage: None) -> None:
        self.memory = memory
        self.load_factor = load_factor
        self.time = time
        self.checkpoint = checkpoint  # called at each stage; tests raise from it to simulate a crash

    def compact(self, lg: Log, on_io: IoObserver | None = None) -> CompactionState | None:
        """One run over ``lg``; returns the published state, or None when there was nothing new.
        ``on_io(log name, phase, bytes)`` hears of every batch read, for a progress bar."""
        on_io = on_io or (lambda _name, _phase, _n: None)
        started_ms, t0 = self.time.milliseconds(), _time.monotonic()
        pdir = lg.dir
        remove_unpublished(pdir)
        prev = read_state(pdir)
        horizon = min(lg.log_end_offset, lg.last_stable_offset)  # an open transaction's records wait for its end
        if horizon <= (prev.horizon if prev else lg.log_start_offset):
            return None
        strategy = lg.config.compaction_strategy
        m = OffsetMap(self.memory, self.load_factor, strategy != "offset")
        next_id = max([0, *side_logs(pdir)]) + 1
        source: PartitionSnapshot | None = PartitionSnapshot.of_directory(side_log_dir(pdir, prev.side_log)) if prev else None
        prev_horizon = prev.horizon if prev else 0
        # the aborted transactions of the live records read (the side log holds none: it was written
        # without them, and every transaction open at the previous horizon began after it)
        aborted = AbortedRanges(lg.aborted_txns(max(prev_horizon, lg.log_start_offset), horizon))
        counted = {"records": 0, "bytes": 0}

        def read(src: PartitionSnapshot | None, below: int, phase: str, count: bool = False) -> Iterator[RecordBatch]:
            """The source of this pass: side log below ``below``, then live records up to H."""
            live = lg.batches(max(below, lg.log_start_offset), horizon)
            for b in itertools.chain(src.batches(0, below) if src is not None else (), live):
                if count:
                    counted["records"] += b.record_count
                    counted["bytes"] += b.size
                on_io(lg.name, phase, b.size)
                yield b

        start = 0
        first_pass = True
        try:
            while True:
                m.clear()
                mapped_all = map_keys(m, read(source, prev_horizon if first_pass else horizon, "mapping"), start, strategy,
                                      aborted=aborted)
                if mapped_all:
                    m.latest_offset = horizon - 1
                self.checkpoint("phase-one")
                out_id = next_id
                next_id += 1
                writer = SideLogWriter(side_log_dir(pdir, out_id), lg.segment_params(), lg.config.segment_bytes)
                for group in chunks(read(source, prev_horizon if first_pass else horizon, "writing", count=first_pass),
                                    READ_CHUNK_BYTES):
                    chunk = Chunk.scan(group, verify=True)
                    mapped, exact = lookup(m, chunk, start, strategy)
                    cols = chunk.cols
                    keep = retained(cols[:, kernels.C_OFFSET_DELTA], mapped, cols[:, kernels.C_KEY_LEN] >= 0,
                                    cols[:, kernels.C_VAL_LEN] < 0, m.latest_offset, 0, 0, exact=exact)
                    gone = aborted.aborted(chunk.batches) if aborted else None
                    if gone:  # an aborted transaction's records never reach the compacted view
                        keep[without_batches(chunk, gone)] = False
                    writer.append(side_log_batches(chunk, keep), int(keep.sum()))
                writer.finish()
                self.checkpoint("phase-two")
                if source is not None:
                    source.close()
                    if not first_pass:
                        shutil.rmtree(source.directory, ignore_errors=True)  # an earlier pass's intermediate
                first_pass = False
                source = PartitionSnapshot.of_directory(side_log_dir(pdir, out_id))
                if mapped_all:
                    break
                start = m.latest_offset + 1
            state = CompactionState(horizon, out_id, started_ms, int((_time.monotonic() - t0) * 1000),
                                    counted["records"], counted["bytes"], writer.records, writer.bytes)
            source.close()
            self.checkpoint("publish")
            publish(pdir, state)
        except BaseException:
            if source is not None:
                source.close()
            remove_unpublished(pdir)
            raise
        remove_unpublished(pdir)  # the previous side log, now superseded
        return state
