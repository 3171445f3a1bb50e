"""The record kernels, through ``compactlog.records.kernels``.

The suite runs twice: normally (the compiled kernels when built) and with ``COMPACTLOG_NO_EXTENSIONS=1``
(the Python twin), so every behavioural test here checks whichever implementation is bound. Where the
compiled module is in use, the parity tests also hold it to the twin directly: same bytes, same values,
same error texts.
"""

from __future__ import annotations

import gc
import mmap
import os
import threading
import tracemalloc

import google_crc32c
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_murmur2

from compactlog.records import kernels
from compactlog.records.batch import Record
from compactlog.errors import CorruptRecordError
from compactlog.records.results import KernelError

NCOLS = kernels.NCOLS
TWIN = kernels._py
COMPILED = kernels._impl if kernels.NATIVE else None
needs_compiled = pytest.mark.skipif(COMPILED is None, reason="the compiled kernels are not in use in this run")

# spec §1.8: the whole 97-byte batch; its records section starts after the 61-byte header
GOLDEN_BATCH = bytes.fromhex(
    "000000000000000000000055ffffffff02e58cf1ff00000000000100000000000454c300000000000454c3ffffffffffffffff"
    "ffffffffffff0000000220000000086b6579310c76616c756531002400e1bf2202086b6579320c76616c75653200"
)
GOLDEN_RECORDS = GOLDEN_BATCH[61:]
INT32_MIN, INT32_MAX, INT64_MIN, INT64_MAX = -(2**31), 2**31 - 1, -(2**63), 2**63 - 1


def scan(data, count: int, impl=kernels) -> np.ndarray:
    cols = np.empty((count, NCOLS), dtype=np.int64)
    assert impl.scan_records(data, count, cols) == len(data)
    return cols


def decode(data, count: int, base_offset: int = 0, base_ts: int = 0, override=None, impl=kernels) -> list:
    return impl.decode_records(Record, "t", 0, 0, data, count, base_offset, base_ts, override)


def record(body: bytes) -> bytes:
    """One record: the varint length (bodies here stay under 64 bytes) and the body."""
    assert len(body) < 64
    return bytes([len(body) << 1]) + body


# --- the golden vector ------------------------------------------------------------------------------
def test_golden_vector_encodes_to_the_spec_bytes():
    assert kernels.encode_records([b"key1", b"key2"], [b"value1", b"value2"], [283843, 1234], 283843, None, None) == GOLDEN_RECORDS
    assert kernels.crc32c(GOLDEN_BATCH[21:]) == 3851219455


def test_golden_vector_scans_and_decodes():
    cols = scan(GOLDEN_RECORDS, 2)
    assert cols[:, kernels.C_POS].tolist() == [0, 17]
    assert cols[:, kernels.C_END].tolist() == [17, 36]
    assert cols[:, kernels.C_OFFSET_DELTA].tolist() == [0, 1]
    assert cols[:, kernels.C_TS_DELTA].tolist() == [0, 1234 - 283843]
    assert cols[:, kernels.C_KEY_LEN].tolist() == [4, 4]
    assert cols[:, kernels.C_VAL_LEN].tolist() == [6, 6]
    assert cols[:, kernels.C_HDR_COUNT].tolist() == [0, 0]
    recs = decode(GOLDEN_RECORDS, 2, base_offset=0, base_ts=283843)
    assert recs == [
        Record("t", 0, 0, 283843, 0, b"key1", b"value1", ()),
        Record("t", 0, 1, 1234, 0, b"key2", b"value2", ()),
    ]
    assert all(type(r) is Record for r in recs)
    assert kernels.summarize_records(GOLDEN_RECORDS, 2) == (0, 1234 - 283843, 0, True, 0)


# --- varint boundaries ------------------------------------------------------------------------------
# value -> zigzag varint bytes (computed by hand from the spec's zigzag rule)
VARINTS = {
    0: "00", 1: "02", -1: "01", 63: "7e", -64: "7f", 64: "8001", -65: "8101",
    8191: "fe7f", -8192: "ff7f", 8192: "808001", -8193: "818001",
    2**20: "80808001", -(2**20): "ffff7f", 2**27: "8080808001", -(2**27): "ffffff7f",
    INT32_MAX: "feffffff0f", INT32_MIN: "ffffffff0f",
    INT64_MAX: "feffffffffffffffff01", INT64_MIN: "ffffffffffffffffff01",
}


@pytest.mark.parametrize("n", list(VARINTS))
def test_timestamp_delta_varlong_boundaries(n):
    data = kernels.encode_records([None], [None], [n], 0, None, None)
    assert data == record(b"\x00" + bytes.fromhex(VARINTS[n]) + b"\x00\x01\x01\x00")
    assert scan(data, 1)[0, kernels.C_TS_DELTA] == n
    assert decode(data, 1, base_ts=0)[0].timestamp == n


@pytest.mark.parametrize("n", [n for n in VARINTS if INT32_MIN <= n <= INT32_MAX])
def test_offset_delta_varint_boundaries(n):
    data = kernels.encode_records([None], [None], [7], 7, [n], None)
    assert data == record(b"\x00\x00" + bytes.fromhex(VARINTS[n]) + b"\x01\x01\x00")
    assert scan(data, 1)[0, kernels.C_OFFSET_DELTA] == n
    assert decode(data, 1, base_offset=2**40)[0].offset == 2**40 + n


@pytest.mark.parametrize("n", [INT32_MAX + 1, INT32_MIN - 1, INT64_MAX, INT64_MIN, 2**70])
def test_offset_delta_beyond_int32_is_refused(n):
    with pytest.raises(ValueError) as exc:
        kernels.encode_records([None], [None], [0], 0, [n], None)
    assert str(exc.value) == f"offset delta {n} does not fit in 32 bits"


@pytest.mark.parametrize("ts, base", [(2**63, 0), (INT64_MIN, 1), (2**80, -(2**80)), (0, 2**64)])
def test_timestamp_delta_beyond_int64_is_refused(ts, base):
    with pytest.raises(ValueError) as exc:
        kernels.encode_records([None], [None], [ts], base, None, None)
    assert str(exc.value) == f"timestamp delta {ts - base} does not fit in 64 bits"


def test_timestamp_delta_in_range_encodes_even_when_the_timestamp_is_not():
    data = kernels.encode_records([None], [None], [2**63], 1, None, None)
    assert scan(data, 1)[0, kernels.C_TS_DELTA] == INT64_MAX


def test_decoded_offsets_past_int64_stay_exact():
    data = kernels.encode_records([None, None], [None, None], [0, 5], 0, None, None)
    recs = decode(data, 2, base_offset=INT64_MAX, base_ts=0)
    assert [r.offset for r in recs] == [INT64_MAX, INT64_MAX + 1]


@pytest.mark.parametrize("base, deltas, bad", [
    (INT64_MAX, [0, 5], 1), (INT64_MAX - 4, [4, 5], 1), (INT64_MIN, [0, -1], 1), (INT64_MIN + 3, [-4, 0], 0),
    (5, [INT64_MAX - 5, INT64_MAX - 4], 1),
])
def test_a_timestamp_outside_int64_is_refused(base, deltas, bad):
    """A timestamp is stored as an int64: base + delta beyond it is corruption, not a number to pass on."""
    data = kernels.encode_records([None, None], [None, None], deltas, 0, None, None)
    with pytest.raises(ValueError) as exc:
        decode(data, 2, base_ts=base)
    assert str(exc.value) == (f"base timestamp {base} + timestamp delta {deltas[bad]} of record {bad} "
                              "is outside the int64 range")
    assert len(decode(data, 2, base_ts=base, override=7)) == 2  # LogAppendTime adds nothing


