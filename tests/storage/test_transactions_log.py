"""Transactions in the log: transactional appends, markers, the last stable offset, the ``.txnindex``
entries of aborted transactions and the epoch rules, checked against Kafka's (ProducerAppendInfo,
ProducerStateManager, UnifiedLog)."""

from __future__ import annotations

import os

import pytest
from storage_helpers import batch, make_config

from compactlog.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from compactlog.records import BatchInfo, Codec
from compactlog.records.control import ABORT, COMMIT, build_end_txn_marker, read_control_record
from compactlog.storage import files
from compactlog.storage.log import Log
from compactlog.storage.transaction_index import AbortedTxn

TS = 1_700_000_000_000


def open_log(tmp_path, clock, **cfg) -> Log:
    return Log(tmp_path / "t-0", make_config(**cfg), time=clock)


def tx(pid: int, seq: int, n: int = 2, epoch: int = 0, transactional: bool = True, codec=Codec.NONE) -> bytes:
    return batch([f"k{pid}-{seq + i}" for i in range(n)], ts=TS, codec=codec,
                 info=BatchInfo(producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                is_transactional=transactional))


def test_a_transaction_opens_at_its_first_batch_and_its_marker_takes_the_next_offset(tmp_path, clock):
    lg = open_log(tmp_path, clock)
    lg.append(batch(["plain"]))
    assert lg.last_stable_offset == 1 == lg.high_watermark
    first = lg.append(tx(7, 0)).first_offset
    assert first == 1 and lg.last_stable_offset == 1 and lg.high_watermark == 3
    lg.append(tx(7, 2))  # joins the same transaction
    assert [(t.producer_id, t.first_offset) for t in lg.open_transactions()] == [(7, 1)]
    marker = lg.write_txn_marker(7, 0, True, 3)
    assert marker == 5 and lg.log_end_offset == 6 and lg.last_stable_offset == 6
    assert lg.open_transactions() == []
    (b,) = list(lg.batches(5, 6))
    assert b.is_control and b.is_transactional and b.producer_id == 7 and b.base_sequence == -1
    assert read_control_record(b) == (COMMIT, 3)
    assert bytes(b.buffer) == build_end_txn_marker(COMMIT, 3, producer_id=7, producer_epoch=0,
                                                   timestamp=clock.milliseconds(), base_offset=5, partition_leader_epoch=0)
    assert not files.segment_file(lg.dir, 0, files.TXN_INDEX_SUFFIX).exists()  # no abort: no .txnindex
    info = {p.producer_id: p for p in lg.producers()}[7]
    assert (info.coordinator_epoch, info.current_txn_start_offset, info.last_sequence) == (3, -1, 3)
    lg.close()


def test_the_lso_follows_the_oldest_open_transaction_of_interleaved_producers(tmp_path, clock):
    lg = open_log(tmp_path, clock)
    a = lg.append(tx(1, 0)).first_offset  # 0
    b = lg.append(tx(2, 0)).first_offset  # 2
    lg.append(batch(["plain"]))  # 4: not transactional, decided at once
    c = lg.append(tx(3, 0)).first_offset  # 5
    assert lg.last_stable_offset == a == 0
    assert lg.write_txn_marker(2, 0, True, 0) == 7
    assert lg.last_stable_offset == a  # the oldest is still open
    assert lg.write_txn_marker(1, 0, False, 0) == 8
    assert lg.last_stable_offset == c == 5
    assert [t.first_offset for t in lg.open_transactions()] == [c]
    # the ABORT's entry records the LSO it left: the first offset of the other producer's open transaction
    assert lg.active_segment.txn_index.all_aborted_txns() == [AbortedTxn(1, a, 8, c)]
    lg.append(tx(2, 2))  # producer 2 opens a new transaction at 9
    assert lg.write_txn_marker(3, 0, False, 0) == 11
    assert lg.last_stable_offset == 9
    assert lg.active_segment.txn_index.all_aborted_txns()[-1] == AbortedTxn(3, c, 11, 9)
    assert lg.write_txn_marker(2, 0, False, 0) == 12
    assert lg.last_stable_offset == 13 == lg.log_end_offset
    assert lg.active_segment.txn_index.all_aborted_txns()[-1] == AbortedTxn(2, 9, 12, 13)  # none left: marker + 1
    assert lg.aborted_transactions(0, 13) == [(1, 0), (3, 5), (2, 9)]
    assert b == 2
    lg.close()


