"""Produce: each partition's batch goes through the storage engine's append, with Kafka's error codes.

The storage layer does what Kafka's leader does with a produce batch (``storage/validator.py``): CRC,
``max.message.bytes``, keys on compacted topics, timestamps, the topic's ``compression.type`` (the
batch kept in place or rebuilt), offsets assigned from the log end, idempotent producers' sequences
(``storage/producer_state.py``). Here we only add what belongs to the wire, as Kafka's request handling
does before its log sees anything:

* each partition's records must hold one whole batch in the v2 format (``INVALID_RECORD`` for none, half
  of one, or a legacy v0/v1 message set; a damaged one is the log's ``CORRUPT_MESSAGE``);
* zstd needs Produce v7 (``UNSUPPORTED_COMPRESSION_TYPE``);
* clients may not write to internal topics (``INVALID_TOPIC_EXCEPTION``): ``__consumer_offsets`` is the
  group coordinator's, and a forged record there would be a committed offset nobody committed;
* ``acks=-1`` (all) to a topic whose ``min.insync.replicas`` is above 1 is refused with
  ``NOT_ENOUGH_REPLICAS`` and nothing is written: one node is an in-sync replica set of one, and Kafka's
  leader refuses such a write rather than acknowledge fewer copies than the topic asks for;
* ``acks=0`` gets no response at all; when such a produce fails, the connection is closed instead, the
  only way left to tell the producer (Kafka does the same);
* one response entry per partition asked for;
* a transactional batch (attribute bit 0x10) needs the request's ``transactional_id`` and WRITE on it
  (every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED otherwise), and its partition must be in the
  producer's open transaction, which the transaction coordinator checks before anything is appended
  (Kafka 3.6+'s verification, KIP-890): INVALID_TXN_STATE when it was not added, INVALID_PRODUCER_EPOCH
  for a fenced epoch, NOT_ENOUGH_REPLICAS (retriable) while the coordinator is busy or loading.

All the partitions of one request are appended together, so a big request costs one hop off the event
loop, and parked fetches are woken once afterwards. A small one is appended on the loop itself
(``cheap``): the hop costs more than the append, and most of a transaction's commit waits on it.
"""

from __future__ import annotations

import datetime
import struct

from ..errors import CompactLogError, InvalidRecordError, InvalidTopicError, NotEnoughReplicasError, shown
from ..records.batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    FIELD_OFFSETS,
    HEADER_SIZE,
    MAGIC_OFFSET,
    TRANSACTIONAL_BIT,
    batch_size_at,
    producer_id_at,
)
from ..records.codecs import Codec
from ..records.framing import decompressed_bound
from ..topics import INTERNAL_TOPICS
from .broker import NO_THROTTLE, Broker, Session, error_code
from .entities import make, response, schema
from .protocol import ProtocolError, Request

ATTRIBUTES_LOW_BYTE = ATTRIBUTES_OFFSET + 1  # the low byte of a batch's attributes holds the codec
_EPOCH = struct.Struct(">h")
UTC = datetime.timezone.utc
INLINE_BYTES = 64 * 1024
# The most a request's batches may decompress to (by their framing) and still be checked on the loop:
# librdkafka's default batch (batch.size 1,000,000, lz4's 64 KiB blocks: 1 MiB by its framing). 1 MiB of
# the smallest records (115,000 of 9 bytes) takes 1.4 ms to inflate and validate, 1 MB of 100-byte ones
# 0.13 ms, where the hop to a worker thread and back costs 0.3-1 ms of the producer's wait.
INLINE_DECOMPRESSED_BYTES = 1024 * 1024
# The most blocks a batch's framing walk may look at on the loop (librdkafka's 1 MB batch: 16 lz4 blocks,
# 31 of snappy): a hostile 64 KB of 1-byte blocks would otherwise cost a Python step per 5 bytes.
INLINE_BLOCKS = 256