def test_ten_byte_varlong_keeps_its_low_64_bits():
    # a 10th byte above 1 overflows 64 bits: its high bits fall off, as in Kafka's readVarlong
    data = record(b"\x00" + b"\xff" * 9 + b"\x7f" + b"\x00\x01\x01\x00")
    assert scan(data, 1)[0, kernels.C_TS_DELTA] == INT64_MIN


# --- malformed input: every error of the twin, with its exact words ----------------------------------
MALFORMED = [
    pytest.param(b"", 1, "premature EOF: expected 1 records, found 0", id="empty"),
    pytest.param(GOLDEN_RECORDS, 3, "premature EOF: expected 3 records, found 2", id="fewer-records"),
    pytest.param(GOLDEN_RECORDS[:-1], 2, "premature EOF: record of 18 bytes runs past the batch", id="past-batch"),
    pytest.param(GOLDEN_RECORDS + b"\x00", 2, "1 bytes still remaining after 2 records", id="remaining"),
    pytest.param(GOLDEN_RECORDS, 1, "19 bytes still remaining after 1 records", id="remaining-record"),
    pytest.param(GOLDEN_RECORDS, 0, "36 bytes still remaining after 0 records", id="zero-count"),
    pytest.param(b"\x00", 1, "invalid record length 0", id="length-0"),
    pytest.param(b"\x01", 1, "invalid record length -1", id="length-neg"),
    pytest.param(b"\x80", 1, "premature EOF while reading a varint", id="length-eof"),
    pytest.param(b"\xff\xff\xff\xff\xff\x01", 1, "varint is longer than 5 bytes", id="length-long"),
    pytest.param(record(b"\x00" + b"\xff" * 10 + b"\x01\x00\x01\x01\x00"), 1, "varint is longer than 10 bytes",
                 id="ts-long"),
    pytest.param(record(b"\x00\x80"), 1, "premature EOF while reading a varint", id="ts-eof"),
    pytest.param(record(b"\x00\x00"), 1, "premature EOF while reading a varint", id="offset-missing"),
    pytest.param(record(b"\x00\x00\xff\xff\xff\xff\xff\x01\x01\x01\x00"), 1, "varint is longer than 5 bytes",
                 id="offset-long"),
    pytest.param(record(b"\x00\x00\x00\x07\x00\x00\x00"), 1, "invalid key length -4", id="key-neg"),
    pytest.param(record(b"\x00\x00\x00\x06\x00\x00"), 1, "premature EOF: key of 3 bytes runs past the record",
                 id="key-past"),
    pytest.param(record(b"\x00\x00\x00\x01\x03\x00"), 1, "invalid value length -2", id="value-neg"),
    pytest.param(record(b"\x00\x00\x00\x01\x0a\x00"), 1, "premature EOF: value of 5 bytes runs past the record",
                 id="value-past"),
    pytest.param(record(b"\x00\x00\x00\x01\x01"), 1, "premature EOF while reading a varint", id="count-missing"),
    pytest.param(record(b"\x00\x00\x00\x01\x01\x03"), 1, "invalid header count -2", id="count-neg"),
    pytest.param(record(b"\x00\x00\x00\x01\x01\x02\x01\x00"), 1, "invalid header key length -1", id="hkey-null"),
    pytest.param(record(b"\x00\x00\x00\x01\x01\x02\x04a"), 1,
                 "premature EOF: header key of 2 bytes runs past the record", id="hkey-past"),
    pytest.param(record(b"\x00\x00\x00\x01\x01\x02\x02a"), 1, "premature EOF while reading a varint",
                 id="hvalue-missing"),
    pytest.param(record(b"\x00\x00\x00\x01\x01\x02\x02a\x03"), 1, "invalid header value length -2", id="hvalue-neg"),
    pytest.param(record(b"\x00\x00\x00\x01\x01\x02\x02a\x02"), 1,
                 "premature EOF: header value of 1 bytes runs past the record", id="hvalue-past"),
    pytest.param(record(b"\x00\x00\x00\x01\x01\x04\x02a\x01"), 1, "premature EOF while reading a varint",
                 id="second-header-missing"),
    pytest.param(record(b"\x00\x00\x00\x01\x01\x00\x00"), 1, "record length 7 does not match its 6 bytes of content",
                 id="length-mismatch"),
    pytest.param(GOLDEN_RECORDS + record(b"\x00\x00\x00\x01\x01\x00\x00"), 3,
                 "record length 7 does not match its 6 bytes of content", id="third-record-bad"),
]


@pytest.mark.parametrize("data, count, message", MALFORMED)
def test_malformed_records_are_refused_with_the_twins_words(data, count, message):
    cols = np.empty((count, NCOLS), dtype=np.int64)
    for call in (
        lambda: kernels.scan_records(data, count, cols),
        lambda: decode(data, count),
        lambda: kernels.summarize_records(data, count),
    ):
        with pytest.raises(KernelError) as exc:
            call()
        assert str(exc.value) == message


@needs_compiled
@pytest.mark.parametrize("data, count, message", MALFORMED)
def test_malformed_records_give_identical_messages_in_both(data, count, message):
    messages = set()
    for impl in (TWIN, COMPILED):
        for call in (
            lambda: impl.scan_records(data, count, np.empty((count, NCOLS), dtype=np.int64)),
            lambda: decode(data, count, impl=impl),
            lambda: impl.summarize_records(data, count),
            lambda: impl.scan_many(data, np.array([0]), np.array([len(data)]), np.array([count]),
                                   np.empty((count, NCOLS), dtype=np.int64)),
        ):
            with pytest.raises(KernelError) as exc:
                call()
            assert exc.value.section in (None, 0)
            messages.add((type(exc.value), exc.value.reason, str(exc.value).removeprefix("section 0: ")))
    assert messages == {(KernelError, message, message)}


def test_a_malformed_later_record_is_reported_before_a_timestamp_out_of_range():
    """The twin scans every record before decoding any: the compiled kernel reports errors in that order."""
    good = kernels.encode_records([b"k"], [b"v"], [5], 0, None, None)
    with pytest.raises(ValueError, match="outside the int64 range"):
        decode(good, 1, base_ts=INT64_MAX)
    for tail, count, message in ((b"\x00", 2, "invalid record length 0"), (b"", 2, "premature EOF: expected 2 records, found 1"),
                                 (good + b"\x00", 2, "1 bytes still remaining after 2 records")):
        with pytest.raises(ValueError) as exc:
            decode(good + tail, count, base_ts=INT64_MAX)
        assert str(exc.value) == message


# every kind of invalid UTF-8 a key can hold: stray continuation, truncated sequences, overlong forms,
# surrogates, code points above U+10FFFF, bytes that never occur
NOT_UTF8 = [b"\xff", b"\x80", b"a\xbf", b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98", b"\xc0\xaf", b"\xc1\xbf",
            b"\xe0\x80\xaf", b"\xe0\x9f\xbf", b"\xf0\x80\x80\xaf", b"\xf0\x8f\xbf\xbf", b"\xed\xa0\x80",
            b"\xed\xbf\xbf", b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xfe", b"ascii-then-\xe9",
            b"12345678\xff", b"\xe9 then ascii for 8+", b"\xe2\x82\xac\xe2\x82"]
