"""Partition log behaviour a user relies on: offsets, order, rolling, indexes, reads, recovery."""

from __future__ import annotations

import os
import struct

import pytest
from storage_helpers import batch, make_config

from compactlog.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
)
from compactlog.records import BatchInfo, Codec, RecordBatch, iter_batches
from compactlog.storage import files
from compactlog.storage.log import Log

TS = 1_700_000_000_000


def open_log(tmp_path, clock, **cfg) -> Log:
    return Log(tmp_path / "t-0", make_config(**cfg), time=clock)


def all_records(lg: Log, start: int = 0):
    return [r for b in lg.batches(start) for r in b.records() if r.offset >= start]


def test_offsets_are_assigned_in_order_and_survive_reopen(tmp_path, clock):
    lg = open_log(tmp_path, clock)
    firsts = [lg.append(batch([f"k{i}-{j}" for j in range(3)])).first_offset for i in range(10)]
    assert firsts == list(range(0, 30, 3))
    assert lg.log_end_offset == 30
    lg.close()
    lg = open_log(tmp_path, clock)
    recs = all_records(lg)
    assert [r.offset for r in recs] == list(range(30))
    assert recs[4].key == b"k1-1"


def test_rolls_by_segment_bytes_and_never_splits_a_batch(tmp_path, clock):
    one = batch([b"k"], [b"x" * 1000])
    lg = open_log(tmp_path, clock, segment_bytes=len(one) * 3)
    for _ in range(10):
        lg.append(one)
    assert [s.base_offset for s in lg.segments] == [0, 3, 6, 9]
    assert all(s.size <= len(one) * 3 for s in lg.segments)
    names = sorted(os.listdir(lg.dir))
    assert "00000000000000000003.log" in names and "00000000000000000003.index" in names
    assert "00000000000000000003.timeindex" in names


def test_append_larger_than_segment_bytes_is_rejected(tmp_path, clock):
    lg = open_log(tmp_path, clock, segment_bytes=200, max_message_bytes=10_000)
    with pytest.raises(RecordBatchTooLargeError, match="exceeds the maximum configured segment size of 200"):
        lg.append(batch([b"k"], [b"x" * 500]))
    assert lg.log_end_offset == 0


def test_rolls_by_segment_ms_using_record_timestamps(tmp_path, clock):
    lg = open_log(tmp_path, clock, segment_ms=100)
    lg.append(batch([b"a"], ts=TS))
    lg.append(batch([b"b"], ts=TS + 50))
    assert len(lg.segments) == 1
    lg.append(batch([b"c"], ts=TS + 101))
    assert [s.base_offset for s in lg.segments] == [0, 2]


def test_rolls_when_offset_index_is_full(tmp_path, clock):
    lg = open_log(tmp_path, clock, segment_index_bytes=16, index_interval_bytes=1)
    for i in range(8):
        lg.append(batch([f"k{i}"]))
    assert len(lg.segments) > 1
    assert all(s.offset_index.entries <= 2 for s in lg.segments)


def test_sparse_index_skips_the_first_append_and_follows_interval(tmp_path, clock):
    one = batch([b"k"], [b"x" * 100])
    lg = open_log(tmp_path, clock, index_interval_bytes=len(one) * 2)
    for _ in range(20):
        lg.append(one)
    entries = lg.active_segment.offset_index.view()
    assert len(entries) > 0
    assert int(entries[0]["offset"]) > 0  # the first append is never indexed
    positions = [int(p) for p in entries["position"]]
    assert all(b - a > len(one) * 2 for a, b in zip(positions, positions[1:]))
    # every index entry points at the start of the batch holding its offset
    for rel, pos in zip(entries["offset"], entries["position"]):
        b = RecordBatch(lg.active_segment.read_bytes(int(pos), len(one)))
        assert b.last_offset == int(rel)


def test_read_by_offset_returns_the_batch_holding_it(tmp_path, clock):
    lg = open_log(tmp_path, clock, segment_bytes=2000)
    for i in range(50):
        lg.append(batch([f"k{i}a", f"k{i}b"]))
    for off in (0, 1, 37, 99):
        data = lg.read(off, 100).records
        first = next(iter_batches(data))[1]
        assert first.base_offset <= off <= first.last_offset
    assert lg.read(100).records == b""
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(101)