def check_records(records: bytes | None, where: str) -> None:
    """What Kafka checks of a Produce v3+ partition before validating the batch: there is one whole
    batch, and it is in the v2 format. (Bytes after it, and a damaged header, are the validator's.)"""
    if records is None or len(records) <= MAGIC_OFFSET:
        raise InvalidRecordError(f"the produce request for {where} must hold one record batch; it holds "
                                 f"{0 if records is None else len(records)} bytes")
    size = batch_size_at(records)
    if size > len(records):
        raise InvalidRecordError(f"the produce request for {where} holds part of a record batch: {len(records)} "
                                 f"of the {size} bytes it declares")
    if records[MAGIC_OFFSET] in (0, 1):
        raise InvalidRecordError(f"the produce request for {where} holds a magic v{records[MAGIC_OFFSET]} message set; "
                                 "Produce v3 and later carry v2 record batches only")


def cheap(broker: Broker, topics, size: int) -> bool:
    """Whether appending a request costs about as little as the hop to a worker thread, so that it may
    run on the event loop: it is small, and its batches' framing (``framing.decompressed_bound``) says they
    inflate to at most ``INLINE_DECOMPRESSED_BYTES`` together. A few kilobytes of compressed records can
    be tens of megabytes (up to message.max.decompressed.bytes) and a gzip stream does not say how many:
    checked on the loop, they would stop every other client for as long. The first idempotent batch of a
    partition after a start reads the log's tail to rebuild producer state, and a batch that does not fit
    the active segment rolls it (an fsync of the segment closed): not on the loop either."""
    if size > INLINE_BYTES:
        return False
    find = broker.cl.find_partition
    inflated = 0
    for t in topics:
        for p in t.partition_data:
            r = p.records
            if r is None or len(r) < HEADER_SIZE:
                continue
            codec = r[ATTRIBUTES_LOW_BYTE] & COMPRESSION_MASK
            if codec:
                bound = decompressed_bound(codec, memoryview(r)[HEADER_SIZE:max(HEADER_SIZE, batch_size_at(r))],
                                           INLINE_BLOCKS)
                if bound is None:
                    return False
                inflated += bound
                if inflated > INLINE_DECOMPRESSED_BYTES:
                    return False
            part = find(t.name, p.index)
            if part is not None and (len(r) > part.active_segment_room
                                     or not part.producer_state_loaded and producer_id_at(r) >= 0):
                return False
    return True


def _transactional(records) -> bool:
    return (records is not None and len(records) >= HEADER_SIZE and records[MAGIC_OFFSET] == 2
            and bool(records[ATTRIBUTES_LOW_BYTE] & TRANSACTIONAL_BIT))


# The transaction coordinator's answers to a verification, as a Produce answers them (Kafka's ReplicaManager):
# a busy or loading coordinator is NOT_ENOUGH_REPLICAS (retriable), a fenced epoch INVALID_PRODUCER_EPOCH.
_NOT_ENOUGH_REPLICAS, _INVALID_PRODUCER_EPOCH, _INVALID_TXN_STATE = 19, 47, 48
_VERIFICATION_BUSY = {51: "CONCURRENT_TRANSACTIONS", 14: "COORDINATOR_LOAD_IN_PROGRESS",
                      15: "COORDINATOR_NOT_AVAILABLE", 16: "NOT_COORDINATOR"}
_PRODUCER_FENCED = 90


