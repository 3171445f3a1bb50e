"""Partition.locate's ``max_offset`` (a read_committed fetch ends below the last stable offset) and
Partition.fetch_upper_bound (how far Fetch looks for aborted transactions), over many segments and
index entries, against the batches themselves."""

from __future__ import annotations

import random

import compactlog
from compactlog.records.batch import build_batch, iter_batches


def test_locate_ends_below_max_offset_and_the_upper_bound_covers_the_range(tmp_path):
    rnd = random.Random(7)
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1, config={"segment.bytes": "20000", "index.interval.bytes": "300"})
        part = cl.partition("t", 0)
        bases = []
        for i in range(300):
            n = rnd.randint(1, 6)
            bases.append(part.append(build_batch([None] * n, [b"x" * rnd.randint(10, 200)] * n)).first_offset)
        end = part.log_end_offset
        assert len(part.segment_sizes()) > 5
        for _ in range(400):
            offset = rnd.randrange(end)
            bound = rnd.choice(bases[1:] + [end])  # a batch boundary, as the LSO always is
            max_bytes = rnd.choice([1, 500, 5000, 50000])
            found = part.locate(offset, max_bytes, min_one_message=True, max_offset=bound)
            plain = part.locate(offset, max_bytes, min_one_message=True)
            if offset >= bound:
                assert found is None
                continue
            got = [b for _, b in iter_batches(found.read())] if found is not None else []
            whole = [b for _, b in iter_batches(plain.read())]
            # the bounded range is the unbounded one cut before the first batch at or above the bound
            assert [b.base_offset for b in got] == [b.base_offset for b in whole if b.last_offset < bound]
            if not got:
                continue
            upper = part.fetch_upper_bound(found)
            assert got[-1].last_offset < upper <= end  # above every offset handed out
            # and close: not past the start of the segment after the range's
            segs = [base for base, _ in part.segment_sizes()]
            assert upper <= min([s for s in segs if s > got[-1].base_offset] + [end])
        assert part.locate(end, 100, max_offset=end) is None
