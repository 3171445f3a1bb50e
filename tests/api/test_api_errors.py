"""Mistakes a caller can make get a typed error that says what was wrong, and store nothing."""

from __future__ import annotations

import struct

import pytest

import compactlog
from compactlog.errors import (
    CompactLogError,
    CorruptRecordError,
    InvalidRecordError,
    InvalidRequestError,
    InvalidTimestampError,
)
from compactlog.records import BatchInfo, build_batch


@pytest.fixture
def cl(tmp_path):
    with compactlog.open(tmp_path) as c:
        c.create_topic("t", 2, {"cleanup.policy": "compact"})
        yield c


@pytest.mark.parametrize("call, message", [
    (lambda c: c.produce("t", "text", key=b"k"), "value must be bytes or None, got str (encode it"),
    (lambda c: c.produce("t", b"v", key=7), "key must be bytes or None, got int"),
    (lambda c: c.produce("t", b"v", key=b"k", headers=[("h", "text")]), "each header must be a (str key, bytes"),
    (lambda c: c.produce("t", b"v", key=b"k", headers=["h"]), "each header must be a (str key, bytes"),
    (lambda c: c.produce("t", b"v", key=b"k", headers=[("\ud800", b"v")]), "cannot be encoded as UTF-8"),
    (lambda c: c.produce("t", b"v", key=b"k", partition="0"), "partition must be an int, got str"),
    (lambda c: c.produce("t", b"v", key=b"k", timestamp="now"), "timestamp must be an int of milliseconds"),
    (lambda c: c.produce("t", b"v", key=b"k", timestamp=2**63), "timestamp must be an int of milliseconds"),
    (lambda c: c.produce_batch("t", [(b"k", b"v"), (b"k", "text")]), "record 1: value must be bytes or None, got str"),
    (lambda c: c.produce_batch("t", [b"just a value"]), "record 0 must be a (key, value) or (key, value, headers) tuple"),
    (lambda c: c.produce_batch("t", [(b"k", b"v")], batch_bytes=-1), "batch_bytes must be an int >= 0"),
    (lambda c: c.append_batch("t", 0, "not bytes"), "batch must be bytes (a v2 record batch), got str"),
    (lambda c: list(c.consume("t", partition=0, offset="0")), "offset must be an int, got str"),
    (lambda c: c.produce("t", b"v", key=b"k", compression="zstd", level=99),
     "Invalid value 99 for configuration compression.zstd.level: Value must be no more than 22"),
])
def test_wrong_argument_types_are_named(cl, call, message):
    with pytest.raises(CompactLogError) as exc:
        call(cl)
    assert message in str(exc.value)
    assert cl.end_offsets("t") == {0: 0, 1: 0}


def test_header_keys_that_are_not_utf8_are_refused_by_every_way_in(cl):
    bad = [(b"\xffkey", b"v")]
    with pytest.raises(InvalidRecordError, match="header key that is not valid UTF-8"):
        cl.produce("t", b"v", key=b"k", headers=bad, partition=0)
    with pytest.raises(InvalidRecordError, match="header key that is not valid UTF-8"):
        cl.produce_batch("t", [(b"k", b"v", bad)], partition=0)
    with pytest.raises(InvalidRecordError, match="header key that is not valid UTF-8"):
        cl.append_batch("t", 0, build_batch([b"k"], [b"v"], [1], headers=[bad]))
    assert cl.end_offsets("t") == {0: 0, 1: 0}


def test_a_stored_header_key_that_is_not_utf8_is_read_as_java_reads_it_and_cleaned(cl):
    """Data written before the check (or by another writer) stays readable, decoded with replacement
    characters as Java's consumer decodes it, and the cleaner keeps it byte for byte."""
    lg = cl.log("t", 0)
    old = build_batch([b"k", b"k"], [b"old", b"new"], [1, 2], headers=[[(b"\xffid", b"1")], [(b"\xffid", b"2")]],
                      info=BatchInfo(base_offset=0))
    lg.append_as_follower(old)
    cl.alter_topic_config("t", set={"min.cleanable.dirty.ratio": "0.01", "segment.ms": "1"})
    lg.roll()
    cl.produce("t", b"later", key=b"other", partition=0)
    recs = list(cl.consume("t", partition=0, from_beginning=True))
    assert [(r.value, r.headers) for r in recs[:2]] == [(b"old", (("\ufffdid", b"1"),)), (b"new", (("\ufffdid", b"2"),))]
    assert cl.clean("t").compactions
    assert [(r.offset, r.value, r.headers) for r in cl.consume("t", partition=0, from_beginning=True)][:1] == \
        [(1, b"new", (("\ufffdid", b"2"),))]


def test_a_timestamp_that_leaves_64_bits_is_a_corrupt_batch_not_a_crash(cl):
    batch = bytearray(build_batch([b"k", b"k"], [b"a", b"b"], [0, 2**62]))
    struct.pack_into(">q", batch, 27, 2**63 - 10)  # base timestamp: the second record's lands past 2**63
    from compactlog.records.batch import ATTRIBUTES_OFFSET, CRC_OFFSET, crc32c

    struct.pack_into(">I", batch, CRC_OFFSET, crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]))
    with pytest.raises(CorruptRecordError, match="timestamp"):
        cl.append_batch("t", 0, bytes(batch))
    assert cl.end_offsets("t") == {0: 0, 1: 0}


def test_offsets_and_timestamps_given_to_reads_are_checked(cl):
    with pytest.raises(InvalidRequestError):
        list(cl.consume("t", partition=0, timestamp="yesterday"))
    with pytest.raises(InvalidTimestampError):
        cl.produce_batch("t", [(b"k", b"v")], timestamp=-5)


@pytest.mark.parametrize("n", [0, -3])
def test_max_records_below_one_is_refused(cl, n):
    """It once returned one record for any value below 1."""
    with pytest.raises(InvalidRequestError, match="max_records must be at least 1"):
        list(cl.consume("t", partition=0, from_beginning=True, max_records=n))


def test_a_kafka_error_code_becomes_one_typed_error_for_every_caller():
    """One lookup (``errors.error_for``) turns a broker's answer code into our error, for the CLI's wire
    client and the console alike. Subclasses declared elsewhere with the same code (a corrupt index is a
    CORRUPT_MESSAGE, a running compaction an INVALID_REQUEST) never stand in for the code's own class,
    whatever has been imported."""
    from confluent_kafka import KafkaError

    import compactlog.compaction.service  # noqa: F401  (declares a code-42 subclass)
    import compactlog.storage.index  # noqa: F401  (declares a code-2 subclass)
    from compactlog import errors
    from compactlog.cli.wire import as_error

    declared = [c for c in vars(errors).values()
                if isinstance(c, type) and issubclass(c, CompactLogError) and c is not CompactLogError]
    assert len({c.code for c in declared}) == len(declared)  # one class per code
    assert all(errors.error_class(c.code) is c for c in declared)

    assert type(as_error(KafkaError(42, "bad request"))) is InvalidRequestError
    assert str(as_error(KafkaError(42, "bad request"), "altering: ")) == "altering: bad request"
    assert type(errors.error_for(2, "crc")) is CorruptRecordError
    gone = errors.error_for(69, doing="t-0: ")
    assert type(gone) is errors.GroupIdNotFoundError and str(gone) == "t-0: " + errors.GroupIdNotFoundError.__doc__
    for code in (9999, -195):  # none of ours, and one of librdkafka's own
        exc = errors.error_for(code, "what the broker said")
        assert type(exc) is CompactLogError and exc.code == code and str(exc) == "what the broker said"
    assert str(errors.error_for(9999)) == "error code 9999"