def test_read_by_timestamp(tmp_path, clock):
    lg = open_log(tmp_path, clock, segment_bytes=500, index_interval_bytes=1)
    for i in range(30):
        lg.append(batch([f"k{i}"], ts=TS + i * 10))
    assert lg.offset_for_timestamp(TS) == (TS, 0)
    assert lg.offset_for_timestamp(TS + 95) == (TS + 100, 10)
    assert lg.offset_for_timestamp(TS + 290) == (TS + 290, 29)
    assert lg.offset_for_timestamp(TS + 291) is None


def test_corrupt_batch_is_rejected_and_log_is_unchanged(tmp_path, clock):
    lg = open_log(tmp_path, clock)
    lg.append(batch([b"a"]))
    good = bytearray(batch([b"b"]))
    good[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="stored crc"):
        lg.append(bytes(good))
    with pytest.raises(CorruptRecordError):
        lg.append(bytes(batch([b"c"]))[:-5])
    assert lg.log_end_offset == 1
    assert [r.key for r in all_records(lg)] == [b"a"]


def test_keyless_record_rejected_on_compacted_topic(tmp_path, clock):
    lg = open_log(tmp_path, clock, cleanup_policy="compact")
    with pytest.raises(InvalidRecordError, match="Compacted topic cannot accept message without key in topic partition t-0"):
        lg.append(batch([b"a", None, b"c"]))
    assert lg.log_end_offset == 0
    lg.append(batch([b"a"], [None]))  # a tombstone has a key: accepted
    assert lg.log_end_offset == 1


def test_refused_keyless_records_are_named_by_index_the_first_thousand_listed(tmp_path, clock):
    lg = open_log(tmp_path, clock, cleanup_policy="compact")
    with pytest.raises(InvalidRecordError) as info:
        lg.append(batch([b"a", None, b"c", None]))
    why = "Compacted topic cannot accept message without key in topic partition t-0"
    assert info.value.record_errors == ((1, why), (3, why)) and info.value.records_refused == 2
    with pytest.raises(InvalidRecordError) as info:
        lg.append(batch([b"a"] + [None] * 1500))
    assert info.value.records_refused == 1500
    assert [i for i, _ in info.value.record_errors] == list(range(1, 1001))


def test_oversized_batch_rejected(tmp_path, clock):
    lg = open_log(tmp_path, clock, max_message_bytes=500)
    with pytest.raises(RecordTooLargeError, match="exceeds the maximum configured value of 500"):
        lg.append(batch([b"k"], [b"x" * 600]))


def test_same_codec_is_stored_in_place_with_producer_bytes(tmp_path, clock):
    lg = open_log(tmp_path, clock, compression_type="producer")
    lg.append(batch([b"a"]))
    raw = batch([b"x", b"y"], codec=Codec.LZ4)
    v = lg.append(raw)
    assert not v.recompressed
    stored = list(lg.batches(1))[0]
    assert bytes(stored.buffer)[61:] == raw[61:]  # records bytes untouched
    assert stored.base_offset == 1 and stored.codec is Codec.LZ4
    stored.ensure_valid()


@pytest.mark.parametrize("compression_type", ["producer", "zstd"], ids=["in-place", "rebuilt"])
def test_an_append_carries_the_producer_fields_it_was_validated_with(tmp_path, clock, compression_type):
    """The validator hands the log the producer id, epoch and sequence it read, in place or rebuilt; a
    retry is answered with the first attempt's offsets and the same fields."""
    lg = open_log(tmp_path, clock, compression_type=compression_type)
    plain = lg.append(batch([b"a"]))
    assert (plain.producer_id, plain.producer_epoch, plain.base_sequence) == (-1, -1, -1)
    raw = batch([b"x", b"y"], info=BatchInfo(producer_id=2**33, producer_epoch=4, base_sequence=0))
    v = lg.append(raw)
    assert (v.producer_id, v.producer_epoch, v.base_sequence, v.first_offset) == (2**33, 4, 0, 1)
    again = lg.append(raw)
    assert again.duplicate and (again.first_offset, again.producer_id, again.base_sequence) == (1, 2**33, 0)
    assert lg.log_end_offset == 3


