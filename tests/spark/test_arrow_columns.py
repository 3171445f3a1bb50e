"""The Spark source's Arrow batches: runs of uncompressed batches are decoded by one kernel call
(``decode_columns``); compressed or damaged runs and headers take the general scan. Both must hand out
the same rows, so each read here is made twice, once with the kernel's path turned off, over logs with
null and empty keys and values, transactions and their markers, compacted gaps, LogAppendTime batches,
and ranges that start and end inside batches. No Spark session: these are the worker's batches.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
import txn_support as tx
from codec_libraries import DECOMPRESSED

import compactlog
from compactlog.errors import CorruptRecordError
from compactlog.records import kernels
from compactlog.spark import arrow

TS = 1_700_000_000_000


def read(path, topic: str, start: int, end: int, *, general: bool = False, **kw) -> pa.Table | None:
    """Every batch ``read_partition`` yields, as one table (None when it yields none)."""
    saved = arrow.run_to_arrow
    if general:
        arrow.run_to_arrow = lambda *a: False
    try:
        batches = list(arrow.read_partition(str(path), topic, 0, start, end, kw.pop("include_headers", False), **kw))
    finally:
        arrow.run_to_arrow = saved
    return pa.Table.from_batches(batches) if batches else None


def both_ways(path, topic: str, start: int, end: int, **kw) -> pa.Table | None:
    fast, general = read(path, topic, start, end, **kw), read(path, topic, start, end, general=True, **kw)
    assert (fast is None) == (general is None)
    if fast is not None:
        assert fast.schema == general.schema
        assert fast.equals(general), (start, end)
    return fast


@pytest.fixture
def decoded(monkeypatch):
    """How many runs the kernel decoded (so a test knows the fast path was the one taken)."""
    calls = {"decoded": 0, "declined": 0}
    real = kernels.decode_columns

    def counting(*args):
        got = real(*args)
        calls["declined" if got is None else "decoded"] += 1
        return got

    monkeypatch.setattr(kernels, "decode_columns", counting)
    return calls


def test_plain_logs_with_nulls_read_the_same_both_ways_for_any_range(tmp_path, decoded):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1, {"segment.bytes": "2000"})
        rows = [(None if i % 7 == 0 else b"k%d" % (i % 13), None if i % 5 == 0 else b"" if i % 11 == 0 else b"v%d" % i)
                for i in range(400)]
        cl.produce_batch("t", rows, timestamp=TS, batch_bytes=200)
        end = cl.end_offsets("t")[0]
    for start, stop in ((0, end), (3, end - 2), (1, 2), (57, 191), (end, end + 5), (end - 1, end + 5)):
        got = both_ways(tmp_path, "t", start, stop)
        assert got is None or got.column("offset").to_pylist() == list(range(start, min(stop, end)))
    table = both_ways(tmp_path, "t", 0, end)
    assert table.column("key").null_count == 58 and table.column("value").null_count == 80
    assert table.column("value").to_pylist()[11] == b""
    assert decoded["decoded"] > 0 and decoded["declined"] == 0


def test_transactions_compacted_gaps_and_log_append_time_read_the_same_both_ways(tmp_path, decoded):
    built = tx.build(tmp_path)
    for start in range(0, built.end, 3):
        for stop in (start + 1, start + 4, built.end):
            both_ways(tmp_path, tx.TOPIC, start, stop)
            both_ways(tmp_path, tx.TOPIC, start, stop, isolation="read_committed")
    values = both_ways(tmp_path, tx.TOPIC, 0, built.end).column("value").to_pylist()
    assert values == tx.ALL  # no marker is a row

    other = tmp_path / "more"
    with compactlog.open(other) as cl:
        cl.create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": "600", "min.cleanable.dirty.ratio": "0.01",
                                 "message.timestamp.type": "LogAppendTime"})
        for round_ in range(6):
            cl.produce_batch("c", [(b"k%d" % (i % 9), b"r%d-%d" % (round_, i)) for i in range(30)], batch_bytes=150)
        cl.clean("c")
        end = cl.end_offsets("c")[0]
    table = both_ways(other, "c", 0, end)
    offsets = table.column("offset").to_pylist()
    assert len(offsets) < end and offsets == sorted(offsets)  # cleaned: gaps between the offsets kept
    assert set(table.column("timestampType").to_pylist()) == {1}
    for start in range(0, end, 7):
        both_ways(other, "c", start, start + 11)
        both_ways(other, "c", start, end, read_compacted=True)
    assert decoded["decoded"] > 0


@pytest.mark.parametrize("codec", ["lz4", "zstd", "gzip", "snappy"])
def test_compressed_topics_read_the_same_both_ways(tmp_path, decoded, codec):
    """lz4 and zstd runs are decompressed by the kernel (with the system's libraries, where they are);
    gzip and snappy runs by the Python codecs, in the general path."""
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("z", 1, {"segment.bytes": "3000"})
        cl.produce_batch("z", [(None if i % 9 == 0 else b"k%d" % i, b"v%d" % i * (i % 4)) for i in range(300)],
                         compression=codec, timestamp=TS, batch_bytes=400)
    for start, stop in ((0, 300), (7, 233), (150, 151)):
        assert both_ways(tmp_path, "z", start, stop).column("offset").to_pylist() == list(range(start, stop))
    if codec in ("gzip", "snappy"):
        assert decoded["decoded"] == 0 and decoded["declined"] > 0
    elif any(c.config_name == codec for c in DECOMPRESSED):
        assert decoded["decoded"] > 0 and decoded["declined"] == 0


def test_headers_take_the_general_path(tmp_path, decoded):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("u", 1)
        cl.produce_batch("u", [(b"k%d" % i, b"v%d" % i, (("h", b"x"),)) for i in range(50)], timestamp=TS)
    with_headers = both_ways(tmp_path, "u", 5, 45, include_headers=True)
    assert with_headers.column("headers").to_pylist()[0] == [{"key": "h", "value": b"x"}]
    assert decoded["decoded"] == 0  # headers: the general path decodes them
    assert both_ways(tmp_path, "u", 5, 45).num_rows == 40 and decoded["decoded"] > 0  # without: the kernel


def test_a_damaged_record_is_named_whichever_path_reads_it(tmp_path):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("d", 1)
        cl.produce_batch("d", [(b"k%d" % i, b"value-%03d" % i) for i in range(30)], timestamp=TS, batch_bytes=100)
    log = next((tmp_path / "d-0").glob("*.log"))
    raw = bytearray(log.read_bytes())
    raw[raw.index(b"value-013") - 1] = 0x7F  # the value's length varint: longer than the record
    log.write_bytes(bytes(raw))
    for general in (False, True):
        with pytest.raises(CorruptRecordError, match=r"d-0/00000000000000000000\.log position \d+"):
            read(tmp_path, "d", 0, 30, general=general, check_crcs=False)
    with pytest.raises(CorruptRecordError, match="(?i)crc|corrupt"):  # with CRCs checked, the CRC says it first
        read(tmp_path, "d", 0, 30)