UTF8 = [b"", b"plain", b"\x00nul", b"caf\xc3\xa9", b"\xe2\x82\xac", b"\xed\x9f\xbf", b"\xee\x80\x80",
        b"\xef\xbf\xbf", b"\xf0\x90\x80\x80", b"\xf4\x8f\xbf\xbf", b"\xc2\x80", b"\xdf\xbf", b"\xe0\xa0\x80",
        b"exactly8\xc3\xa9 and more ascii after it"]


@pytest.mark.parametrize("key", NOT_UTF8)
def test_a_header_key_that_is_not_utf8_reads_with_replacement_characters(key):
    data = kernels.encode_records([b"k"], [b"v"], [0], 0, None, [((key, b"v"), (b"ok", None))])
    assert decode(data, 1)[0].headers == ((key.decode("utf-8", "replace"), b"v"), ("ok", None))
    assert "\ufffd" in decode(data, 1)[0].headers[0][0]
    assert kernels.decode_headers(data, int(scan(data, 1)[0, kernels.C_HDR_POS]), 2)[0][0] == key.decode("utf-8", "replace")


@pytest.mark.parametrize("key", NOT_UTF8 + UTF8)
def test_summarize_counts_records_with_a_header_key_that_is_not_utf8(key):
    valid = key in UTF8
    if valid:  # the lists say what Python's strict codec says
        key.decode("utf-8")
    else:
        with pytest.raises(UnicodeDecodeError):
            key.decode("utf-8")
    headers = [(), ((b"a", b"1"), (key, None)), ((key, b"x"), (key, b"y")), ((b"b", None),)]
    data = kernels.encode_records([b"k"] * 4, [b"v"] * 4, [0] * 4, 0, None, headers)
    assert kernels.summarize_records(data, 4) == (0, 0, 0, True, 0 if valid else 2)
    if COMPILED is not None:
        assert TWIN.summarize_records(data, 4) == COMPILED.summarize_records(data, 4)


@needs_compiled
@settings(max_examples=400, deadline=None)
@given(key=st.binary(max_size=20) | st.text(max_size=6).map(lambda t: t.encode("utf-8", "surrogatepass")))
def test_both_kernels_agree_on_any_header_key(key):
    data = kernels.encode_records([b"k"], [b"v"], [0], 0, None, [((key, None),)])
    assert COMPILED.summarize_records(data, 1) == TWIN.summarize_records(data, 1)
    assert decode(data, 1, impl=COMPILED) == decode(data, 1, impl=TWIN)



def test_a_str_header_key_is_written_as_its_utf8():
    as_bytes = kernels.encode_records([b"k"], [b"v"], [0], 0, None, [[("trace-ü".encode(), b"1"), (b"n", None)]])
    assert kernels.encode_records([b"k"], [b"v"], [0], 0, None, [[("trace-ü", b"1"), ("n", None)]]) == as_bytes
    assert decode(as_bytes, 1)[0].headers == (("trace-ü", b"1"), ("n", None))



@pytest.mark.parametrize("impl", [TWIN, kernels], ids=["twin", "in-use"])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_rebased_records_equal_records_encoded_against_the_new_base(impl, data):
    """The cleaner's delete-horizon path: moving the base timestamp re-encodes only the timestamp deltas."""
    n = data.draw(st.integers(1, 12))
    blob = st.none() | st.binary(max_size=300)
    keys, values = data.draw(st.lists(blob, min_size=n, max_size=n)), data.draw(st.lists(blob, min_size=n, max_size=n))
    headers = data.draw(st.lists(st.lists(st.tuples(st.text(max_size=5), blob), max_size=3), min_size=n, max_size=n))
    base, new_base = data.draw(st.integers(0, 2**45)), data.draw(st.integers(0, 2**45))
    ts = data.draw(st.lists(st.integers(0, 2**45), min_size=n, max_size=n))
    deltas = sorted(data.draw(st.lists(st.integers(0, 10_000), min_size=n, max_size=n, unique=True)))
    section = kernels.encode_records(keys, values, ts, base, deltas, headers)
    cols = np.empty((n, NCOLS), dtype=np.int64)
    kernels.scan_records(section, n, cols)
    rows = np.array(sorted(data.draw(st.sets(st.integers(0, n - 1), min_size=1))), dtype=np.int64)
    pick = rows.tolist()
    expected = kernels.encode_records([keys[i] for i in pick], [values[i] for i in pick], [ts[i] for i in pick],
                                      new_base, [deltas[i] for i in pick], [headers[i] for i in pick])
    assert impl.rebase_records(section, cols, rows, base - new_base) == expected


@pytest.mark.parametrize("impl", [TWIN, kernels], ids=["twin", "in-use"])
def test_a_rebase_reads_the_record_as_written_even_with_a_long_length_varint(impl):
    """A length written in more bytes than needed is still a valid record: the attributes byte is the
    one after it, wherever that is."""
    body = bytearray(kernels.encode_records([b"k"], [b"v"], [5], 0, None, None)[1:])
    body[0] = 0x01  # the (unused) attributes byte, kept as it is
    z = len(body) << 1
    section = bytes([(z & 0x7F) | 0x80, 0x00]) + bytes(body)
    cols = np.empty((1, NCOLS), dtype=np.int64)
    kernels.scan_records(section, 1, cols)
    moved = impl.rebase_records(section, cols, np.array([0], dtype=np.int64), -2)
    assert moved[1] == 0x01 and moved[2] == 6  # attributes kept; zigzag(5 - 2) = 6

@pytest.mark.parametrize("impl", [TWIN, kernels], ids=["twin", "in-use"])
def test_a_rebase_that_overflows_is_refused(impl):
    section = kernels.encode_records([None], [None], [2**62], 0, None, None)
    cols = np.empty((1, NCOLS), dtype=np.int64)
    kernels.scan_records(section, 1, cols)
    with pytest.raises(ValueError, match="does not fit in 64 bits"):
        impl.rebase_records(section, cols, np.array([0], dtype=np.int64), 2**62)

@pytest.mark.parametrize("impl", [TWIN, kernels], ids=["twin", "in-use"])
def test_flat_headers_with_offsets_encode_like_a_list_per_record(impl):
    per_record = [[("a", b"1"), ("b", None)], [], [(b"c", b"3")]]
    flat, offsets = [("x", b"unused"), ("a", b"1"), ("b", None), (b"c", b"3")], [1, 3, 3, 4]
    args = ([b"k0", None, b"k2"], [b"v0", b"v1", None], [5, 6, 7], 5, None)
    assert impl.encode_records(*args, flat, offsets) == kernels.encode_records(*args, per_record)