def test_aborted_transactions_are_those_overlapping_the_range_as_kafka_collects_them(tmp_path, clock):
    lg = open_log(tmp_path, clock)
    lg.append(tx(1, 0))  # 0-1
    lg.write_txn_marker(1, 0, False, 0)  # 2: aborted [0, 2], LSO 3
    lg.append(batch(["x"]))  # 3
    lg.append(tx(2, 0))  # 4-5
    lg.append(tx(3, 0))  # 6-7
    lg.write_txn_marker(2, 0, False, 0)  # 8: aborted [4, 8], LSO 6
    lg.write_txn_marker(3, 0, False, 0)  # 9: aborted [6, 9], LSO 10
    assert lg.aborted_transactions(0, 10) == [(1, 0), (2, 4), (3, 6)]
    assert lg.aborted_transactions(3, 4) == []  # nothing aborted overlaps offset 3
    assert lg.aborted_transactions(2, 3) == [(1, 0)]  # the marker's own offset overlaps
    assert lg.aborted_transactions(5, 7) == [(2, 4), (3, 6)]
    assert lg.aborted_transactions(9, 10) == [(3, 6)]
    assert lg.aborted_transactions(10, 10) == []
    # Kafka's search stops after the first entry whose LSO reaches the end of the range
    assert lg.active_segment.txn_index.collect_aborted_txns(0, 3).complete
    lg.close()


def test_a_transaction_spanning_a_roll_is_indexed_in_the_segment_of_its_marker(tmp_path, clock):
    lg = open_log(tmp_path, clock, segment_bytes=400)
    first = lg.append(tx(5, 0)).first_offset
    seq = 2
    while len(lg.segments) < 3:
        lg.append(tx(5, seq))
        seq += 2
    assert lg.last_stable_offset == first == 0
    marker = lg.write_txn_marker(5, 0, False, 1)
    holder = lg.segment_for(marker)
    assert holder is lg.active_segment and holder.base_offset > 0
    assert holder.txn_index.all_aborted_txns() == [AbortedTxn(5, 0, marker, marker + 1)]
    assert not files.segment_file(lg.dir, 0, files.TXN_INDEX_SUFFIX).exists()
    # a read of any part of the transaction finds it, from the segment holding the start on
    assert lg.aborted_transactions(0, 1) == [(5, 0)]
    assert lg.aborted_transactions(marker - 1, marker + 1) == [(5, 0)]
    lg.close()


def test_epoch_and_coordinator_fencing(tmp_path, clock):
    lg = open_log(tmp_path, clock)
    lg.append(tx(9, 0, epoch=3))
    with pytest.raises(InvalidProducerEpochError):
        lg.append(tx(9, 2, epoch=2))
    with pytest.raises(InvalidProducerEpochError):
        lg.write_txn_marker(9, 2, True, 0)
    lg.write_txn_marker(9, 3, False, 4)
    with pytest.raises(TransactionCoordinatorFencedError):
        lg.write_txn_marker(9, 3, False, 3)
    end = lg.log_end_offset
    # the coordinator bumping the epoch: a marker of a newer epoch moves the producer to it
    assert lg.write_txn_marker(9, 4, False, 4) == end
    with pytest.raises(InvalidProducerEpochError):
        lg.append(tx(9, 2, epoch=3))
    with pytest.raises(OutOfOrderSequenceError):  # a new epoch starts at sequence 0
        lg.append(tx(9, 5, epoch=4))
    assert lg.append(tx(9, 0, epoch=4)).first_offset == end + 1
    assert lg.log_end_offset == end + 3  # nothing refused was stored
    lg.close()