def test_topic_codec_rebuilds_batch(tmp_path, clock):
    lg = open_log(tmp_path, clock, compression_type="zstd")
    v = lg.append(batch([b"a", b"b"], codec=Codec.GZIP))
    assert v.recompressed
    stored = list(lg.batches(0))[0]
    assert stored.codec is Codec.ZSTD
    assert [(r.offset, r.key) for r in stored.records()] == [(0, b"a"), (1, b"b")]


def test_log_append_time_overrides_record_timestamps(tmp_path, clock):
    lg = open_log(tmp_path, clock, message_timestamp_type="LogAppendTime")
    lg.append(batch([b"a", b"b"], ts=5))
    recs = all_records(lg)
    assert {r.timestamp for r in recs} == {clock.milliseconds()}
    assert all(r.timestamp_type == 1 for r in recs)


def test_timestamp_window(tmp_path, clock):
    lg = open_log(tmp_path, clock, message_timestamp_before_max_ms=1000)
    with pytest.raises(InvalidTimestampError):
        lg.append(batch([b"a"], ts=clock.milliseconds() - 5000))
    lg.append(batch([b"a"], ts=clock.milliseconds() - 10))


def test_recovery_truncates_torn_tail_and_keeps_complete_batches(tmp_path, clock):
    lg = open_log(tmp_path, clock)
    for i in range(20):
        lg.append(batch([f"k{i}"]))
    lg.close()
    path = tmp_path / "t-0" / "00000000000000000000.log"
    with open(path, "ab") as f:
        f.write(batch([b"torn"])[:30])  # a crash in the middle of an append
    (tmp_path / "t-0" / files.CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
    lg = Log(tmp_path / "t-0", make_config(), time=clock, recovery_point=0)
    assert lg.log_end_offset == 20
    assert lg.truncated_on_load == 30
    assert [r.key for r in all_records(lg)][-1] == b"k19"
    lg.append(batch([b"after"]))
    assert all_records(lg, 20)[0].key == b"after"


def test_recovery_keeps_a_corrupt_middle_batch_and_everything_after(tmp_path, clock):
    """Kafka truncates at the first bad batch and deletes every later segment; we cut only a torn tail
    and keep damage in the middle in place, reported, so no sound batch after it is lost."""
    lg = open_log(tmp_path, clock, segment_bytes=400)
    for i in range(20):
        lg.append(batch([f"k{i}"]))
    first = lg.segments[0]
    sizes = [b.size for _, b in first.batches(0)]
    path = first.log_path
    n_segments = len(lg.segments)
    lg.close()
    data = bytearray(path.read_bytes())
    data[sizes[0] + 30] ^= 0x01  # corrupt the second batch of the first segment
    path.write_bytes(bytes(data))
    lg = Log(tmp_path / "t-0", make_config(segment_bytes=400), time=clock, recovery_point=0)
    assert lg.log_end_offset == 20
    assert len(lg.segments) == n_segments
    assert [(d.position, d.tail) for d in lg.damage_on_load] == [(sizes[0], False)]
    assert [r.key for r in all_records(lg, 2)] == [f"k{i}".encode() for i in range(2, 20)]
    with pytest.raises(CorruptRecordError, match="t-0/00000000000000000000.log position"):
        all_records(lg, 0)


def test_missing_and_corrupt_indexes_are_rebuilt(tmp_path, clock):
    lg = open_log(tmp_path, clock, segment_bytes=3000, index_interval_bytes=50)
    for i in range(100):
        lg.append(batch([f"k{i}"]))
    lg.close()
    before = [s.offset_index.view().tobytes() for s in lg.segments]
    d = tmp_path / "t-0"
    (d / "00000000000000000000.index").unlink()
    with open(d / files.segment_file(d, lg.segments[1].base_offset, ".index").name, "ab") as f:
        f.write(b"\x01\x02\x03")  # torn entry
    lg = Log(d, make_config(segment_bytes=3000, index_interval_bytes=50), time=clock, clean_shutdown=True)
    after = [s.offset_index.view().tobytes() for s in lg.segments]
    assert after[0] and after[1]
    assert after[2:] == before[2:]
    assert [r.offset for r in all_records(lg)] == list(range(100))


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "unclean"])
def test_a_missing_time_index_is_rebuilt_and_seeks_by_time_find_every_record(tmp_path, clock, clean):
    """A closed segment's .timeindex deleted: opened empty, the segment would seem to hold no timestamp,
    and a seek by time to one of its records would skip ahead to the next segment."""
    lg = open_log(tmp_path, clock, segment_bytes=400)
    for i in range(20):
        lg.append(batch([f"k{i}"], ts=TS + i))
    lg.close()
    assert len(lg.segments) >= 3
    d = tmp_path / "t-0"
    files.segment_file(d, 0, files.TIME_INDEX_SUFFIX).unlink()
    lg = Log(d, make_config(segment_bytes=400), time=clock, clean_shutdown=clean, recovery_point=20)
    assert [lg.offset_for_timestamp(TS + i)[1] for i in range(20)] == list(range(20))
    assert files.segment_file(d, 0, files.TIME_INDEX_SUFFIX).exists()
    lg.close()


