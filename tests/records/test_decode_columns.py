"""``decode_columns``: a run of batches decoded in one pass into the columns a columnar reader takes.

Its answer is held against the batch objects' own decoding (``RecordBatch.records``), which shares no
code with it past the record scan, over runs with null and empty keys and values, control batches,
compacted gaps, LogAppendTime batches and ranges that start and end inside batches; and every run it does
not decode (compressed, damaged, a timestamp beyond int64) must come back as None, so that the reader
takes the general path that decompresses or names the damage. Both implementations, where built.
"""

from __future__ import annotations

import struct
from array import array

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactlog.records import kernels
from compactlog.records.batch import LOG_APPEND_TIME, BatchInfo, RecordBatch, build_batch
from compactlog.records.codecs import Codec
from compactlog.records.control import COMMIT, build_end_txn_marker
from codec_libraries import DECOMPRESSED

TS = 1_700_000_000_000
LIMIT = 1 << 26  # the most a section may decompress to
TWIN = kernels._py
IMPLS = [TWIN] + ([kernels._impl] if kernels.NATIVE else [])
impls = pytest.mark.parametrize("impl", IMPLS, ids=lambda m: m.__name__.rsplit(".", 1)[-1])


def run_of(batches: list[bytes], lead: int = 3) -> tuple[bytes, array]:
    """Batches laid out in one buffer after ``lead`` other bytes, with the table a segment walk writes."""
    buf, table = bytearray(b"\xee" * lead), array("q")
    for b in batches:
        rb = RecordBatch(b)
        table.extend((len(buf), len(b), rb.base_offset, rb.last_offset))
        buf += b
    return bytes(buf), table


def expected(batches: list[bytes], start: int, end: int) -> list[tuple]:
    """(key, value, offset, timestamp in microseconds, timestamp type) of every record in [start, end)."""
    out = []
    for b in batches:
        rb = RecordBatch(b)
        if rb.is_control:
            continue
        for r in rb.records():
            if start <= r.offset < end:
                out.append((r.key, r.value, r.offset, r.timestamp * 1000, rb.timestamp_type))
    return out


def rows_of(got) -> list[tuple]:
    def column(col):
        offs = np.frombuffer(col.offsets, np.int32)
        valid = (np.ones(got.rows, bool) if col.validity is None
                 else np.unpackbits(np.frombuffer(col.validity, np.uint8), bitorder="little")[: got.rows].astype(bool))
        assert col.null_count == int((~valid).sum())
        return [bytes(col.values[offs[i] : offs[i + 1]]) if valid[i] else None for i in range(got.rows)]

    assert len(got.key.offsets) == len(got.value.offsets) == 4 * (got.rows + 1)
    return list(zip(column(got.key), column(got.value), np.frombuffer(got.offsets, np.int64).tolist(),
                    np.frombuffer(got.timestamps, np.int64).tolist(), np.frombuffer(got.timestamp_types, np.int32).tolist()))


values = st.none() | st.binary(max_size=40)
records = st.lists(st.tuples(values, values, st.integers(-(2**40), 2**40)), min_size=1, max_size=12)


@st.composite
def batch_lists(draw, codecs=(Codec.NONE,)) -> list[bytes]:
    batches, base = [], draw(st.integers(0, 2**40))
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["plain", "plain", "gaps", "log-append", "control"]))
        if kind == "control":
            batches.append(build_end_txn_marker(COMMIT, 0, producer_id=7, producer_epoch=0, base_offset=base,
                                                timestamp=draw(st.integers(0, 2**40))))
            base += 1
            continue
        recs = draw(records)
        keys, vals, stamps = [r[0] for r in recs], [r[1] for r in recs], [r[2] for r in recs]
        deltas = None
        if kind == "gaps":  # a cleaned batch: offsets with holes
            deltas = sorted(draw(st.lists(st.integers(0, 1000), min_size=len(recs), max_size=len(recs), unique=True)))
        info = BatchInfo(base_offset=base, timestamp_type=LOG_APPEND_TIME if kind == "log-append" else 0)
        batches.append(build_batch(keys, vals, stamps, info=info, offset_deltas=deltas, codec=draw(st.sampled_from(codecs)),
                                   max_timestamp=draw(st.integers(0, 2**40)) if kind == "log-append" else None))
        base = RecordBatch(batches[-1]).last_offset + 1 + draw(st.integers(0, 3))
    return batches


@impls
@settings(max_examples=150, deadline=None)
@given(batches=batch_lists(codecs=(Codec.NONE,) + DECOMPRESSED), data=st.data())
def test_the_columns_are_the_batches_records_in_the_range(impl, batches, data):
    buf, table = run_of(batches)
    first, last = RecordBatch(batches[0]).base_offset, RecordBatch(batches[-1]).last_offset
    start = data.draw(st.integers(first - 2, last + 2))
    end = data.draw(st.integers(start, last + 3))
    got = impl.decode_columns(buf, table, start, end, LIMIT)
    assert got is not None
    assert got.rows == len(rows_of(got))
    assert rows_of(got) == expected(batches, start, end)