BAD_CALLS = [
    pytest.param(lambda k: k.scan_records(GOLDEN_RECORDS, -1, np.empty((0, NCOLS), np.int64)),
                 "invalid record count -1", id="scan-negative"),
    pytest.param(lambda k: k.decode_records(Record, None, 0, 0, GOLDEN_RECORDS, -2, 0, 0, None),
                 "invalid record count -2", id="decode-negative"),
    pytest.param(lambda k: k.summarize_records(GOLDEN_RECORDS, -3), "invalid record count -3", id="summarize-negative"),
    pytest.param(lambda k: k.scan_records(GOLDEN_RECORDS, 2, np.empty((1, NCOLS), np.int64)),
                 "out must be a writable int64 array of at least 2 rows of 10 columns", id="out-short"),
    pytest.param(lambda k: k.scan_records(GOLDEN_RECORDS, 2, np.empty((2, NCOLS), np.int32)),
                 "out must be a writable int64 array of at least 2 rows of 10 columns", id="out-int32"),
    pytest.param(lambda k: k.scan_records(GOLDEN_RECORDS, 2, np.empty((2, NCOLS + 1), np.int64)),
                 "out must be a writable int64 array of at least 2 rows of 10 columns", id="out-width"),
    pytest.param(lambda k: k.scan_records(GOLDEN_RECORDS, 2, np.empty(2 * NCOLS, np.int64)),
                 "out must be a writable int64 array of at least 2 rows of 10 columns", id="out-flat"),
    pytest.param(lambda k: k.scan_many(GOLDEN_RECORDS, np.array([0, 17]), np.array([17]), np.array([1, 1]),
                                       np.empty((2, NCOLS), np.int64)),
                 "starts, ends and counts must have the same length", id="many-lengths"),
    pytest.param(lambda k: k.scan_many(GOLDEN_RECORDS, np.array([-1]), np.array([17]), np.array([1]),
                                       np.empty((2, NCOLS), np.int64)),
                 "section 0 does not fit the buffers", id="many-negative-start"),
    pytest.param(lambda k: k.scan_many(GOLDEN_RECORDS, np.array([0]), np.array([17]), np.array([-1]),
                                       np.empty((2, NCOLS), np.int64)),
                 "section 0 does not fit the buffers", id="many-negative-count"),
    pytest.param(lambda k: k.scan_many(GOLDEN_RECORDS, np.array([0, 17]), np.array([17, 37]), np.array([1, 1]),
                                       np.empty((2, NCOLS), np.int64)),
                 "section 1 does not fit the buffers", id="many-past-data"),
    pytest.param(lambda k: k.scan_many(GOLDEN_RECORDS, np.array([0, 17]), np.array([17, 36]), np.array([1, 1]),
                                       np.empty((1, NCOLS), np.int64)),
                 "section 1 does not fit the buffers", id="many-out-short"),
    pytest.param(lambda k: k.encode_records([b"k"], [], [0], 0, None, None),
                 "keys, values and timestamps must have the same length", id="encode-values"),
    pytest.param(lambda k: k.encode_records([b"k"], [b"v"], [], 0, None, None),
                 "keys, values and timestamps must have the same length", id="encode-timestamps"),
    pytest.param(lambda k: k.encode_records([b"k"], [b"v"], [0], 0, [0, 1], None),
                 "offset_deltas must have one entry per record", id="encode-deltas"),
    pytest.param(lambda k: k.encode_records([b"k"], [b"v"], [0], 0, None, []),
                 "headers must have one entry per record", id="encode-headers"),
    pytest.param(lambda k: k.encode_records([b"k"], [b"v"], [0], 0, None, [[(b"a",)]]),
                 "not enough values to unpack (expected 2, got 1)", id="encode-header-short"),
    pytest.param(lambda k: k.encode_records([b"k"], [b"v"], [0], 0, None, [[(b"a", b"b", b"c")]]),
                 "too many values to unpack (expected 2)", id="encode-header-long"),
    pytest.param(lambda k: k.partition_for_keys([b"k"], 0), "num_partitions must be positive, got 0", id="partitions-0"),
    pytest.param(lambda k: k.partition_for_keys([None], -3), "num_partitions must be positive, got -3",
                 id="partitions-neg"),
    pytest.param(lambda k: k.encode_records([b"k"], [b"v"], [0], 0, None, [("h", b"1")], [0]),
                 "header_offsets must have one entry per record and one more", id="header-offsets-short"),
    pytest.param(lambda k: k.encode_records([b"k"], [b"v"], [0], 0, None, [("h", b"1")], [0, 2]),
                 "header_offsets must rise from 0 to at most len(headers)", id="header-offsets-past-end"),
    pytest.param(lambda k: k.encode_records([b"k", b"l"], [b"v", b"w"], [0, 0], 0, None, [("h", b"1")], [1, 0, 1]),
                 "header_offsets must rise from 0 to at most len(headers)", id="header-offsets-falling"),
]


@pytest.mark.parametrize("call, message", BAD_CALLS)
def test_bad_calls_are_refused_with_the_twins_words(call, message):
    with pytest.raises(ValueError) as exc:
        call(kernels)
    assert str(exc.value) == message


@needs_compiled
@pytest.mark.parametrize("call, message", BAD_CALLS)
def test_bad_calls_give_identical_messages_in_both(call, message):
    got = []
    for impl in (TWIN, COMPILED):
        with pytest.raises(ValueError) as exc:
            call(impl)
        got.append((type(exc.value), str(exc.value)))
    assert got[0] == got[1] and got[0][1] == message


def test_a_null_header_key_is_a_type_error():
    with pytest.raises(TypeError):
        kernels.encode_records([b"k"], [b"v"], [0], 0, None, [[(None, b"v")]])


def test_buffers_are_given_back_after_errors():
    """A bytearray with a live buffer export cannot be resized: resizing proves every path released it."""
    data = bytearray(GOLDEN_RECORDS + b"\x00")
    for call in (
        lambda: kernels.scan_records(data, 2, np.empty((2, NCOLS), np.int64)),
        lambda: kernels.scan_records(data, 2, np.empty((1, NCOLS), np.int64)),
        lambda: decode(data, 2),
        lambda: kernels.summarize_records(data, 2),
        lambda: kernels.encode_records([data, data], [data], [0, 0], 0, None, None),
        lambda: kernels.encode_records([data], [data], [0], 0, None, [[(data, data), (data,)]]),
        lambda: kernels.encode_records([data], [data], [0], 0, [2**40], None),
    ):
        with pytest.raises(ValueError):
            call()
        data.append(0)
        del data[-1]
    kernels.crc32c(data)
    kernels.murmur2(data)
    data.append(0)


def test_error_paths_do_not_leak():
    bad = GOLDEN_RECORDS + record(b"\x00\x00\x00\x01\x01\x00\x00")
    late_ts = kernels.encode_records([b"k", b"k"], [b"v" * 100, b"v"], [0, 5], 0, None, [((b"\xff", b"v"),), ()])

    def churn() -> None:
        for _ in range(300):
            for call in (
                lambda: decode(bad, 3),
                lambda: decode(late_ts, 2, base_ts=INT64_MAX - 1),  # fails on the second record
                lambda: kernels.encode_records([b"k" * 50] * 3, [b"v" * 100] * 3, [0, 0, 2**64], 0, None, None),
                lambda: kernels.encode_records([b"k"], [b"v"], [0], 0, None, [[(b"a" * 100, b"b" * 100), (b"a",)]]),
            ):
                with pytest.raises(ValueError):
                    call()

    churn()  # warm caches
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        churn()
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 100_000, f"{grown} bytes kept after 1,200 failing calls"


# --- record contents ----------------------------------------------------------------------------------
def test_nulls_empties_headers_and_offset_gaps():
    keys = [None, b"", b"k", b"k2", None]
    values = [b"v", None, b"", None, b"x" * 300]
    headers = [(), ((b"h", None),), ((b"a", b""), (b"b", b"1")), ((b"", b"empty key"),), ()]
    deltas = [0, 3, 4, 10, 1000]
    ts = [5, 4, 100, -1, 2**45]
    data = kernels.encode_records(keys, values, ts, 5, deltas, headers)
    cols = scan(data, 5)
    assert cols[:, kernels.C_KEY_LEN].tolist() == [-1, 0, 1, 2, -1]
    assert cols[:, kernels.C_VAL_LEN].tolist() == [1, -1, 0, -1, 300]
    assert cols[:, kernels.C_HDR_COUNT].tolist() == [0, 1, 2, 1, 0]
    assert cols[:, kernels.C_OFFSET_DELTA].tolist() == deltas
    recs = decode(data, 5, base_offset=50, base_ts=5)
    assert [r.key for r in recs] == keys
    assert [r.value for r in recs] == values
    assert [r.offset for r in recs] == [50 + d for d in deltas]
    assert [r.timestamp for r in recs] == ts
    assert [r.headers for r in recs] == [(), (("h", None),), (("a", b""), ("b", b"1")), (("", b"empty key"),), ()]
    assert all(type(r.headers) is tuple for r in recs)
    assert kernels.summarize_records(data, 5) == (2, -6, 2**45 - 5, False, 0)
    assert kernels.decode_headers(data, int(cols[2, kernels.C_HDR_POS]), 2) == (("a", b""), ("b", b"1"))