def test_a_marker_with_nothing_open_is_written_and_completes_nothing(tmp_path, clock):
    lg = open_log(tmp_path, clock)
    assert lg.write_txn_marker(44, 0, False, 2) == 0
    assert lg.last_stable_offset == 1 and lg.open_transactions() == []
    assert lg.aborted_transactions(0, 1) == []  # nothing was aborted: no entry (as in Kafka)
    assert {p.producer_id: p.coordinator_epoch for p in lg.producers()} == {44: 2}
    lg.close()


def test_client_batches_refused(tmp_path, clock):
    lg = open_log(tmp_path, clock)
    control = build_end_txn_marker(ABORT, 0, producer_id=3, producer_epoch=0, timestamp=TS)
    with pytest.raises(InvalidRecordError, match="not allowed to write control records"):
        lg.append(control)
    with pytest.raises(InvalidRecordError, match="producer id"):
        lg.append(batch(["k"], info=BatchInfo(is_transactional=True)))
    lg.append(tx(3, 0))
    with pytest.raises(InvalidTxnStateError):  # the producer's transaction is open: only transactional writes
        lg.append(tx(3, 2, transactional=False))
    assert lg.log_end_offset == 2
    lg.write_txn_marker(3, 0, True, 0)
    assert lg.append(tx(3, 2, transactional=False)).first_offset == 3  # after the marker it may
    lg.close()


def test_a_retried_transactional_batch_is_answered_with_its_first_attempt(tmp_path, clock):
    lg = open_log(tmp_path, clock)
    first = lg.append(tx(6, 0))
    again = lg.append(tx(6, 0))
    assert again.duplicate and again.first_offset == first.first_offset and lg.log_end_offset == 2
    lg.close()


def test_a_recompressed_transactional_batch_stays_transactional(tmp_path, clock):
    lg = open_log(tmp_path, clock, compression_type="gzip")
    lg.append(tx(8, 0, n=3))
    (b,) = list(lg.batches())
    assert b.codec is Codec.GZIP and b.is_transactional and b.producer_id == 8
    assert lg.last_stable_offset == 0
    lg.close()


def test_truncation_cuts_the_index_and_forgets_transactions_above_the_cut(tmp_path, clock):
    lg = open_log(tmp_path, clock)
    lg.append(tx(1, 0))  # 0-1
    lg.write_txn_marker(1, 0, False, 0)  # 2
    lg.append(tx(2, 0))  # 3-4
    lg.write_txn_marker(2, 0, False, 0)  # 5
    lg.append(tx(3, 0))  # 6-7 open
    assert lg.last_stable_offset == 6
    lg.truncate_to(5)  # the second ABORT is cut: producer 2's transaction is open again
    assert lg.active_segment.txn_index.all_aborted_txns() == [AbortedTxn(1, 0, 2, 3)]
    assert lg.aborted_transactions(0, 5) == [(1, 0)]
    assert [(t.producer_id, t.first_offset) for t in lg.open_transactions()] == [(2, 3)]
    assert lg.last_stable_offset == 3
    lg.truncate_to(1)
    assert lg.aborted_transactions(0, 1) == [] and lg.last_stable_offset == 0
    lg.truncate_to(0)
    assert lg.last_stable_offset == 0 == lg.log_end_offset and lg.open_transactions() == []
    lg.close()


def test_retention_deletes_a_segment_with_its_txnindex(tmp_path, clock):
    lg = open_log(tmp_path, clock, segment_bytes=300, file_delete_delay_ms=0)
    lg.append(tx(1, 0))
    lg.write_txn_marker(1, 0, False, 0)
    first = lg.segments[0]
    path = files.segment_file(lg.dir, first.base_offset, files.TXN_INDEX_SUFFIX)
    assert path.exists()
    while len(lg.segments) < 2:
        lg.append(batch(["filler" * 10]))
    lg.increment_log_start_offset(lg.segments[1].base_offset)
    assert lg.delete_old_segments() == 1
    assert not path.exists()
    assert not list(lg.dir.glob("*.txnindex*"))
    assert lg.aborted_transactions(lg.log_start_offset, lg.log_end_offset) == []
    lg.close()