@pytest.mark.skipif(not kernels.NATIVE, reason="the compiled kernels are not in use in this run")
@settings(max_examples=300, deadline=None)
@given(batches=batch_lists(codecs=(Codec.NONE, Codec.NONE, Codec.LZ4, Codec.ZSTD, Codec.GZIP)),
       flip=st.integers(0, 10**6), bit=st.integers(0, 7))
def test_both_implementations_give_the_same_answer_even_for_damaged_bytes(batches, flip, bit):
    """Uncompressed, both answer alike. Compressed, the compiled kernel decodes only the shape Kafka
    writes and leaves the rest to the Python codecs (its None sends the run there): what it decodes, the
    twin (which decompresses with those codecs) decodes the same."""
    buf, table = run_of(batches)
    damaged = bytearray(buf)
    damaged[flip % len(buf)] ^= 1 << bit  # no CRC is checked here: the reader checked it before
    compressed = any(RecordBatch(b).codec != Codec.NONE for b in batches)
    compiled, twin = (impl.decode_columns(buf, table, 0, 2**62, LIMIT) for impl in (kernels._impl, TWIN))
    assert compiled == twin or compressed and compiled is None  # (gzip and snappy: the twin's codecs only)
    if all(RecordBatch(b).codec in (Codec.NONE,) + DECOMPRESSED for b in batches):
        assert compiled is not None  # Kafka's shape: decoded here
    # Damaged bytes: the reader passes a bound only for runs whose CRCs it verified (the system's codec
    # library may notice damage otherwise than the Python codecs), so here compressed runs are declined.
    compiled, twin = (impl.decode_columns(bytes(damaged), table, 0, 2**62, 0) for impl in (kernels._impl, TWIN))
    assert compiled == twin
    if compressed:
        assert compiled is None


def with_field(batch: bytes, at: int, fmt: str, value: int) -> bytes:
    """``batch`` with one header field set (no CRC is checked by the kernel: the reader checked it)."""
    out = bytearray(batch)
    struct.pack_into(fmt, out, at, value)
    return bytes(out)


def plain(n: int = 3, base: int = 0, codec: Codec = Codec.NONE) -> bytes:
    return build_batch([b"k%d" % i for i in range(n)], [b"v" * i for i in range(n)], [1000 + i for i in range(n)],
                       codec=codec, info=BatchInfo(base_offset=base))