def test_decode_fills_every_field_and_log_append_time_overrides():
    data = kernels.encode_records([b"k", None], [b"v", b"w"], [10, 20], 10, [0, 2], None)
    recs = kernels.decode_records(Record, "topic-a", 7, 1, data, 2, 100, 10, 999)
    assert recs == [Record("topic-a", 7, 100, 999, 1, b"k", b"v", ()), Record("topic-a", 7, 102, 999, 1, None, b"w", ())]
    assert recs[0]._fields == Record._fields
    assert kernels.decode_records(Record, None, -1, 0, b"", 0, 0, 0, None) == []


def test_any_buffer_and_any_sequence_are_accepted(tmp_path):
    keys = (b"a", bytearray(b"b"), memoryview(b"xcx")[1:2])
    data = kernels.encode_records(keys, [b"1", b"2", b"3"], (1, 2, 3), 1, (0, 1, 2), [[], ((b"h", b"v"),), [[b"i", None]]])
    assert data == kernels.encode_records([b"a", b"b", b"c"], [b"1", b"2", b"3"], [1, 2, 3], 1, None,
                                          [(), ((b"h", b"v"),), ((b"i", None),)])
    expected = decode(data, 3)
    padded = b"junk" + data + b"tail"
    path = tmp_path / "records"
    path.write_bytes(data)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        for buf in (bytearray(data), memoryview(padded)[4 : 4 + len(data)], m):
            assert decode(buf, 3) == expected
            assert scan(buf, 3).tolist() == scan(data, 3).tolist()
            assert kernels.summarize_records(buf, 3) == kernels.summarize_records(data, 3)
    bigger = np.full((5, NCOLS), -7, dtype=np.int64)
    kernels.scan_records(data, 3, bigger)
    assert bigger[:3].tolist() == scan(data, 3).tolist() and (bigger[3:] == -7).all()


headers_strategy = st.lists(
    st.tuples(st.text(max_size=8).map(str.encode), st.one_of(st.none(), st.binary(max_size=8))), max_size=3
).map(tuple)
records_strategy = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=40)),
        st.one_of(st.none(), st.binary(max_size=300)),
        st.integers(min_value=-(2**62), max_value=2**62 - 1),  # any two differ by an int64 delta
        headers_strategy,
    ),
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(recs=records_strategy, gaps=st.lists(st.integers(min_value=1, max_value=2**20), min_size=30, max_size=30),
       base_offset=st.integers(min_value=0, max_value=2**62))
def test_encode_scan_decode_round_trip(recs, gaps, base_offset):
    keys = [r[0] for r in recs]
    values = [r[1] for r in recs]
    ts = [r[2] for r in recs]
    headers = [r[3] for r in recs]
    deltas = np.cumsum(gaps[: len(recs)]).tolist()
    base_ts = ts[0] if ts else 0
    data = kernels.encode_records(keys, values, ts, base_ts, deltas, headers)
    if COMPILED is not None:
        assert data == TWIN.encode_records(keys, values, ts, base_ts, deltas, headers)
    cols = scan(data, len(recs))
    assert cols[:, kernels.C_OFFSET_DELTA].tolist() == deltas
    assert (base_ts + cols[:, kernels.C_TS_DELTA]).tolist() == ts
    for col, expected in (((kernels.C_KEY_POS, kernels.C_KEY_LEN), keys), ((kernels.C_VAL_POS, kernels.C_VAL_LEN), values)):
        got = [None if n < 0 else data[p : p + n] for p, n in cols[:, list(col)].tolist()]
        assert got == expected
    out = decode(data, len(recs), base_offset=base_offset, base_ts=base_ts)
    assert [r.offset for r in out] == [base_offset + d for d in deltas]
    assert [r.key for r in out] == keys and [r.value for r in out] == values and [r.timestamp for r in out] == ts
    assert [r.headers for r in out] == [tuple((k.decode(), v) for k, v in h) for h in headers]
    if COMPILED is not None:
        assert out == decode(data, len(recs), base_offset=base_offset, base_ts=base_ts, impl=TWIN)
        assert COMPILED.summarize_records(data, len(recs)) == TWIN.summarize_records(data, len(recs))


# --- CRC-32C ------------------------------------------------------------------------------------------
CRC_SIZES = [0, 1, 2, 7, 8, 9, 15, 16, 63, 255, 256, 767, 768, 769, 4097, 24575, 24576, 24577, 49152 + 768 + 5,
             65536, 65537, 100_003, 1 << 20]


@pytest.mark.parametrize("n", CRC_SIZES)
def test_crc32c_matches_google_crc32c(n):
    b = np.random.default_rng(n).integers(0, 256, n + 8, dtype=np.uint8).tobytes()
    assert kernels.crc32c(b[:n]) == google_crc32c.value(b[:n])
    for skew in range(1, 8):  # every misalignment of a view into a larger buffer
        assert kernels.crc32c(memoryview(b)[skew : skew + n]) == google_crc32c.value(b[skew : skew + n])
    assert kernels.crc32c(bytearray(b[:n])) == google_crc32c.value(b[:n])


@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=5000), start=st.integers(min_value=0, max_value=64))
def test_crc32c_matches_google_crc32c_on_random_slices(data, start):
    view = memoryview(data)[start:]
    assert kernels.crc32c(view) == google_crc32c.value(bytes(view))


def test_crc32c_over_mmap_and_strided_views(tmp_path):
    payload = np.random.default_rng(5).integers(0, 256, 300_001, dtype=np.uint8).tobytes()
    path = tmp_path / "segment"
    path.write_bytes(payload)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        assert kernels.crc32c(m) == google_crc32c.value(payload)
        assert kernels.crc32c(memoryview(m)[21:1000]) == google_crc32c.value(payload[21:1000])
    assert kernels.crc32c(memoryview(payload)[::3]) == google_crc32c.value(payload[::3])
    assert kernels.crc32c(np.frombuffer(payload[:800], dtype=np.int64)) == google_crc32c.value(payload[:800])


def test_kernels_give_the_same_answers_from_many_threads():
    """crc32c over large buffers and scans let go of the GIL: concurrent calls must not disturb each other."""
    big = np.random.default_rng(9).integers(0, 256, 3 << 20, dtype=np.uint8).tobytes()
    keys = [b"key-%d" % i for i in range(2000)]
    data = kernels.encode_records(keys, [b"v" * 100] * 2000, list(range(2000)), 0, None, None)
    want_crc, want_cols = google_crc32c.value(big), scan(data, 2000)
    errors: list[str] = []

    def work() -> None:
        for _ in range(5):
            if kernels.crc32c(big) != want_crc:
                errors.append("crc")
            if scan(data, 2000).tolist() != want_cols.tolist():
                errors.append("scan")

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


