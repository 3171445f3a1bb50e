"""Other processes read a partition read-only while its owner writes and cleans it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import compactlog
from compactlog.errors import UnknownTopicOrPartitionError
from compactlog.storage.snapshot import PartitionSnapshot


def test_snapshot_reads_while_the_owner_holds_the_lock_and_writes_nothing(tmp_path):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1, {"segment.bytes": "1000"})
        cl.produce_batch("t", [(b"k%d" % i, b"v" * 50) for i in range(200)], batch_bytes=300)
        before = sorted(os.listdir(tmp_path / "t-0"))
        with PartitionSnapshot.open(tmp_path, "t", 0) as snap:
            assert snap.log_end_offset == 200
            got = [r.offset for b in snap.batches(37, 120) for r in b.records() if 37 <= r.offset < 120]
            assert got == list(range(37, 120))
        assert sorted(os.listdir(tmp_path / "t-0")) == before


def test_snapshot_in_another_process_survives_cleaning_swaps(tmp_path):
    cfg = {"cleanup.policy": "compact", "segment.bytes": "2000", "min.cleanable.dirty.ratio": "0.01", "file.delete.delay.ms": "0"}
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1, cfg)
        cl.produce_batch("t", [(b"k%d" % (i % 10), b"v%d" % i) for i in range(600)], batch_bytes=200)
        reader = textwrap.dedent(f"""
            from compactlog.storage.snapshot import PartitionSnapshot
            snap = PartitionSnapshot.open({str(tmp_path)!r}, "t", 0)
            print("opened", flush=True)
            input()
            recs = [r for b in snap.batches(0) for r in b.records()]
            offs = [r.offset for r in recs]
            assert offs == sorted(set(offs)) and offs[-1] == 599, offs[-5:]
            latest = dict((r.key, r.value) for r in recs)
            assert latest == dict((b"k%d" % (i % 10), b"v%d" % i) for i in range(590, 600))
            print(len(offs), flush=True)
        """)
        proc = subprocess.Popen([sys.executable, "-c", reader], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "opened"
        assert cl.clean("t").compactions  # segments the reader holds are swapped out and unlinked
        out, _ = proc.communicate("go\n", timeout=60)
        assert proc.returncode == 0
        # It read on by offset across the swap, as a Kafka consumer does: in order, nothing twice, the
        # latest value of every key; records the cleaner removed meanwhile may be gone.
        assert 10 <= int(out.strip()) <= 600


def test_unknown_partition():
    with pytest.raises(UnknownTopicOrPartitionError):
        PartitionSnapshot.open("/nonexistent-dir", "t", 0)


WRITER = textwrap.dedent("""
    import sys, compactlog
    cl = compactlog.open(sys.argv[1], {"log.cleaner.backoff.ms": "1"}, background=True)
    print("ready", flush=True)
    for i in range(int(sys.argv[2])):
        cl.produce_batch("t", [(b"k%d" % (j % 30), b"v%d" % (i * 10 + j)) for j in range(10)], batch_bytes=120)
    cl.close()
