"""Append validation and offset assignment (Kafka's LogValidator, client path).

One client append is one v2 batch. It is checked (size against ``max.message.bytes``, CRC, the record
structure, keys on compacted topics, timestamps) and then either

* kept **in place**: the producer's bytes are stored as they are and only the header is patched
  (base offset, and maxTimestamp plus the LogAppendTime bit when the topic uses LogAppendTime). This
  applies when the stored codec equals the target codec and, for compressed batches, the inner offset
  deltas are exactly 0..n-1; or
* **rebuilt** with the topic's codec and level (``compression.type`` other than ``producer`` and
  different from the batch's), offsets assigned from the log end offset. Records whose inner offsets
  are already 0..n-1 (every Kafka client writes them so) keep their bytes: only the records section is
  recompressed. Others are rebuilt record by record, for at most ``MAX_RECORD_BY_RECORD`` records.

A transactional batch (Kafka's 0x10 bit) of an idempotent producer is accepted like any producer batch
and keeps the bit when rebuilt; the log's producer state then opens its transaction. A control batch
from a client is refused, as Kafka refuses it: markers are written by the transaction coordinator only.

Memory stays bounded whatever arrives: the records of a compressed batch inflate to at most the
broker's ``message.max.decompressed.bytes``, and no path builds an object per record of a big batch.

Record-level checks run on the kernel's column scan with numpy, never in a Python loop per record.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
)
from ..records import kernels
from ..records.batch import (
    ATTRIBUTES_OFFSET,
    HEADER_SIZE,
    LOG_APPEND_TIME,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    BatchInfo,
    RecordBatch,
    assemble_batch,
    build_batch,
    iter_batches,
    patch_header,
)
from ..numbers import LONG_MAX
from ..records.codecs import Codec, codec_from_name, compress

# The leader epoch a Kafka leader stamps on every batch it appends: a single node is the first and only
# leader of every partition, so its epoch stays 0 (Kafka's first leader of a new topic writes 0 as well).
LEADER_EPOCH = 0
# Records rebuilt one by one (a compressed batch whose inner offsets are not 0..n-1, which no Kafka client
# writes); each costs a Python object, so a batch of more is refused.
MAX_RECORD_BY_RECORD = 65536
# Refused records named one by one in an error (Kafka names every one; a compressed batch may hold a
# million, and the answer would be tens of megabytes): the count of all of them is kept besides.
MAX_RECORD_ERRORS = 1000


@dataclass(frozen=True)
class ValidatedAppend:
    """What the log needs to store one validated append."""

    records: bytes | tuple  # bytes, or (patched 61-byte header, untouched records view) for pwritev
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    record_count: int
    recompressed: bool
    duplicate: bool = False  # a retried idempotent batch: the offsets are its first attempt's, nothing stored
    # The producer's header fields, as the validation read them: the log checks and records an
    # idempotent producer's sequences from these, so no caller reads them from the bytes again.
    producer_id: int = -1  # -1: not an idempotent producer
    producer_epoch: int = -1
    base_sequence: int = -1
    transactional: bool = False  # the batch carries the transactional bit (it opens or joins a transaction)


def target_codec(compression_type: str, source: Codec) -> Codec:
    """The codec stored on disk: the topic's, or the producer's when ``compression.type=producer``."""
    return source if compression_type == "producer" else codec_from_name(compression_type)


def check_fits_segment(size: int, config, where: str) -> None:
    """A batch larger than a segment can never be stored (Kafka's words): checked when the log stores
    one, and by those who must know beforehand that an append will not fail half way."""
    if size > config.segment_bytes:
        raise RecordBatchTooLargeError(
            f"Message batch size is {size} bytes in append to partition {where} which exceeds the maximum "
            f"configured segment size of {config.segment_bytes}."
        )


def _single_batch(records: bytes, where: str) -> RecordBatch:
    if len(records) < HEADER_SIZE:
        raise CorruptRecordError(f"the append to {where} holds no complete record batch ({len(records)} bytes)")
    batch = RecordBatch(records)
    if batch.size > len(records):
        raise CorruptRecordError(
            f"the append to {where} holds a partial batch: it declares {batch.size} bytes, {len(records)} arrived"
        )
    if batch.size < len(records):
        count = sum(1 for _ in iter_batches(records))
        raise InvalidRecordError(f"the append to {where} holds {count} batches; a v2 append must hold exactly one")
    return batch


def keyless_records(batch: RecordBatch, nulls: int, where: str) -> InvalidRecordError:
    """The error for a batch with ``nulls`` keyless records bound for a compacted topic: Kafka names each
    such record by its index in the batch (the first ``MAX_RECORD_ERRORS`` here)."""
    message = f"Compacted topic cannot accept message without key in topic partition {where}."
    _, cols = batch.scan()
    keyless = (cols[:, kernels.C_KEY_LEN] < 0).nonzero()[0][:MAX_RECORD_ERRORS]
    return InvalidRecordError(message).with_records([(int(i), message[:-1]) for i in keyless], nulls)


def check_timestamps(min_ts: int, max_ts: int, batch: RecordBatch, now: int, config, where: str) -> None:
    """Kafka's CreateTime window: message.timestamp.before.max.ms / after.max.ms; -1 (no timestamp) is exempt."""
    if min_ts < -1:
        raise InvalidTimestampError(f"record timestamp {min_ts} in {where} is invalid: it must be >= 0 or -1")
    if min_ts == -1 and max_ts > -1:  # a mix of timestamped and untimestamped records: look closer
        _, cols = batch.scan()
        ts = batch.base_timestamp + cols[:, kernels.C_TS_DELTA]
        ts = ts[ts != -1]
        if (ts < -1).any():
            raise InvalidTimestampError(f"record timestamp in {where} is invalid: it must be >= 0 or -1")
        min_ts = int(ts.min())
    if max_ts == -1:
        return
    before, after = config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms
    if before < LONG_MAX and now - min_ts > before:
        raise _out_of_window(InvalidTimestampError(
            f"Timestamp {min_ts} of message in {where} is before the allowed window "
            f"(message.timestamp.before.max.ms={before}, now={now})"
        ), batch, now, before, after)
    if after < LONG_MAX and max_ts - now > after:
        raise _out_of_window(InvalidTimestampError(
            f"Timestamp {max_ts} of message in {where} is after the allowed window "
            f"(message.timestamp.after.max.ms={after}, now={now})"
        ), batch, now, before, after)


def _out_of_window(error: InvalidTimestampError, batch: RecordBatch, now: int, before: int,
                   after: int) -> InvalidTimestampError:
    """``error`` naming each record whose timestamp is outside [now - before, now + after] (the first
    ``MAX_RECORD_ERRORS``), by its index in the batch and in Kafka's words, as Produce answers them."""
    _, cols = batch.scan()
    ts = batch.base_timestamp + cols[:, kernels.C_TS_DELTA]
    low, high = now - before, min(now + after, LONG_MAX)  # Kafka's long sum wraps past LONG_MAX; ours stops there
    outside = ((ts != -1) & ((ts < low) | (ts > high))).nonzero()[0]
    return error.with_records(
        [(int(i), f"Timestamp {int(ts[i])} of message with offset {batch.base_offset + int(cols[i, kernels.C_OFFSET_DELTA])} "
                  f"is out of range. The timestamp should be within [{low}, {high}]") for i in outside[:MAX_RECORD_ERRORS]],
        len(outside))


def validate_and_assign_offsets(records: bytes, next_offset: int, config, now: int, where: str, *,
                                prechecked: bool = False) -> ValidatedAppend:
    """Validate one client append for the log whose next offset is ``next_offset``.

    ``config`` is the topic's LogConfig; ``where`` names the partition in messages (``topic-0``).
    Raises a typed error naming what was wrong; nothing is written by this function.

    ``prechecked``: this function already passed these very bytes under this very config (a staged
    append's task validated the batch and recorded the config's fingerprint), so the walk of its records
    (keys on compacted topics, header keys, offset deltas, the timestamp window, which only a
    ``message.timestamp.before.max.ms`` can turn with time, and that the caller must rule out) is not
    done again, and the batch's max timestamp is its header's, as that walk found it. The CRC (so the
    bytes are those that passed) and every header rule are checked as always.
    """
    batch = _single_batch(records, where)
    if batch.size > config.max_message_bytes:
        raise RecordTooLargeError(
            f"The record batch size in the append to {where} is {batch.size} bytes which exceeds the maximum "
            f"configured value of {config.max_message_bytes}."
        )
    batch.ensure_valid()
    if batch.base_offset != 0:
        raise InvalidRecordError(
            f"The baseOffset of the record batch in the append to {where} should be 0, but it is {batch.base_offset}"
        )
    n = batch.record_count
    if n <= 0 or batch.last_offset_delta + 1 != n:
        raise InvalidRecordError(
            f"Record count {n} and last offset delta {batch.last_offset_delta} of the batch in the append to "
            f"{where} do not match (a producer batch holds records 0..n-1)"
        )
    if batch.is_control:
        raise InvalidRecordError(f"Clients are not allowed to write control records in topic partition {where}")
    if batch.is_transactional and batch.producer_id < 0:  # Kafka stores it and tracks nothing: see differences.md
        raise InvalidRecordError(
            f"A transactional batch needs a producer id (append to {where}); a transactional producer gets one "
            "from InitProducerId"
        )
    if batch.producer_id >= 0 and batch.base_sequence < 0:
        raise InvalidRecordError(f"Invalid sequence number {batch.base_sequence} for producer {batch.producer_id} in {where}")

    if batch.has_delete_horizon:
        raise InvalidRecordError(f"Clients may not set the delete-horizon attribute (append to {where})")
    if batch.attributes & TIMESTAMP_TYPE_BIT:
        raise InvalidTimestampError(f"Invalid timestamp type in the batch for {where}: producers send CreateTime batches")
    max_size = config.broker.get("message.max.decompressed.bytes")
    if prechecked:
        nulls, min_ts, max_ts, deltas_ok, bad_header_keys = 0, batch.max_timestamp, batch.max_timestamp, True, 0
    else:
        nulls, min_ts, max_ts, deltas_ok, bad_header_keys = batch.summarize(max_size)
    if config.compact and nulls:
        raise keyless_records(batch, nulls, where)
    if bad_header_keys:
        raise InvalidRecordError(
            f"{bad_header_keys} record(s) of the batch in the append to {where} have a header key that is not valid "
            "UTF-8 (Kafka header keys are strings)"
        )
    log_append = config.message_timestamp_type == "LogAppendTime"
    if not log_append and not prechecked:
        check_timestamps(min_ts, max_ts, batch, now, config, where)
    source = batch.codec
    target = target_codec(config.compression_type, source)
    last = next_offset + n - 1

    if source == target and (deltas_ok or source is Codec.NONE):
        header = bytearray(memoryview(records)[:HEADER_SIZE])
        patch_header(
            header, 0, base_offset=last - batch.last_offset_delta, partition_leader_epoch=LEADER_EPOCH,
            max_timestamp=now if log_append else max_ts, log_append_time=log_append,
            crc_of=memoryview(records)[ATTRIBUTES_OFFSET:],
        )
        return ValidatedAppend((bytes(header), memoryview(records)[HEADER_SIZE:]), next_offset, last, now if log_append else max_ts, last,
                               now if log_append else -1, n, False, **_producer(batch))

    info = BatchInfo(
        base_offset=next_offset,
        timestamp_type=LOG_APPEND_TIME if log_append else batch.timestamp_type,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        partition_leader_epoch=LEADER_EPOCH,
        is_transactional=batch.is_transactional,
    )
    level = config.compression_level(target)
    if deltas_ok:  # the records section is right as it is: recompress it, nothing per record
        body = bytes(batch.payload(max_size))
        if target is not Codec.NONE:
            body = compress(target, body, level)
        attrs = int(target) | (TIMESTAMP_TYPE_BIT if log_append else 0) | (TRANSACTIONAL_BIT if batch.is_transactional else 0)
        rebuilt = assemble_batch(info, attrs, n - 1, batch.base_timestamp, now if log_append else max_ts, n, body)
    else:
        if n > MAX_RECORD_BY_RECORD:
            raise InvalidRecordError(
                f"The batch in the append to {where} holds {n} records whose inner offsets are not 0..{n - 1}; such "
                f"batches are rebuilt record by record, which compactlog does for at most {MAX_RECORD_BY_RECORD} records"
            )
        recs = batch.records(max_size=max_size)
        rebuilt = build_batch(
            [r.key for r in recs], [r.value for r in recs], [r.timestamp for r in recs],
            headers=[r.headers for r in recs] if any(r.headers for r in recs) else None,
            codec=target, level=level, info=info,
            max_timestamp=now if log_append else None,
        )
    if len(rebuilt) > config.max_message_bytes:
        raise RecordTooLargeError(
            f"The record batch size in the append to {where} is {len(rebuilt)} bytes after recompression to "
            f"{target.config_name}, which exceeds the maximum configured value of {config.max_message_bytes}."
        )
    return ValidatedAppend(rebuilt, next_offset, last, now if log_append else max_ts, last,
                           now if log_append else -1, n, True, **_producer(batch))


def _producer(batch: RecordBatch) -> dict:
    """The producer fields a ValidatedAppend carries, from the header the validation parsed."""
    return {"producer_id": batch.producer_id, "producer_epoch": batch.producer_epoch,
            "base_sequence": batch.base_sequence, "transactional": batch.is_transactional}
