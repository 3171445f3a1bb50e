"""Records still stored below the log start offset: what a count of the stored records leaves out to
agree with a consumer, after DeleteRecords moves the start inside a batch, a segment, or past several,
and after the cleaner rewrites the files (the remembered count follows the files)."""

from __future__ import annotations

import compactlog


def readable(cl, topic: str) -> int:
    return len(list(cl.consume(topic, 0, from_beginning=True)))


def stored(cl, topic: str) -> int:
    return sum(s.records for s in cl.partition(topic, 0).segment_summaries())


def test_stored_minus_below_start_is_what_a_consumer_reads(tmp_path):
    with compactlog.open(str(tmp_path / "data")) as cl:
        cl.create_topic("t", 1, {"segment.bytes": "1024", "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01",
                                 "min.compaction.lag.ms": "0", "segment.ms": "1"})
        for i in range(12):  # batches of 5 over several small segments; keys repeat, for the cleaner
            cl.produce_batch("t", [(b"k%d" % (j % 7), b"v" * 40) for j in range(5)], partition=0)
        part = cl.partition("t", 0)
        assert len(part.segment_summaries()) > 2
        assert part.records_below_start() == 0
        for start in (2, 5, 13, 31, 31, 47):  # inside a batch, on a boundary, segments later; twice the same
            cl.delete_records("t", 0, start)
            below = cl.partition("t", 0).records_below_start()
            assert stored(cl, "t") - below == readable(cl, "t") == 60 - start, start
        before = stored(cl, "t")
        cl.clean("t")  # rewrites the segments below the active one: fewer records stored, new files
        assert stored(cl, "t") < before
        below = cl.partition("t", 0).records_below_start()
        assert stored(cl, "t") - below == readable(cl, "t")