def transaction_refusals(broker: Broker, transactional_id: str | None, topics) -> dict[tuple[str, int], tuple]:
    """(topic, partition) -> (code, message) for the transactional batches the coordinator refuses:
    their partition is not in the producer's open transaction (Kafka's verification before an append)."""
    txn = broker.extras.get("transactions")
    refused = {}
    for t in topics:
        for p in t.partition_data:
            r = p.records
            if not _transactional(r) or producer_id_at(r) < 0:
                continue
            (epoch,) = _EPOCH.unpack_from(r, FIELD_OFFSETS["producerEpoch"])
            code = 15 if txn is None else txn.partition_in_transaction(transactional_id or "", producer_id_at(r),
                                                                       epoch, t.name, p.index)
            if code == 0:
                continue
            if code in _VERIFICATION_BUSY:
                refused[(t.name, p.index)] = (_NOT_ENOUGH_REPLICAS, "Unable to verify the partition has been added "
                                              f"to the transaction. Underlying error: {_VERIFICATION_BUSY[code]}")
            elif code == _INVALID_TXN_STATE:
                refused[(t.name, p.index)] = (code, "Partition was not added to the transaction")
            elif code == _PRODUCER_FENCED:
                refused[(t.name, p.index)] = (_INVALID_PRODUCER_EPOCH, "The producer's epoch is fenced by a newer "
                                              "producer with the same transactional id")
            else:
                refused[(t.name, p.index)] = (code, None)
    return refused


def _append_all(broker: Broker, topics, version: int, acks: int = 1,
                refused: dict[tuple[str, int], tuple] | None = None) -> list[list[tuple]]:
    """(partition, error, base offset, log append time, log start offset, message) per partition, and
    after them the refused records (index in the batch, message) when the error names some. ``refused``
    holds the partitions the transaction coordinator refused: nothing is appended to them."""
    out = []
    cl = broker.cl
    for t in topics:
        rows = []
        for p in t.partition_data:
            if refused and (t.name, p.index) in refused:
                code, message = refused[(t.name, p.index)]
                rows.append((p.index, code, -1, -1, -1, message))
                continue
            try:
                records = p.records
                if t.name in INTERNAL_TOPICS:
                    raise InvalidTopicError(f"Cannot append to internal topic {t.name}")
                check_records(records, f"{shown(t.name, '')}-{p.index}")
                if version < 7 and len(records) > ATTRIBUTES_LOW_BYTE and records[ATTRIBUTES_LOW_BYTE] & COMPRESSION_MASK == Codec.ZSTD:
                    rows.append((p.index, 76, -1, -1, -1, "zstd batches need Produce v7 or later"))
                    continue
                part = cl.partition(t.name, p.index)
                if acks == -1:
                    check_in_sync_replicas(part, t.name, p.index, broker.node_id)
                v = part.append(records)
                rows.append((p.index, 0, v.first_offset, v.log_append_time, part.log_start_offset, None))
            except CompactLogError as exc:
                rows.append(_refused(cl, t.name, p.index, exc))
        out.append(rows)
    return out


IN_SYNC_REPLICAS = 1  # this node: the one replica of every partition, always in sync


def check_in_sync_replicas(part, topic: str, index: int, node_id: int) -> None:
    """Kafka's leader check before an acks=all append: the in-sync replicas must number at least the
    topic's ``min.insync.replicas``. Kafka's message lists the in-sync replicas' broker ids: this node's."""
    wanted = part.config.get("min.insync.replicas")
    if wanted > IN_SYNC_REPLICAS:
        raise NotEnoughReplicasError(
            f"The size of the current ISR : {IN_SYNC_REPLICAS} is insufficient to satisfy the min.isr requirement "
            f"of {wanted} for partition {shown(topic, '')}-{index}, live replica(s) broker.id are : [{node_id}]")


def _refused(cl, topic: str, index: int, exc: CompactLogError) -> tuple:
    """The row of a refused partition. Refused records (a keyless one on a compacted topic, a timestamp
    out of the window) are answered as Kafka's broker answers them: each named in ``record_errors``,
    ``error_message`` in Kafka's words with the first three, and the partition's log start offset."""
    named = getattr(exc, "record_errors", ())
    if not named:
        return (index, exc.code, -1, -1, -1, str(exc))
    part = cl.find_partition(topic, index)
    if exc.code == InvalidRecordError.code:
        listed = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in named[:3])
        message = (f"One or more records have been rejected due to {exc.records_refused} record errors in total, "
                   f"and only showing the first three errors at most: [{listed}]")
    else:
        message = "One or more records have been rejected due to invalid timestamp"
    return (index, exc.code, -1, -1, -1 if part is None else part.log_start_offset, message, named)