def test_truncate_to(tmp_path, clock):
    lg = open_log(tmp_path, clock, segment_bytes=400)
    for i in range(20):
        lg.append(batch([f"k{i}"]))
    lg.truncate_to(7)
    assert lg.log_end_offset == 7
    assert [r.offset for r in all_records(lg)] == list(range(7))
    assert lg.append(batch([b"x"])).first_offset == 7


def test_follower_append_keeps_offset_gaps(tmp_path, clock):
    from compactlog.records import BatchInfo, build_batch

    lg = open_log(tmp_path, clock)
    b1 = build_batch([b"a", b"b"], [b"1", b"2"], [TS, TS], offset_deltas=[0, 5], info=BatchInfo(base_offset=10))
    lg2 = Log(tmp_path / "t-1", make_config(), time=clock, log_start_offset=10)
    lg2.append_as_follower(b1)
    assert [r.offset for r in all_records(lg2, 10)] == [10, 15]
    assert lg2.log_end_offset == 16
    with pytest.raises(CorruptRecordError):
        lg2.append_as_follower(b1)  # below the log end
    lg.close()


def test_relative_offset_overflow_rolls(tmp_path, clock):
    from compactlog.records import BatchInfo, build_batch

    lg = open_log(tmp_path, clock)
    lg.append_as_follower(build_batch([b"a"], [b"1"], [TS], info=BatchInfo(base_offset=0)))
    far = 2**31 + 10
    lg.append_as_follower(build_batch([b"b"], [b"2"], [TS], info=BatchInfo(base_offset=far)))
    assert [s.base_offset for s in lg.segments] == [0, far]


def test_index_file_formats_match_kafka(tmp_path, clock):
    one = batch([b"k"], [b"x" * 100])
    lg = open_log(tmp_path, clock, index_interval_bytes=1)
    for i in range(5):
        lg.append(batch([b"k"], [b"x" * 100], ts=TS + i))
    lg.roll()
    raw = (tmp_path / "t-0" / "00000000000000000000.index").read_bytes()
    entries = [struct.unpack(">ii", raw[i : i + 8]) for i in range(0, len(raw), 8)]
    assert entries == [(i, i * len(one)) for i in range(1, 5)]
    traw = (tmp_path / "t-0" / "00000000000000000000.timeindex").read_bytes()
    tentries = [struct.unpack(">qi", traw[i : i + 12]) for i in range(0, len(traw), 12)]
    assert tentries == [(TS + i, i) for i in range(1, 5)]


def test_appended_batches_carry_leader_epoch_0_as_a_new_topic_leader_stamps(tmp_path, clock):
    """Kafka's leader stamps its epoch on every batch it appends, kept in place or rebuilt; the first
    leader of a new topic has epoch 0 (a producer sends -1)."""
    lg = open_log(tmp_path, clock)
    lg.append(batch([b"a"]))
    rebuilding = Log(tmp_path / "t-1", make_config(compression_type="zstd"), time=clock)
    rebuilding.append(batch([b"b"]))
    for log_ in (lg, rebuilding):
        [b] = list(log_.batches(0))
        assert b.partition_leader_epoch == 0
    assert RecordBatch(batch([b"a"])).partition_leader_epoch == -1