def test_an_open_transaction_below_the_log_start_holds_the_lso_at_the_log_start(tmp_path, clock):
    lg = open_log(tmp_path, clock)
    lg.append(tx(1, 0))
    lg.append(batch(["x"]))
    lg.increment_log_start_offset(2)
    assert lg.last_stable_offset == 2  # Kafka: max(first unstable offset, log start)
    lg.close()


def test_a_follower_append_of_markers_indexes_them_as_a_leader_does(tmp_path, clock):
    src = open_log(tmp_path, clock)
    src.append(tx(1, 0))
    src.append(tx(2, 0))
    src.write_txn_marker(1, 0, False, 0)
    raw = b"".join(bytes(b.buffer) for b in src.batches())
    expected = src.active_segment.txn_index.all_aborted_txns()
    src.close()
    dst = Log(tmp_path / "u-0", make_config(), time=clock)
    dst.append_as_follower(raw)
    assert dst.active_segment.txn_index.all_aborted_txns() == expected
    assert dst.last_stable_offset == 2 and [t.producer_id for t in dst.open_transactions()] == [2]
    dst.close()


def test_a_transactional_batch_refused_by_the_log_opens_nothing(tmp_path, clock):
    lg = open_log(tmp_path, clock, segment_bytes=1024, max_message_bytes=4096)
    big = batch(["k" * 1500], ts=TS, info=BatchInfo(producer_id=4, producer_epoch=0, base_sequence=0,
                                                    is_transactional=True))
    with pytest.raises(Exception, match="exceeds the maximum configured segment size"):
        lg.append(big)
    assert lg.last_stable_offset == 0 == lg.log_end_offset and lg.open_transactions() == []
    lg.append(batch(["x"]))
    assert lg.last_stable_offset == 1
    lg.close()


def test_asking_for_the_lso_of_a_log_without_producers_writes_no_producer_snapshot(tmp_path, clock):
    lg = open_log(tmp_path, clock)
    lg.append(batch(["a"]))
    assert lg.last_stable_offset == 1 and lg.producer_state.loaded  # (the cleaner and read_committed ask)
    lg.roll()
    lg.append(batch(["b"]))
    lg.close()
    assert not list(lg.dir.glob("*.snapshot"))


def test_searching_the_txnindex_files_keeps_no_descriptor_open(tmp_path, clock):
    lg = open_log(tmp_path, clock, segment_bytes=300)
    seq = 0
    while len(lg.segments) < 12:
        lg.append(tx(1, seq))
        seq += 2
        lg.write_txn_marker(1, 0, False, 0)
    assert open_txnindexes() == [files.filename_prefix(lg.active_segment.base_offset) + files.TXN_INDEX_SUFFIX]
    end = lg.log_end_offset
    lg.close()
    for clean in (True, False):  # a clean open checks them, an unclean one rebuilds them: neither keeps one open
        lg = Log(tmp_path / "t-0", make_config(segment_bytes=300), time=clock, clean_shutdown=clean,
                 recovery_point=end if clean else 0)
        with_entries = [s for s in lg.segments if files.segment_file(lg.dir, s.base_offset, files.TXN_INDEX_SUFFIX).exists()]
        assert len(with_entries) > 8
        found = lg.aborted_transactions(0, lg.log_end_offset)
        assert len(found) == seq // 2 and open_txnindexes() in ([], [with_entries[-1].txn_index.path.name])
        lg.close()
    lg = open_log(tmp_path, clock, segment_bytes=300)
    lg.append(tx(2, 0))
    lg.write_txn_marker(2, 0, False, 0)  # the writer keeps the active segment's
    assert [name.split(".")[0] for name in open_txnindexes()] == [files.filename_prefix(lg.active_segment.base_offset)]
    lg.close()
    assert open_txnindexes() == []


def open_txnindexes() -> list[str]:
    names = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.endswith(files.TXN_INDEX_SUFFIX):
            names.append(os.path.basename(target))
    return names