# --- murmur2 and the default partitioner ----------------------------------------------------------------
# from Kafka's UtilsTest.testMurmur2 (signed, as Java returns them)
KAFKA_MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize("key", list(KAFKA_MURMUR2))
def test_murmur2_matches_kafka(key):
    assert kernels.murmur2(key) == KAFKA_MURMUR2[key]


@settings(max_examples=300, deadline=None)
@given(key=st.binary(max_size=100))
def test_murmur2_matches_kafka_python(key):
    h = kernels.murmur2(key)
    assert -(2**31) <= h < 2**31
    assert h & 0xFFFFFFFF == kafka_murmur2(key)
    assert kernels.murmur2(bytearray(key)) == h


@settings(max_examples=100, deadline=None)
@given(keys=st.lists(st.one_of(st.none(), st.binary(max_size=30)), max_size=50), n=st.integers(min_value=1, max_value=1000))
def test_partition_for_keys_is_kafkas_default_partitioner(keys, n):
    expected = [-1 if k is None else (kafka_murmur2(k) & 0x7FFFFFFF) % n for k in keys]
    assert kernels.partition_for_keys(keys, n) == expected
    assert kernels.partition_for_keys(tuple(keys), n) == expected


# --- the module as a whole -------------------------------------------------------------------------------
def test_compiled_kernels_are_in_use_on_ci():
    """CI installs with a compiler; a silent fall back to the twin there is a broken build."""
    if os.environ.get("CI") and not os.environ.get("COMPACTLOG_NO_EXTENSIONS"):
        assert kernels.NATIVE, "CI expects the compiled kernels to be built by the install"


def test_both_implementations_provide_every_kernel():
    for name in kernels.KERNELS:
        assert callable(getattr(TWIN, name)), name
        assert getattr(kernels, name) is getattr(kernels._impl, name)
        if COMPILED is not None:
            assert callable(getattr(COMPILED, name)), name


def test_header_versions_pass_over_header_keys_that_are_not_utf8():
    hdrs = [((b"\xff", b"9"), (b"v", b"42")), ((b"v", (7).to_bytes(8, "big")),), ()]
    data = kernels.encode_records([b"a", b"b", b"c"], [b"1", b"2", b"3"], [0, 0, 0], 0, None, hdrs)
    out = np.empty(3, np.int64)
    kernels.header_versions(data, scan(data, 3), b"v", out)
    assert out.tolist() == [42, 7, -1]


def test_versioned_offset_map_lookup_of_a_null_key_reads_no_version():
    data = kernels.encode_records([b"k", None], [b"v", b"w"], [0, 0], 0, None, None)
    cols = scan(data, 2)
    slots = 16
    table, versions = np.zeros(slots * TWIN.SLOT, np.uint8), np.zeros(slots, np.int64)
    kernels.offset_map_put(table, slots, 10, 0, data, cols, 100, 0, 0, versions, np.array([5, 6], np.int64))
    out, vout = np.empty(2, np.int64), np.empty(2, np.int64)
    kernels.offset_map_get(table, slots, data, cols, out, versions, vout)
    assert out.tolist() == [100, -1] and vout.tolist() == [5, INT64_MIN]


@pytest.mark.parametrize("versioned", [False, True])
def test_a_grown_offset_map_answers_as_a_map_built_at_its_final_size(versioned):
    """offset_map_grow re-places entries in place (some land on slots whose entry is not moved yet);
    every key keeps its offset and version, and both implementations leave the same bytes."""
    n = 300
    data = kernels.encode_records([b"key-%d" % (i % 230) for i in range(n)], [b"v"] * n, [0] * n, 0, None, None)
    cols = scan(data, n)
    row_versions = np.arange(n, dtype=np.int64) % 7
    results = []
    for impl in [TWIN] + ([COMPILED] if COMPILED is not None else []):
        tables = []
        for first in (256, 1000):  # grown from 256 slots, and built at 1000 from the start
            table = np.zeros(1000 * TWIN.SLOT, np.uint8)
            versions = np.zeros(1000, np.int64) if versioned else None
            extra = (versions, row_versions) if versioned else ()
            put = impl.offset_map_put(table, first, 200 if first == 256 else 900, 0, data, cols, 10, 0, 0, *extra)
            if first == 256:
                assert put.full and put.next_row < n
                impl.offset_map_grow(table, 256, 1000, *((versions,) if versioned else ()))
                put = impl.offset_map_put(table, 1000, 900, put.size, data, cols, 10, put.next_row, 0, *extra)
            assert put.size == 230 and not put.full
            out, vout = np.empty(n, np.int64), np.empty(n, np.int64)
            impl.offset_map_get(table, 1000, data, cols, out, *((versions, vout) if versioned else ()))
            tables.append((out.tolist(), vout.tolist() if versioned else None))
            results.append(table.tobytes() + (versions.tobytes() if versioned else b""))
        assert tables[0] == tables[1]
    assert len(results) < 3 or results[0] == results[2]


@pytest.mark.parametrize("impl", [TWIN] + ([COMPILED] if COMPILED is not None else []), ids=lambda m: m.__name__)
def test_scan_batches_scans_batches_where_they_lie_after_checking_what_ensure_valid_checks(impl):
    log = bytearray(b"\0" * 5 + GOLDEN_BATCH * 3)
    views = [memoryview(log)[5 + i * 97 : 5 + (i + 1) * 97] for i in range(3)]

    def run(views, counts=(2, 2, 2), verify=True, rows_out=6):
        cols, rows = np.zeros((rows_out, NCOLS), np.int64), np.zeros(len(views) + 1, np.int64)
        got = impl.scan_batches(log, views, np.array(counts[: len(views)], np.int64),
                                np.array([100, 200, 300][: len(views)], np.int64), verify, cols, rows)
        return got, cols, rows

    got, cols, rows = run(views)
    assert got == -1 and rows.tolist() == [0, 2, 4, 6]
    assert cols[:, kernels.C_OFFSET_DELTA].tolist() == [100, 101, 200, 201, 300, 301]
    assert cols[2].tolist() == (scan(GOLDEN_RECORDS, 2)[0] + np.isin(np.arange(NCOLS), kernels.POSITION_COLUMNS)
                                * (5 + 97 + 61) + np.eye(NCOLS, dtype=np.int64)[kernels.C_OFFSET_DELTA] * 200).tolist()
    assert run(views, counts=(2, 0, 2))[2].tolist() == [0, 2, 2, 4]  # a control batch: no rows
    assert run(views, rows_out=5)[0] == -2
    assert run(views, counts=(2, 12, 2))[0] == 1  # more records than 36 bytes can hold
    log[102 + 70] ^= 1  # a record byte of the second batch: its CRC no longer matches
    assert run(views)[0] == 1
    with pytest.raises(KernelError) as exc:  # unchecked, the record does not parse, in section 1
        run(views, verify=False)
    assert exc.value.section == 1
    log[102 + 70] ^= 1
    log[199 + 16] = 1  # the third batch's magic is only checked when asked
    assert run(views)[0] == 2 and run(views, verify=False)[0] == -1
    assert run([memoryview(log)[5:101]], verify=False)[0] == 0  # a byte short of the size its header declares
    with pytest.raises(ValueError, match="does not lie in the base buffer"):
        impl.scan_batches(bytes(log), views, np.zeros(3, np.int64), np.zeros(3, np.int64), False,
                          np.zeros((6, NCOLS), np.int64), np.zeros(4, np.int64))