@impls
def test_runs_it_does_not_decode_are_none_for_the_general_path(impl):
    good = plain(3, 0)
    for codec in (Codec.GZIP, Codec.SNAPPY):
        buf, table = run_of([good, plain(3, 3, codec)])
        assert impl.decode_columns(buf, table, 0, 10, LIMIT) is None  # other codecs: decompressed elsewhere
        assert impl.decode_columns(buf, table[:4], 0, 10, LIMIT).rows == 3

    buf, table = run_of([good, plain(3, 3)])
    short = array("q", table)
    short[5] -= 1  # a size other than the header's
    assert impl.decode_columns(buf, short, 0, 10, LIMIT) is None
    outside = array("q", table)
    outside[4] = len(buf) - 10  # past the buffer
    assert impl.decode_columns(buf, outside, 0, 10, LIMIT) is None

    too_many = with_field(good, 57, ">i", (len(good) - 61) // 7 + 1)
    assert impl.decode_columns(*run_of([too_many]), 0, 10, LIMIT) is None
    negative = with_field(good, 57, ">i", -1)
    assert impl.decode_columns(*run_of([negative]), 0, 10, LIMIT) is None
    fewer = with_field(good, 57, ">i", 2)  # bytes left after the records it counts
    assert impl.decode_columns(*run_of([fewer]), 0, 10, LIMIT) is None
    more = with_field(good, 57, ">i", 4)  # a record missing
    assert impl.decode_columns(*run_of([more]), 0, 10, LIMIT) is None
    torn = bytearray(good)
    torn[61] = 0x7F  # the first record's length runs past the batch
    assert impl.decode_columns(*run_of([bytes(torn)]), 0, 10, LIMIT) is None

    late = build_batch([b"k"], [b"v"], [2**63 - 1], info=BatchInfo(base_offset=0))
    over = build_batch([b"k", b"k"], [b"v", b"v"], [2**63 - 2, 2**63 - 1])
    over = with_field(over, 27, ">q", 2**63 - 1)  # base + the second record's delta leaves int64
    assert impl.decode_columns(*run_of([late]), 0, 10, LIMIT).rows == 1
    assert impl.decode_columns(*run_of([over]), 0, 10, LIMIT) is None

    with pytest.raises(ValueError, match="4 int64"):
        impl.decode_columns(buf, array("q", [3, len(good), 0]), 0, 10, LIMIT)


@impls
def test_an_empty_range_or_run_gives_no_rows(impl):
    buf, table = run_of([plain(3, 10)])
    for start, end in ((0, 10), (13, 20), (11, 11), (12, 5)):
        got = impl.decode_columns(buf, table, start, end, LIMIT)
        assert got.rows == 0 and got.key.offsets == got.value.offsets == b"\0" * 4
        assert got.offsets == got.timestamps == got.timestamp_types == b""
    got = impl.decode_columns(b"", array("q"), 0, 10, LIMIT)
    assert got.rows == 0 and got.key.validity is None and got.key.null_count == 0


@impls
@pytest.mark.parametrize("codec", [Codec.LZ4, Codec.ZSTD])
def test_compressed_sections_are_decoded_within_their_bound_or_left_to_the_codecs(impl, codec):
    if impl is not TWIN and codec not in DECOMPRESSED:
        pytest.skip(f"no system {codec.config_name} library to load")
    batch = build_batch([b"k%d" % i for i in range(300)], [b"v" * 50] * 300, [TS + i for i in range(300)], codec=codec)
    body = len(RecordBatch(batch)._records_payload())  # the section's decompressed size
    got = impl.decode_columns(*run_of([batch]), 0, 300, LIMIT)
    assert rows_of(got) == expected([batch], 0, 300)
    assert impl.decode_columns(*run_of([batch]), 0, 300, 0) is None  # no bound given: not decompressed here
    assert impl.decode_columns(*run_of([batch]), 0, 300, 1000) is None  # more than the bound: the codecs say so
    assert impl.decode_columns(*run_of([batch]), 0, 300, body).rows == 300  # exactly the bound: decoded
    assert impl.decode_columns(*run_of([batch]), 0, 300, body - 1) is None
    cut = bytearray(batch)
    cut[8:12] = struct.pack(">i", len(batch) - 12 - 9)  # the section cut short (its frame's end is gone)
    assert impl.decode_columns(*run_of([bytes(cut[:-9])]), 0, 300, LIMIT) is None


@pytest.mark.skipif(not kernels.NATIVE, reason="the compiled kernels are not in use in this run")
def test_the_compiled_kernel_leaves_shapes_kafka_does_not_write_to_the_codecs():
    lz4 = bytearray(build_batch([b"k"] * 20, [b"v" * 30] * 20, codec=Codec.LZ4))
    lz4[61 + 4] &= ~0x20  # the frame's blocks marked linked, which Kafka refuses
    assert kernels._impl.decode_columns(*run_of([bytes(lz4)]), 0, 50, LIMIT) is None
    zstd = build_batch([b"k"] * 20, [b"v" * 30] * 20, codec=Codec.ZSTD)
    skippable = struct.pack("<II", 0x184D2A50, 3) + b"abc"  # a skippable frame before the data
    mixed = bytearray(zstd[:61] + skippable + zstd[61:])
    mixed[8:12] = struct.pack(">i", len(mixed) - 12)
    assert kernels._impl.decode_columns(*run_of([bytes(mixed)]), 0, 50, LIMIT) is None


@pytest.mark.skipif(not kernels.NATIVE, reason="the compiled kernels are not in use in this run")
def test_a_buffer_or_table_changed_by_another_thread_never_sends_a_write_astray():
    """Between the counting pass and the writing pass (both without the GIL) another thread rewrites the
    buffer so that keys and values split the same records differently, or moves a table row outside the
    buffer: each call answers, declines or says the data changed; none writes or reads out of bounds."""
    import threading

    n = 20000
    a = build_batch([b"k" * 10] * n, [b"v" * 5] * n, [1000] * n)
    b = build_batch([b"k" * 5] * n, [b"v" * 10] * n, [1000] * n)
    assert len(a) == len(b)
    buf, table = bytearray(a), array("q", [0, len(a), 0, n - 1])
    lz4 = build_batch([b"k%d" % i for i in range(n)], [b"v" * 50] * n, [1000] * n, codec=Codec.LZ4)
    moving = array("q", [0, len(lz4), 0, n - 1])
    stop = threading.Event()

    def rewrite() -> None:
        while not stop.is_set():
            buf[:] = b
            buf[:] = a
            moving[0] = 1 << 40
            moving[0] = 0

    t = threading.Thread(target=rewrite)
    t.start()
    outcomes = set()
    try:
        for _ in range(150):
            try:
                got = kernels._impl.decode_columns(buf, table, 0, 2**62, LIMIT)
                outcomes.add("declined" if got is None else "decoded")
                if got is not None:
                    assert got.rows == n and len(got.key.offsets) == len(got.value.offsets) == 4 * (n + 1)
            except ValueError as exc:
                assert "changed while it was decoded" in str(exc)
                outcomes.add("changed")
            got = kernels._impl.decode_columns(lz4, moving, 0, 2**62, LIMIT)
            assert got is None or got.rows == n
    finally:
        stop.set()
        t.join()
    assert outcomes  # (which outcomes occur depends on the scheduler; that none crashes does not)
