"""A damaged batch on disk stops cleaning of its partition; it is never re-encoded under a valid CRC."""

from __future__ import annotations

import compactlog
from compactlog.clock import MockTime


def test_a_flipped_bit_makes_the_partition_uncleanable_and_leaves_its_files(tmp_path):
    clock = MockTime()
    with compactlog.open(tmp_path / "d", time=clock) as cl:
        for t in ("bad", "good"):
            cl.create_topic(t, 1, {"cleanup.policy": "compact", "segment.bytes": "2000",
                                   "min.cleanable.dirty.ratio": "0.01"})
            for i in range(300):
                cl.produce(t, b"value-%d" % i, key=b"k%d" % (i % 20))
        path = cl.log("bad").segments[1].log_path
    raw = bytearray(path.read_bytes())
    raw[61 + 9] ^= 0x01  # a value byte of the segment's first record: only the CRC can tell
    path.write_bytes(bytes(raw))
    bad_files = {p.name: p.read_bytes() for p in path.parent.iterdir()}
    with compactlog.open(tmp_path / "d", time=clock) as cl:
        rounds = cl.clean().compactions
        assert [(r.topic, r.partition) for r in rounds] == [("good", 0)]
        assert ("bad", 0) in cl.cleaner.manager.uncleanable
        assert cl.cleaner.metrics()["uncleanable-partitions-count"] == 1
    # (the producer state, read for the last stable offset the cleaner stops at, is snapshotted at close)
    after = {p.name: p.read_bytes() for p in path.parent.iterdir() if not p.name.endswith(".snapshot")}
    assert after == {n: b for n, b in bad_files.items() if not n.endswith(".snapshot")}