@pytest.mark.parametrize("impl", [TWIN] + ([COMPILED] if COMPILED is not None else []), ids=lambda m: m.__name__)
def test_verify_batches_finds_the_first_batch_that_ensure_valid_refuses(impl):
    """A bulk reader's CRC check: rows of (position, size, base, last) as the segment walk writes them;
    the answer is the first row that fails what RecordBatch.ensure_valid checks, or -1."""
    from array import array

    from compactlog.records.batch import RecordBatch

    log = bytearray(b"\0" * 5 + GOLDEN_BATCH * 3)
    table = array("q", [v for i in range(3) for v in (5 + i * 97, 97, 100 * i, 100 * i + 1)])
    assert impl.verify_batches(log, table) == -1
    assert impl.verify_batches(log, array("q")) == -1  # nothing to check
    for at, flipped in ((102 + 70, 1), (199 + 16, 2), (5 + 21, 0), (199 + 96, 2)):  # record, magic, attributes, last byte
        log[at] ^= 1
        assert impl.verify_batches(log, table) == flipped
        with pytest.raises(CorruptRecordError):  # the batch object says why
            RecordBatch(bytes(log[table[4 * flipped] : table[4 * flipped] + 97])).ensure_valid()
        log[at] ^= 1
    short = array("q", table)
    short[4 * 2 + 1] = 96  # a size other than the one the header declares
    assert impl.verify_batches(log, short) == 2
    outside = array("q", table)
    outside[4 * 2] = len(log) - 50  # a batch that would run past the buffer
    assert impl.verify_batches(log, outside) == 2
    small = array("q", table)
    small[1] = 60  # less than the header
    assert impl.verify_batches(log, small) == 0
    with pytest.raises(ValueError, match="4 int64"):
        impl.verify_batches(log, array("q", [0, 97, 0]))


@needs_compiled
def test_the_compiled_batch_kernels_read_the_header_where_batch_py_lays_it_out():
    from compactlog.records import batch

    fields = dict(COMPILED.BATCH_HEADER)
    assert fields.pop("size") == batch.HEADER_SIZE
    assert fields == {name: batch.FIELD_OFFSETS[name] for name in fields}


@pytest.mark.parametrize("impl", [TWIN] + ([COMPILED] if COMPILED is not None else []), ids=lambda m: m.__name__)
def test_assemble_batches_builds_what_assemble_batch_builds_from_each_batchs_records(impl):
    from compactlog.records import batch as rb

    data = kernels.encode_records([b"a", None, b"c", b"d"], [b"1", b"2", None, b"4"], [10, 12, 9, 30], 10, None,
                                  [[("h", b"x")], [], [], []])
    cols = scan(data, 4)
    rows = np.array([0, 2, 3, 1], np.int64)
    bounds, shifts = np.array([[0, 2], [2, 4], [4, 4]], np.int64), np.array([0, -5, 0], np.int64)
    infos = [rb.BatchInfo(base_offset=100), rb.BatchInfo(base_offset=7, producer_id=3), rb.BatchInfo(base_offset=9)]
    expected, headers = [], b""
    for info, (lo, hi), shift, count in zip(infos, bounds.tolist(), shifts.tolist(), (2, 2, 0)):
        body = (kernels.rebase_records(data, cols, rows[lo:hi], shift) if shift
                else kernels.gather_records(data, cols, rows[lo:hi]))
        expected.append(rb.assemble_batch(info, 0x40, 5, 15, 40, count, body))
        headers += rb.HEADER.pack(info.base_offset, 0, info.partition_leader_epoch, rb.MAGIC, 0, 0x40, 5, 15, 40,
                                  info.producer_id, info.producer_epoch, info.base_sequence, count)
    ends = np.zeros(3, np.int64)
    assert impl.assemble_batches(data, cols, rows, bounds, shifts, headers, ends) == b"".join(expected)
    assert ends.tolist() == np.cumsum([len(e) for e in expected]).tolist()
    with pytest.raises(IndexError):
        impl.assemble_batches(data, cols, rows, np.array([[0, 5]], np.int64), shifts[:1], headers[:61], ends)
    with pytest.raises(ValueError, match="does not fit in 64 bits"):
        impl.assemble_batches(data, cols, rows, bounds[1:2], np.array([INT64_MAX], np.int64), headers[:61], ends)


def test_gather_column_builds_arrow_binary_arrays():
    import pyarrow as pa

    keys = [b"a", None, b"", b"longer key", None]
    values = [b"1", b"22", None, b"", b"5" * 300]
    data = kernels.encode_records(keys, values, [0] * 5, 0, None, None)
    cols = scan(data, 5)
    for col, expected in (((kernels.C_KEY_POS, kernels.C_KEY_LEN), keys), ((kernels.C_VAL_POS, kernels.C_VAL_LEN), values)):
        offsets, vals, validity, nulls = kernels.gather_column(data, cols, *col)
        arr = pa.Array.from_buffers(pa.binary(), 5, [None if validity is None else pa.py_buffer(validity),
                                                     pa.py_buffer(offsets), pa.py_buffer(vals)], null_count=nulls)
        assert arr.to_pylist() == expected


@pytest.mark.parametrize("impl", [TWIN] + ([COMPILED] if COMPILED is not None else []), ids=lambda m: m.__name__)
@given(rows=st.lists(st.tuples(st.none() | st.binary(max_size=300), st.none() | st.binary(max_size=300),
                               st.integers(-(1 << 40), 1 << 40)), max_size=40))
@settings(max_examples=60, deadline=None)
def test_encode_columns_writes_what_encode_records_writes(impl, rows):
    """A columnar writer's records (Arrow's layout: spans into one data buffer, -1 for null) encode to
    the very bytes the per-record kernel writes for the same keys, values and timestamps."""
    def column(items):
        data, spans = bytearray(b"pad"), []  # spans need not start at 0
        for item in items:
            spans += [len(data), -1 if item is None else len(item)]
            data += item or b""
        return bytes(data), np.array(spans, dtype=np.int64)

    keys, values, stamps = [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]
    kd, ks = column(keys)
    vd, vs = column(values)
    base = stamps[0] if stamps else 0
    got = impl.encode_columns(kd, ks, vd, vs, np.array(stamps, dtype=np.int64), base)
    assert got == kernels.encode_records(keys, values, stamps, base, None, None)
    decoded = decode(got, len(rows), 100, base)
    assert [(r.offset, r.key, r.value, r.timestamp) for r in decoded] == [
        (100 + i, k, v, t) for i, (k, v, t) in enumerate(rows)]


@pytest.mark.parametrize("impl", [TWIN] + ([COMPILED] if COMPILED is not None else []), ids=lambda m: m.__name__)
def test_encode_columns_refuses_spans_outside_their_data_and_deltas_beyond_64_bits(impl):
    kd, vd = b"abc", b"value"
    ts = np.array([0, 0], dtype=np.int64)
    ok = np.array([0, 3, 1, -1], dtype=np.int64)
    assert impl.encode_columns(kd, ok, vd, np.array([0, 5, 0, 0], dtype=np.int64), ts, 0)
    for spans, column, what in ((np.array([0, 3, 1, 3], dtype=np.int64), "k", "the key of record 1 lies outside key_data"),
                                (np.array([0, 5, -1, 1], dtype=np.int64), "v", "the value of record 1 lies outside value_data"),
                                (np.array([6, 0, 0, 0], dtype=np.int64), "v", "the value of record 0 lies outside value_data"),
                                (np.array([0, -2, 0, 0], dtype=np.int64), "k", "the key of record 0 lies outside key_data")):
        k, v = (spans, np.array([0, 5, 0, 0], dtype=np.int64)) if column == "k" else (ok, spans)
        with pytest.raises(ValueError, match=what):
            impl.encode_columns(kd, k, vd, v, ts, 0)
    with pytest.raises(ValueError, match="must hold a pair per timestamp"):
        impl.encode_columns(kd, ok[:2], vd, ok, ts, 0)
    with pytest.raises(ValueError, match="must be a C-contiguous int64 array"):
        impl.encode_columns(kd, ok.astype(np.int32), vd, ok, ts, 0)
    huge = np.array([(1 << 63) - 1], dtype=np.int64)
    with pytest.raises(ValueError, match="does not fit in 64 bits"):
        impl.encode_columns(kd, ok[:2], vd, ok[:2], huge, -5)