""")


def test_followers_read_on_while_the_owner_cleans_many_small_segments(tmp_path):
    """New followers keep starting while another process appends and its cleaner swaps segments many
    times a second (small segments, indexes that fill fast, files unlinked at once). Opening every
    segment up front lost that race; reading on by offset does not."""
    from compactlog.consumer import SnapshotConsumer

    cfg = {"cleanup.policy": "compact", "segment.bytes": "1500", "segment.index.bytes": "80",
           "min.cleanable.dirty.ratio": "0.01", "file.delete.delay.ms": "0", "delete.retention.ms": "0"}
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 2, cfg)
        cl.produce_batch("t", [(b"k%d" % (j % 30), b"w%d" % j) for j in range(3000)], batch_bytes=120)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), "3000"], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "ready"
        followers = 0
        while writer.poll() is None:
            consumer = SnapshotConsumer(tmp_path, "t", start="earliest")
            last = {0: -1, 1: -1}
            for _ in range(3):
                for r in consumer.poll():
                    assert r.offset > last[r.partition]
                    last[r.partition] = r.offset
            consumer.close()
            followers += 1
    finally:
        writer.kill()
        writer.wait()
    assert writer.returncode == 0 and followers > 1
    with compactlog.open(tmp_path) as cl:
        expected = {r.key: r.value for r in cl.consume("t", from_beginning=True)}
    consumer = SnapshotConsumer(tmp_path, "t", start="earliest")
    got = {}
    while batch := consumer.poll():
        got.update((r.key, r.value) for r in batch)
    model = {b"k%d" % (j % 30): b"w%d" % j for j in range(3000)}
    model.update({b"k%d" % j: b"v%d" % (2999 * 10 + j) for j in range(10)})
    assert got == expected == model


def test_a_listing_taken_before_a_swap_reads_on_after_it(tmp_path):
    """Deterministic half of the race above: every segment file of the listing is gone before the read
    reaches it; the read lists again and goes on from the offset it had reached."""
    cfg = {"cleanup.policy": "compact", "segment.bytes": "1000", "min.cleanable.dirty.ratio": "0.01",
           "file.delete.delay.ms": "0"}
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1, cfg)
        cl.produce_batch("t", [(b"k%d" % (i % 10), b"v%d" % i) for i in range(500)], batch_bytes=200)
        snap = PartitionSnapshot.open(tmp_path, "t", 0)
        first = next(snap.batches(0))  # opens the first segment only
        assert first.base_offset == 0
        assert cl.clean("t").compactions  # every later segment the listing names is swapped away
        kept = {r.offset for r in cl.consume("t", from_beginning=True) if r.offset > first.last_offset}
        got = [(r.offset, r.value) for b in snap.batches(first.last_offset + 1) for r in b.records()
               if r.offset > first.last_offset]
        snap.close()
    offsets = [o for o, _ in got]
    assert offsets == sorted(set(offsets)) and offsets[-1] == 499  # in order, nothing twice, to the end
    assert all(v == b"v%d" % o for o, v in got)  # old bytes from the segment it held, new ones after
    assert kept <= set(offsets)  # nothing the cleaner kept was skipped


def test_a_segment_opened_before_a_merge_under_its_name_is_read_afresh(tmp_path):
    """A reader had opened the first segment; the cleaner then merges the first segments into one file
    that takes the first one's name. When the read reaches a segment swapped away it lists again, and
    the first segment must be opened again: read on from the old file, its records would end where
    that file ended and the offsets merged into the new one would pass for a gap cleaning left."""
    cfg = {"cleanup.policy": "compact", "segment.bytes": "1000", "min.cleanable.dirty.ratio": "0.01",
           "file.delete.delay.ms": "0"}
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1, cfg)
        cl.produce_batch("t", [(b"k%d" % i, b"v%d" % i) for i in range(150)], batch_bytes=120)  # no key twice
        snap = PartitionSnapshot.open(tmp_path, "t", 0)
        snap.segment(0)  # a reader has reached the first segment
        assert len(snap.bases) > 3
        cl.alter_topic_config("t", {"segment.bytes": "1000000"})
        assert cl.clean("t").compactions  # the closed segments merge into one, under base 0's name
        offsets = [o for b in snap.batches(0) for o in range(b.base_offset, b.last_offset + 1)]
        snap.close()
    assert offsets == list(range(150))  # every record, none skipped as a cleaned gap


def test_a_snapshot_starts_where_the_owner_moved_the_log_start(tmp_path):
    """A reader in another process sees the checkpointed log start offset (DeleteRecords moved it inside a
    segment), as the owner's Log does; a checkpoint beyond the log end is not believed."""
    from compactlog.consumer import SnapshotConsumer

    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1)
        cl.produce_batch("t", [(None, b"v%d" % i) for i in range(100)], batch_bytes=300)
        cl.log("t").increment_log_start_offset(37)
        cl.flush()
        with PartitionSnapshot.open(tmp_path, "t", 0) as snap:
            assert (snap.log_start_offset, snap.log_end_offset) == (37, 100)
        assert [r.offset for r in SnapshotConsumer(tmp_path, "t", start="earliest").poll()][:1] == [37]
    (tmp_path / "log-start-offset-checkpoint").write_text("0\n1\nt 0 500\n")
    with PartitionSnapshot.open(tmp_path, "t", 0) as snap:
        assert snap.log_start_offset == 0


def test_index_entries_of_the_active_segment_reach_the_files_at_once(tmp_path):
    """Another process reading the directory sees the owner's index entries while the owner runs, not
    only after a flush or close (each entry is written to the file as it is made, as Kafka's memory-mapped
    indexes make it visible)."""
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1, {"index.interval.bytes": "100"})
        cl.produce_batch("t", [(b"k%d" % i, b"v" * 100) for i in range(300)], batch_bytes=150)
        active = cl.log("t").active_segment
        assert active.offset_index.entries > 50
        assert active.offset_index.path.stat().st_size == active.offset_index.entries * 8
        assert active.time_index.path.stat().st_size == active.time_index.entries * 12
        with PartitionSnapshot.open(tmp_path, "t", 0) as snap:
            seg = snap.segment(0)
            assert seg.offset_index.entries == active.offset_index.entries
            assert next(snap.batches(250)).last_offset >= 250
