"""The data source's readCompacted option: the compacted view, as the API and the CLI read it."""

from __future__ import annotations

import compactlog
from compactlog.clock import MockTime


def test_read_compacted_matches_the_api_and_outlives_retention(spark, tmp_path):
    clock = MockTime()
    root = tmp_path / "d"
    with compactlog.open(root, time=clock) as cl:
        cl.create_topic("orders", 2, {"segment.bytes": "1200", "retention.ms": "1000", "file.delete.delay.ms": "0"})
        for i in range(400):
            cl.produce("orders", None if i % 53 == 0 else b"v%d" % i, key=b"k%d" % (i % 30), timestamp=clock.milliseconds())
        cl.compact_topic("orders")
        clock.sleep(5000)
        for i in range(20):
            cl.produce("orders", b"late%d" % i, key=b"k%d" % i, timestamp=clock.milliseconds())
        cl.clean("orders")  # retention removes the old live segments; the compacted view keeps them
        assert min(cl.beginning_offsets("orders").values()) > 0
        expected = sorted((r.partition, r.offset, r.key, r.value) for r in cl.consume("orders", from_beginning=True, read_compacted=True))
        whole = sorted((r.partition, r.offset, r.key, r.value) for r in cl.consume("orders", from_beginning=True))
    def reader():  # a DataFrameReader keeps every option set on it
        return spark.read.format("compactlog").option("path", str(root)).option("subscribe", "orders")

    got = sorted((r.partition, r.offset, r.key, r.value) for r in reader().option("readCompacted", "true").load().collect())
    assert got == [(p, o, bytes(k), None if v is None else bytes(v)) for p, o, k, v in expected]
    plain = reader().load().collect()
    assert sorted((r.partition, r.offset) for r in plain) == [(p, o) for p, o, _, _ in whole]
    assert len(got) > len(whole) - 20, "records trimmed from the live log are still in the compacted view"