@pytest.mark.parametrize("impl", [TWIN] + ([COMPILED] if COMPILED is not None else []), ids=lambda m: m.__name__)
@given(keys=st.lists(st.none() | st.binary(max_size=40), max_size=50), partitions=st.integers(1, 50))
@settings(max_examples=60, deadline=None)
def test_partition_spans_is_kafkas_partition_of_each_key_of_a_column(impl, keys, partitions):
    data, spans = bytearray(b"xx"), []
    for k in keys:
        spans += [len(data), -1 if k is None else len(k)]
        data += k or b""
    out = np.full(len(keys), 99, dtype=np.int64)
    impl.partition_spans(bytes(data), np.array(spans, dtype=np.int64), partitions, out)
    assert out.tolist() == kernels.partition_for_keys(keys, partitions) == [
        -1 if k is None else (kafka_murmur2(k) & 0x7FFFFFFF) % partitions for k in keys]


@pytest.mark.parametrize("impl", [TWIN] + ([COMPILED] if COMPILED is not None else []), ids=lambda m: m.__name__)
def test_partition_spans_refuses_spans_outside_the_data_before_writing_any(impl):
    out = np.full(2, 7, dtype=np.int64)
    with pytest.raises(ValueError, match="the key of record 1 lies outside key_data"):
        impl.partition_spans(b"abc", np.array([0, 3, 2, 2], dtype=np.int64), 3, out)
    assert out.tolist() == [7, 7]
    with pytest.raises(ValueError, match="a .position, length. pair per row of out"):
        impl.partition_spans(b"abc", np.array([0, 3], dtype=np.int64), 3, out)
    with pytest.raises(ValueError, match="num_partitions must be positive"):
        impl.partition_spans(b"abc", np.array([0, 3, 0, 1], dtype=np.int64), 0, out)
    with pytest.raises(ValueError, match="out must be a C-contiguous int64 array"):
        impl.partition_spans(b"abc", np.array([0, 3, 0, 1], dtype=np.int64), 3, np.zeros(2, dtype=np.int32))


@pytest.mark.parametrize("impl", [TWIN] + ([COMPILED] if COMPILED is not None else []), ids=lambda m: m.__name__)
def test_the_column_kernels_take_empty_columns_and_refuse_out_overlapping_the_spans(impl):
    none = np.zeros((0, 2), dtype=np.int64)
    assert impl.encode_columns(b"", none, b"", none, np.zeros(0, dtype=np.int64), 0) == b""
    impl.partition_spans(b"", none, 3, np.zeros(0, dtype=np.int64))
    spans = np.array([0, 8, 0, 64], dtype=np.int64)  # out is the second pair: hashing key 0 rewrites key 1's span
    with pytest.raises(ValueError, match="key_spans changed while the keys were hashed"):
        impl.partition_spans(bytes(range(64)), spans[0:4], 1 << 62, spans[2:4])


@pytest.mark.parametrize("impl", [TWIN] + ([COMPILED] if COMPILED is not None else []), ids=lambda m: m.__name__)
@given(rows=st.lists(st.tuples(st.none() | st.binary(max_size=50), st.none() | st.binary(max_size=50),
                               st.lists(st.tuples(st.binary(max_size=20), st.none() | st.binary(max_size=20)),
                                        max_size=4)), max_size=30))
@settings(max_examples=60, deadline=None)
def test_encode_columns_with_header_columns_writes_what_encode_records_writes(impl, rows):
    def column(items):
        data, spans = bytearray(b"#"), []
        for item in items:
            spans += [len(data), -1 if item is None else len(item)]
            data += item or b""
        return bytes(data), np.array(spans, dtype=np.int64)

    keys, values, headers = [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]
    pairs = [p for h in headers for p in h]
    ranges, first = [], 1  # pair 0 belongs to no record: ranges need not start at 0
    for h in headers:
        ranges += [first, len(h)]
        first += len(h)
    hkd, hks = column([b"unused"] + [k for k, _ in pairs])
    hvd, hvs = column([None] + [v for _, v in pairs])
    kd, ks = column(keys)
    vd, vs = column(values)
    stamps = np.arange(len(rows), dtype=np.int64) * 7
    got = impl.encode_columns(kd, ks, vd, vs, stamps, 0, hkd, hks, hvd, hvs, np.array(ranges, dtype=np.int64))
    assert got == kernels.encode_records(keys, values, stamps.tolist(), 0, None, headers)


@pytest.mark.parametrize("impl", [TWIN] + ([COMPILED] if COMPILED is not None else []), ids=lambda m: m.__name__)
def test_encode_columns_refuses_header_ranges_and_spans_that_do_not_hold(impl):
    one = np.array([0, 1], dtype=np.int64)
    ts = np.zeros(1, dtype=np.int64)
    hk, hv = np.array([0, 2], dtype=np.int64), np.array([0, -1], dtype=np.int64)
    assert impl.encode_columns(b"k", one, b"v", one, ts, 0, b"hk", hk, b"", hv, np.array([0, 1], dtype=np.int64))
    cases = ((b"hk", hk, b"", hv, [0, 2], "the header range of record 0 lies outside the header columns"),
             (b"hk", np.array([0, -1], dtype=np.int64), b"", hv, [0, 1], "a header key of record 0 is null"),
             (b"h", hk, b"", hv, [0, 1], "a header key of record 0 is null or lies outside header_key_data"),
             (b"hk", hk, b"", np.array([0, 3], dtype=np.int64), [0, 1], "a header value of record 0 lies outside"))
    for hkd, hks, hvd, hvs, ranges, what in cases:
        with pytest.raises(ValueError, match=what):
            impl.encode_columns(b"k", one, b"v", one, ts, 0, hkd, hks, hvd, hvs, np.array(ranges, dtype=np.int64))
    with pytest.raises(ValueError, match="given together or not at all"):
        impl.encode_columns(b"k", one, b"v", one, ts, 0, b"hk", hk, None, hv, np.array([0, 1], dtype=np.int64))


@pytest.mark.parametrize("impl", [TWIN] + ([COMPILED] if COMPILED is not None else []), ids=lambda m: m.__name__)
def test_encode_columns_refuses_a_record_beyond_kafkas_record_length(impl):
    """Kafka's record length is an int32 varint: headers adding up past 2^31 - 1 bytes are refused before
    anything is allocated (the spans are checked against a large sparse map, never read)."""
    size = 1 << 32
    with mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_NORESERVE", 0)) as big:
        one = np.array([0, 1], dtype=np.int64)
        ts = np.zeros(1, dtype=np.int64)
        keys = np.array([0, 1 << 30] * 3, dtype=np.int64)  # three header keys of 1 GiB each
        values = np.array([0, -1] * 3, dtype=np.int64)
        with pytest.raises(ValueError, match="record 0 would take more than 2\\^31 - 1 bytes"):
            impl.encode_columns(b"k", one, b"v", one, ts, 0, big, keys, b"", values, np.array([0, 3], dtype=np.int64))