async def produce(broker: Broker, req: Request, session: Session):
    body = req.body
    if body.acks not in (-1, 0, 1):
        results = [[(p.index, 21, -1, -1, -1, f"acks={body.acks} is not -1, 0 or 1") for p in t.partition_data]
                   for t in body.topic_data]
    else:
        tid = getattr(body, "transactional_id", None)
        if any(_transactional(p.records) for t in body.topic_data for p in t.partition_data) and (
                tid is None or not broker.authorize(session, "WRITE", "TRANSACTIONAL_ID", tid)):
            results = [[(p.index, 53, -1, -1, -1, "Transactional Id authorization failed.") for p in t.partition_data]
                       for t in body.topic_data]  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED: nothing is written
            return answer(req, body, results) if body.acks != 0 else _closed(body, results)
        allowed = [broker.authorize(session, "WRITE", "TOPIC", t.name) for t in body.topic_data]
        topics = [t for t, ok in zip(body.topic_data, allowed) if ok]
        refused = transaction_refusals(broker, tid, topics)
        if cheap(broker, topics, req.size):  # a small request costs less than the hop to a worker thread
            results = _append_all(broker, topics, req.api_version, body.acks, refused)
        else:
            results = await broker.blocking(_append_all, broker, topics, req.api_version, body.acks, refused)
        broker.data_arrived()
        if len(topics) < len(allowed):  # topics without WRITE: TOPIC_AUTHORIZATION_FAILED, nothing appended
            appended = iter(results)
            results = [next(appended) if ok else [(p.index, 29, -1, -1, -1, f"Not authorized to write to {shown(t.name, '')}")
                                                  for p in t.partition_data]
                       for t, ok in zip(body.topic_data, allowed)]
    if body.acks == 0:
        return _closed(body, results)
    return answer(req, body, results)


def _closed(body, results: list[list[tuple]]) -> None:
    """An acks=0 produce gets no answer; when part of it failed the connection is closed instead."""
    failed = [(t.name, row[0], row[1]) for t, rows in zip(body.topic_data, results) for row in rows if row[1]]
    if failed:
        raise ProtocolError(f"an acks=0 produce failed ({', '.join(f'{n}-{p}: error {c}' for n, p, c in failed[:3])}); "
                            "closing the connection so that the producer notices")
    return None


def answer(req: Request, body, results: list[list[tuple]]):
    """The Produce response for per-partition results (see ``_append_all``)."""
    s = schema(req)
    topics = []
    for t, rows in zip(body.topic_data, results):
        parts = tuple(
            make(s.PartitionProduceResponse, index=index, error_code=error_code(code), base_offset=base,
                 log_append_time=None if append_time < 0 else datetime.datetime.fromtimestamp(append_time / 1000, UTC),
                 log_start_offset=start, error_message=message if code else None,
                 record_errors=_record_errors(s, named_records[0] if named_records else ()))
            for index, code, base, append_time, start, message, *named_records in rows
        )
        topics.append(make(s.TopicProduceResponse, name=t.name, partition_responses=parts))
    return response(req, responses=tuple(topics), throttle_time=NO_THROTTLE)


def _record_errors(s, named: tuple[tuple[int, str], ...]) -> tuple:
    """Produce v8+'s ``record_errors`` (older versions have no such field: nothing to build)."""
    entity = getattr(s, "BatchIndexAndErrorMessage", None)
    if entity is None:
        return ()
    return tuple(make(entity, batch_index=i, batch_index_error_message=m) for i, m in named)


HANDLERS = {0: produce}
