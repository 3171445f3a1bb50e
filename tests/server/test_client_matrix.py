"""Produce and fetch with every client in scope, every codec, every acks setting, idempotence on.

librdkafka (confluent-kafka), kafka-python and aiokafka each produce records with keys, values,
headers and null values, then read them back from the beginning with a plain ``assign`` (no group), and
the offsets, order, keys, values and headers must be exactly what was sent. Around that: a retried
idempotent batch on a raw socket (acknowledged with the first attempt's offsets, stored once), an
out-of-order sequence (45) and an old epoch (47); a compacted topic with holes in its offsets read by
all three clients without getting stuck; ListOffsets earliest, latest and by timestamp; and Kafka's
refusals: a keyless record on a compacted topic (87), a batch above max.message.bytes (10), zstd on
Produce v3-6 (76), a legacy-format, half or missing batch (87), writes to internal topics (17), and a
failed acks=0 produce closing its connection. kcat too, when it is installed.

One server serves the whole module; topics are made with the local API before it starts.
"""

from __future__ import annotations

import asyncio
import itertools
import shutil
import struct
import subprocess
import time
import dataclasses
from dataclasses import dataclass

import pytest
import wire

from compactlog import api
from compactlog.records import BatchInfo, Codec, build_batch, iter_batches

ServeProcess = wire.serve_process_class()

confluent_kafka = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")
aiokafka = pytest.importorskip("aiokafka")

CLIENTS = ["confluent", "kafka-python", "aiokafka"]
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
WAIT = 20.0  # seconds any one client operation may take, at most
N = 12
T0 = 1_700_000_000_000  # record timestamps of the timestamp topic: T0, T0 + 1000, ...
COMPACTED = "compacted"
KEYS_PER_ROUND = 5


def records() -> list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]]:
    """(key, value, headers): null keys and null values, empty and non-empty headers, growing values."""
    out = []
    for i in range(N):
        key = None if i % 5 == 4 else f"key-{i}".encode()
        value = None if i % 4 == 3 else f"value-{i}-".encode() + b"x" * (i * 7)
        headers = [("trace", str(i).encode()), ("empty", b"")] if i % 3 == 0 else []
        out.append((key, value, headers))
    return out


@dataclass
class Matrix:
    server: ServeProcess
    compacted: list[tuple[int, bytes, bytes]]  # (offset, key, value) the cleaned topic holds
    compacted_end: int


def fill_compacted(cl: api.CompactLog) -> list[tuple[int, bytes, bytes]]:
    """A compacted topic in small segments, cleaned: survivors are scattered between holes, and some
    surviving batches lost records at their start, middle or end."""
    cl.create_topic(COMPACTED, 1, {"cleanup.policy": "compact", "segment.bytes": "1200",
                                   "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0",
                                   "delete.retention.ms": "0"})
    i = 0
    for round_ in range(40):
        rows = []
        for _ in range(KEYS_PER_ROUND):
            key = f"unique-{i}" if i % 7 == 0 else f"hot-{i % 4}"
            rows.append((key.encode(), f"v{i}".encode()))
            i += 1
        cl.produce_batch(COMPACTED, rows, partition=0, compression=["none", "gzip", "lz4"][round_ % 3])
    report = cl.clean(COMPACTED)
    assert report.compactions, "the cleaner did not compact the test topic"
    return [(r.offset, r.key, r.value) for r in cl.consume(COMPACTED, 0, from_beginning=True)]


@pytest.fixture(scope="module")
def matrix(tmp_path_factory) -> Matrix:
    data = tmp_path_factory.mktemp("matrix") / "data"
    cl = api.CompactLog(data)
    for client in CLIENTS:
        for codec in CODECS:
            cl.create_topic(f"m-{client}-{codec}", 1)
        for acks in ("0", "1", "all"):
            cl.create_topic(f"acks-{client}-{acks}", 1)
        cl.create_topic(f"idem-{client}", 1)
    for name in ("raw-idem", "timestamps", "zstd-old", "long-poll", "big-records"):
        cl.create_topic(name, 1)
    cl.create_topic("append-time", 1, {"message.timestamp.type": "LogAppendTime"})
    cl.create_topic("two-parts", 2)
    cl.produce_batch("two-parts", [(b"a", b"x" * 300)] * 10, partition=0, compression="gzip")
    cl.produce_batch("two-parts", [(b"b", b"y" * 300)] * 10, partition=1)
    cl.create_topic("keys-required", 1, {"cleanup.policy": "compact"})
    cl.create_topic("small-max", 1, {"max.message.bytes": "2000"})
    compacted = fill_compacted(cl)
    end = cl.end_offsets(COMPACTED)[0]
    cl.close()
    s = ServeProcess(data, {})
    s.start()
    yield Matrix(s, compacted, end)
    problems = [line for line in s.log_text().splitlines() if "Traceback" in line or "failed; closing" in line]
    s.kill()
    assert not problems, problems


# the three clients, behind one small interface ----------------------------------------------------------

def produce_confluent(bootstrap: str, topic: str, rows, codec="none", acks="all", idempotent=False,
                      timestamps=None) -> list[int]:
    conf = {"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5, "acks": acks}
    if idempotent:
        conf["enable.idempotence"] = True
    p = confluent_kafka.Producer(conf)
    offsets: dict[int, int] = {}
    errors = []

    def done(err, msg, i):
        if err is not None:
            errors.append(err)
        else:
            offsets[i] = msg.offset()

    for i, (k, v, h) in enumerate(rows):
        extra = {"timestamp": timestamps[i]} if timestamps else {}
        p.produce(topic, key=k, value=v, headers=h or None, partition=0,
                  on_delivery=lambda err, msg, i=i: done(err, msg, i), **extra)
    assert p.flush(WAIT) == 0, "librdkafka could not deliver everything"
    assert not errors, errors
    return [offsets[i] for i in range(len(rows))]


def consume_confluent(bootstrap: str, topic: str, count: int, end: int | None = None) -> list[tuple]:
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "matrix-assign",
                                  "enable.auto.commit": False, "enable.partition.eof": True})
    c.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    out = []
    deadline = time.monotonic() + WAIT
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                assert m.error().code() == confluent_kafka.KafkaError._PARTITION_EOF, m.error()
                if len(out) >= count:
                    break
                continue
            out.append((m.offset(), m.key(), m.value(), list(m.headers() or [])))
    finally:
        c.close()
    return out


def produce_kafka_python(bootstrap: str, topic: str, rows, codec="none", acks="all", idempotent=None,
                         timestamps=None) -> list[int]:
    extra = {} if idempotent is None else {"enable_idempotence": idempotent}
    if acks != "all" and idempotent is None:
        extra["enable_idempotence"] = False  # idempotence needs acks=all
    p = kafka.KafkaProducer(bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec,
                            acks={"all": "all", "1": 1, "0": 0}[acks], linger_ms=5, **extra)
    try:
        futures = [p.send(topic, key=k, value=v, headers=h, partition=0,
                          timestamp_ms=timestamps[i] if timestamps else None)
                   for i, (k, v, h) in enumerate(rows)]
        return [f.get(timeout=WAIT).offset for f in futures]
    finally:
        p.close(timeout=WAIT)


def consume_kafka_python(bootstrap: str, topic: str, count: int, end: int | None = None) -> list[tuple]:
    c = kafka.KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                            auto_offset_reset="earliest", consumer_timeout_ms=int(WAIT * 1000))
    tp = kafka.TopicPartition(topic, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    out = []
    deadline = time.monotonic() + WAIT
    try:
        while time.monotonic() < deadline and len(out) < count:
            for batch in c.poll(timeout_ms=500).values():
                out += [(m.offset, m.key, m.value, list(m.headers or [])) for m in batch]
    finally:
        c.close()
    return out


def produce_aiokafka(bootstrap: str, topic: str, rows, codec="none", acks="all", idempotent=False,
                     timestamps=None) -> list[int]:
    async def go() -> list[int]:
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec,
                                      acks={"all": "all", "1": 1, "0": 0}[acks], enable_idempotence=idempotent,
                                      linger_ms=5, request_timeout_ms=int(WAIT * 1000))
        await p.start()
        try:
            futures = [await p.send(topic, key=k, value=v, headers=h, partition=0,
                                    timestamp_ms=timestamps[i] if timestamps else None)
                       for i, (k, v, h) in enumerate(rows)]
            return [-1 if (md := await f) is None else md.offset for f in futures]  # acks=0: no metadata
        finally:
            await p.stop()

    return asyncio.run(asyncio.wait_for(go(), WAIT * 2))


def consume_aiokafka(bootstrap: str, topic: str, count: int, end: int | None = None) -> list[tuple]:
    async def go() -> list[tuple]:
        c = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                      auto_offset_reset="earliest")
        await c.start()
        tp = aiokafka.TopicPartition(topic, 0)
        c.assign([tp])
        await c.seek_to_beginning(tp)
        out = []
        deadline = time.monotonic() + WAIT
        try:
            while time.monotonic() < deadline and len(out) < count:
                for batch in (await c.getmany(tp, timeout_ms=500)).values():
                    out += [(m.offset, m.key, m.value, list(m.headers or [])) for m in batch]
        finally:
            await c.stop()
        return out

    return asyncio.run(go())


PRODUCE = {"confluent": produce_confluent, "kafka-python": produce_kafka_python, "aiokafka": produce_aiokafka}
CONSUME = {"confluent": consume_confluent, "kafka-python": consume_kafka_python, "aiokafka": consume_aiokafka}


def normalized(rows) -> list[tuple]:
    return [(k, v, [(hk, bytes(hv) if hv is not None else None) for hk, hv in h]) for k, v, h in rows]


def raw_end_offset(server, topic: str) -> int:
    with wire.RawClient.to(server) as c:
        part = c.call(wire.list_offsets(topic, 0, -1)).topics[0].partitions[0]
        assert part.error_code == 0, part
        return part.offset


def stored_batches(server, topic: str) -> list:
    """The batches of partition 0 as the broker hands them out."""
    with wire.RawClient.to(server) as c:
        part = c.call(wire.fetch(topic, 0, 0, max_bytes=16 << 20)).responses[0].partitions[0]
        assert part.error_code == 0, part
        return [b for _, b in iter_batches(part.records or b"")]


# produce and consume: every client, every codec ----------------------------------------------------------

@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", CLIENTS)
def test_records_come_back_exactly(matrix, client, codec):
    topic = f"m-{client}-{codec}"
    rows = records()
    offsets = PRODUCE[client](matrix.server.bootstrap, topic, rows, codec=codec)
    assert offsets == list(range(N))
    got = CONSUME[client](matrix.server.bootstrap, topic, N)
    assert [o for o, *_ in got] == list(range(N))
    assert normalized([(k, v, h) for _, k, v, h in got]) == normalized(rows)
    stored = stored_batches(matrix.server, topic)
    if codec != "none":  # the batches really were compressed (librdkafka falls back quietly otherwise);
        # a client may still send a batch too small to gain from it uncompressed (librdkafka does)
        codecs = {b.codec for b in stored}
        assert Codec[codec.upper()] in codecs and codecs <= {Codec[codec.upper()], Codec.NONE}, codecs
    assert {b.partition_leader_epoch for b in stored} == {0}  # aiokafka writes -1: the broker stamps its own


@pytest.mark.parametrize("reader", CLIENTS)
def test_every_client_reads_what_the_others_wrote(matrix, reader):
    for writer in CLIENTS:
        topic = f"m-{writer}-lz4"
        if raw_end_offset(matrix.server, topic) < N:
            PRODUCE[writer](matrix.server.bootstrap, topic, records(), codec="lz4")
        got = CONSUME[reader](matrix.server.bootstrap, topic, N)
        assert normalized([(k, v, h) for _, k, v, h in got[:N]]) == normalized(records()), (writer, reader)


@pytest.mark.parametrize("acks", ["0", "1", "all"])
@pytest.mark.parametrize("client", CLIENTS)
def test_acks(matrix, client, acks):
    topic = f"acks-{client}-{acks}"
    rows = records()
    offsets = PRODUCE[client](matrix.server.bootstrap, topic, rows, acks=acks)
    if acks == "0":  # no answers: the client knows no offsets, the broker stored them all the same
        deadline = time.monotonic() + WAIT
        while raw_end_offset(matrix.server, topic) < N and time.monotonic() < deadline:
            time.sleep(0.05)
    else:
        assert offsets == list(range(N))
    assert raw_end_offset(matrix.server, topic) == N
    got = CONSUME[client](matrix.server.bootstrap, topic, N)
    assert normalized([(k, v, h) for _, k, v, h in got]) == normalized(rows)


@pytest.mark.parametrize("client", CLIENTS)
def test_idempotent_producers(matrix, client):
    topic = f"idem-{client}"
    rows = records() * 3
    idem = {"confluent": True, "kafka-python": None, "aiokafka": True}[client]  # kafka-python: its default
    offsets = PRODUCE[client](matrix.server.bootstrap, topic, rows, idempotent=idem)
    assert offsets == list(range(len(rows)))
    batches = stored_batches(matrix.server, topic)
    assert all(b.producer_id >= 0 for b in batches), "the producer did not write idempotent batches"
    assert [b.base_sequence for b in batches] == [b.base_offset for b in batches]  # one producer, from 0
    got = CONSUME[client](matrix.server.bootstrap, topic, len(rows))
    assert [o for o, *_ in got] == list(range(len(rows)))  # nothing twice


# a retried idempotent batch on the wire ------------------------------------------------------------------

def idem_batch(pid: int, epoch: int, seq: int, n: int = 3) -> bytes:
    now = int(time.time() * 1000)
    return build_batch([f"k{seq + i}".encode() for i in range(n)], [f"v{seq + i}".encode() for i in range(n)],
                       [now] * n, info=BatchInfo(producer_id=pid, producer_epoch=epoch, base_sequence=seq))


def produce_raw(c: wire.RawClient, topic: str, batch: bytes, version: int = 8):
    part = c.call(wire.produce(topic, 0, batch, version=version)).responses[0].partition_responses[0]
    return part.error_code, part.base_offset


def test_a_retried_idempotent_batch_is_stored_once(matrix):
    with wire.RawClient.to(matrix.server) as c:
        ident = c.call(wire.init_producer_id())
        assert ident.error_code == 0 and ident.producer_id >= 0 and ident.producer_epoch == 0
        pid = ident.producer_id
        first = idem_batch(pid, 0, 0)
        code, base = produce_raw(c, "raw-idem", first)
        assert code == 0
        assert produce_raw(c, "raw-idem", first) == (0, base)  # the retry: same answer
        assert produce_raw(c, "raw-idem", idem_batch(pid, 0, 3)) == (0, base + 3)
        assert produce_raw(c, "raw-idem", first) == (0, base)  # an older retry, still remembered
        assert produce_raw(c, "raw-idem", idem_batch(pid, 0, 3)) == (0, base + 3)
        code, _ = produce_raw(c, "raw-idem", idem_batch(pid, 0, 9))  # 6..8 never came
        assert code == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
        assert produce_raw(c, "raw-idem", idem_batch(pid, 1, 0)) == (0, base + 6)  # a new epoch starts at 0
        code, _ = produce_raw(c, "raw-idem", idem_batch(pid, 0, 6))
        assert code == 47  # INVALID_PRODUCER_EPOCH: a newer instance owns the id
    assert raw_end_offset(matrix.server, "raw-idem") == base + 9
    values = [v for _, _, v, _ in consume_confluent(matrix.server.bootstrap, "raw-idem", base + 9)]
    assert values == [f"v{i}".encode() for i in range(6)] + [f"v{i}".encode() for i in range(3)]


def test_a_retried_idempotent_batch_is_recognised_after_a_restart(serve_factory):
    """The producer state is rebuilt from the log after a restart, so a retry that crosses it is not
    stored twice either."""
    server = serve_factory()
    with wire.RawClient.to(server) as c:
        assert c.call(wire.metadata(["after-restart"], auto_create=True)).topics[0].error_code in (0, 5)
        pid = c.call(wire.init_producer_id()).producer_id
        batch = idem_batch(pid, 0, 0)
        deadline = time.monotonic() + WAIT
        while (code_base := produce_raw(c, "after-restart", batch))[0] and time.monotonic() < deadline:
            time.sleep(0.1)  # the topic is being created
        assert code_base == (0, 0)
    server.restart()
    with wire.RawClient.to(server) as c:
        assert produce_raw(c, "after-restart", batch) == (0, 0)
        assert produce_raw(c, "after-restart", idem_batch(pid, 0, 3)) == (0, 3)
        assert produce_raw(c, "after-restart", idem_batch(pid, 0, 9))[0] == 45
    assert raw_end_offset(server, "after-restart") == 6


def test_log_append_time_topics(matrix):
    """On a LogAppendTime topic the broker's clock is the record time: in the produce answer, in the
    stored batch, and in what a consumer sees."""
    before = int(time.time() * 1000)
    with wire.RawClient.to(matrix.server) as c:
        part = c.call(wire.produce("append-time", 0, build_batch([b"k"], [b"v"], [1000]))).responses[0].partition_responses[0]
    after = int(time.time() * 1000)
    assert part.error_code == 0
    appended = int(part.log_append_time.timestamp() * 1000)
    assert before - 5 <= appended <= after + 5
    (batch,) = stored_batches(matrix.server, "append-time")
    assert (batch.timestamp_type, batch.max_timestamp) == (1, appended)
    c = confluent_kafka.Consumer({"bootstrap.servers": matrix.server.bootstrap, "group.id": "append-time"})
    c.assign([confluent_kafka.TopicPartition("append-time", 0, confluent_kafka.OFFSET_BEGINNING)])
    m = None
    deadline = time.monotonic() + WAIT
    while (m is None or m.error()) and time.monotonic() < deadline:
        m = c.poll(0.5)
    c.close()
    assert m.timestamp() == (confluent_kafka.TIMESTAMP_LOG_APPEND_TIME, appended)


# a compacted topic with holes ------------------------------------------------------------------------

@pytest.mark.parametrize("client", CLIENTS)
def test_a_compacted_topic_is_read_across_its_holes(matrix, client):
    expected = matrix.compacted
    offsets = [o for o, _, _ in expected]
    assert offsets[-1] == matrix.compacted_end - 1
    assert len(offsets) < offsets[-1] + 1 - 20, "the topic has hardly any holes"
    got = CONSUME[client](matrix.server.bootstrap, COMPACTED, len(expected))
    assert [(o, k, v) for o, k, v, _ in got] == expected


# ListOffsets ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def timestamps(matrix) -> str:
    rows = [(f"t{i}".encode(), f"at {i}".encode(), []) for i in range(5)]
    produce_confluent(matrix.server.bootstrap, "timestamps", rows, timestamps=[T0 + 1000 * i for i in range(5)])
    return "timestamps"


def test_list_offsets_with_librdkafka(matrix, timestamps):
    c = confluent_kafka.Consumer({"bootstrap.servers": matrix.server.bootstrap, "group.id": "matrix-offsets"})
    try:
        assert c.get_watermark_offsets(confluent_kafka.TopicPartition(timestamps, 0), timeout=WAIT) == (0, 5)
        asked = [confluent_kafka.TopicPartition(timestamps, 0, ts) for ts in (T0 - 1, T0 + 1500, T0 + 4000, T0 + 9000)]
        found = [c.offsets_for_times([tp], timeout=WAIT)[0].offset for tp in asked]
        assert found == [0, 2, 4, confluent_kafka.OFFSET_END]
    finally:
        c.close()


def test_list_offsets_with_kafka_python(matrix, timestamps):
    c = kafka.KafkaConsumer(bootstrap_servers=matrix.server.bootstrap, group_id=None)
    tp = kafka.TopicPartition(timestamps, 0)
    try:
        assert c.beginning_offsets([tp]) == {tp: 0}
        assert c.end_offsets([tp]) == {tp: 5}
        found = c.offsets_for_times({tp: T0 + 1500})[tp]
        assert (found.offset, found.timestamp) == (2, T0 + 2000)
        assert c.offsets_for_times({tp: T0 + 9000})[tp] is None
    finally:
        c.close()


def test_list_offsets_with_aiokafka(matrix, timestamps):
    async def go():
        c = aiokafka.AIOKafkaConsumer(bootstrap_servers=matrix.server.bootstrap, group_id=None)
        await c.start()
        tp = aiokafka.TopicPartition(timestamps, 0)
        try:
            assert await c.beginning_offsets([tp]) == {tp: 0}
            assert await c.end_offsets([tp]) == {tp: 5}
            found = (await c.offsets_for_times({tp: T0 + 1500}))[tp]
            assert (found.offset, found.timestamp) == (2, T0 + 2000)
            assert (await c.offsets_for_times({tp: T0 + 9000}))[tp] is None
        finally:
            await c.stop()

    asyncio.run(go())


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5])
def test_list_offsets_on_the_wire(matrix, timestamps, version):
    with wire.RawClient.to(matrix.server) as c:
        def look(ts):
            p = c.call(wire.list_offsets(timestamps, 0, ts, version=version)).topics[0].partitions[0]
            assert p.error_code == 0
            return p.offset, p.timestamp
        assert look(-2) == (0, -1)
        assert look(-1) == (5, -1)
        assert look(T0 + 1000) == (1, T0 + 1000)
        assert look(T0 + 1001) == (2, T0 + 2000)
        assert look(T0 + 4001) == (-1, -1)


# Kafka's refusals -------------------------------------------------------------------------------------

def test_a_keyless_record_on_a_compacted_topic_is_refused_and_not_stored(matrix):
    now = int(time.time() * 1000)
    with wire.RawClient.to(matrix.server) as c:
        before = raw_end_offset(matrix.server, "keys-required")
        code, _ = produce_raw(c, "keys-required", build_batch([b"k", None], [b"a", b"b"], [now, now]))
        assert code == 87  # INVALID_RECORD
        assert raw_end_offset(matrix.server, "keys-required") == before
        assert produce_raw(c, "keys-required", build_batch([b"k"], [b"a"], [now]))[0] == 0


def test_a_keyless_record_on_a_compacted_topic_fails_in_librdkafka(matrix):
    p = confluent_kafka.Producer({"bootstrap.servers": matrix.server.bootstrap, "retries": 0})
    errors = []
    p.produce("keys-required", value=b"no key", on_delivery=lambda err, msg: errors.append(err))
    p.flush(WAIT)
    assert [e.code() for e in errors] == [confluent_kafka.KafkaError.INVALID_RECORD]


def test_a_batch_above_max_message_bytes_is_refused(matrix):
    now = int(time.time() * 1000)
    with wire.RawClient.to(matrix.server) as c:
        code, _ = produce_raw(c, "small-max", build_batch([b"k"], [b"x" * 3000], [now]))
        assert code == 10  # MESSAGE_TOO_LARGE
        assert raw_end_offset(matrix.server, "small-max") == 0
        assert produce_raw(c, "small-max", build_batch([b"k"], [b"x" * 1000], [now]))[0] == 0


@pytest.mark.parametrize("version", [3, 4, 5, 6, 7, 8])
def test_zstd_needs_produce_v7(matrix, version):
    batch = build_batch([b"k"], [b"zstd " * 20], [int(time.time() * 1000)], codec=Codec.ZSTD)
    with wire.RawClient.to(matrix.server) as c:
        before = raw_end_offset(matrix.server, "zstd-old")
        code, base = produce_raw(c, "zstd-old", batch, version=version)
        if version < 7:
            assert code == 76  # UNSUPPORTED_COMPRESSION_TYPE
            assert raw_end_offset(matrix.server, "zstd-old") == before
        else:
            assert (code, base) == (0, before)


def legacy_message_set(magic: int) -> bytes:
    """One magic v0/v1 message (the format before record batches), CRC and all."""
    import zlib

    body = bytes([magic, 0]) + (struct.pack(">q", int(time.time() * 1000)) if magic else b"")
    body += struct.pack(">i", 1) + b"k" + struct.pack(">i", 5) + b"value"
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", 0, len(message)) + message


@pytest.mark.parametrize("what", ["magic-0", "magic-1", "half", "empty", "null"])
def test_a_partition_without_one_whole_v2_batch_is_an_invalid_record(matrix, what):
    whole = build_batch([b"k"], [b"v"], [int(time.time() * 1000)])
    records = {"magic-0": legacy_message_set(0), "magic-1": legacy_message_set(1), "half": whole[:40],
               "empty": b"", "null": None}[what]
    with wire.RawClient.to(matrix.server) as c:
        before = raw_end_offset(matrix.server, "zstd-old")
        assert produce_raw(c, "zstd-old", records)[0] == 87
        assert raw_end_offset(matrix.server, "zstd-old") == before


@pytest.mark.parametrize("topic", ["__consumer_offsets", "__transaction_state"])
def test_clients_cannot_write_to_internal_topics(matrix, topic):
    """The group coordinator owns __consumer_offsets: a record forged there would be a commit."""
    batch = build_batch([b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x00"], [b"\x00\x03"], [int(time.time() * 1000)])
    with wire.RawClient.to(matrix.server) as c:
        part = c.call(wire.produce(topic, 0, batch)).responses[0].partition_responses[0]
        assert part.error_code == 17, part  # INVALID_TOPIC_EXCEPTION


def test_a_failed_acks_0_produce_closes_the_connection(matrix):
    """acks=0 has no answer to carry an error, so Kafka closes the connection instead; a good acks=0
    produce leaves it open and unanswered."""
    batch = build_batch([b"k"], [b"v"], [int(time.time() * 1000)])
    with wire.RawClient.to(matrix.server) as c:
        before = raw_end_offset(matrix.server, "zstd-old")
        c.send(wire.produce("zstd-old", 0, batch, acks=0))
        assert c.call(wire.api_versions(0)).error_code == 0  # the next answer is the next request's
        assert raw_end_offset(matrix.server, "zstd-old") == before + 1
        c.send(wire.produce("no-such-topic-here", 0, batch, acks=0))
        assert c.closed_by_peer()


# fetch semantics -----------------------------------------------------------------------------------

def fetch_raw(c: wire.RawClient, topic: str, offset: int, **kw):
    return c.call(wire.fetch(topic, 0, offset, **kw)).responses[0].partitions[0]


def test_a_fetch_at_the_end_waits_for_max_wait_and_wakes_on_an_append(matrix):
    with wire.RawClient.to(matrix.server) as c, wire.RawClient.to(matrix.server) as producer:
        end = raw_end_offset(matrix.server, "long-poll")
        t = time.monotonic()
        part = fetch_raw(c, "long-poll", end, max_wait=400)
        assert time.monotonic() - t >= 0.35, "a fetch at the end did not wait"
        assert (part.error_code, part.records or b"", part.high_watermark) == (0, b"", end)
        corr = c.send(wire.fetch("long-poll", 0, end, max_wait=15_000))
        time.sleep(0.3)
        t = time.monotonic()
        assert produce_raw(producer, "long-poll", build_batch([b"k"], [b"wake"], [int(time.time() * 1000)]))[0] == 0
        part = c.receive(wire.fetch("long-poll", 0, end, max_wait=15_000), corr).responses[0].partitions[0]
        assert time.monotonic() - t < 5, "a parked fetch was not woken by the append"
        assert [b.base_offset for _, b in iter_batches(part.records)] == [end]


def test_out_of_range_offsets(matrix):
    with wire.RawClient.to(matrix.server) as c:
        end = raw_end_offset(matrix.server, "two-parts")
        for offset in (end + 1, -1, 2**62):
            part = fetch_raw(c, "two-parts", offset)
            assert part.error_code == 1, offset  # OFFSET_OUT_OF_RANGE
            assert (part.high_watermark, part.log_start_offset, part.records or b"") == (end, 0, b"")


def test_a_fetch_inside_a_compressed_batch_gets_the_whole_batch(matrix):
    with wire.RawClient.to(matrix.server) as c:
        part = fetch_raw(c, "two-parts", 4)
        first = next(iter_batches(part.records))[1]
        assert (first.base_offset, first.last_offset, first.codec) == (0, 9, Codec.GZIP)


def test_a_fetch_inside_a_hole_of_a_compacted_topic_gets_the_next_batch(matrix):
    offsets = [o for o, _, _ in matrix.compacted]
    hole = next(o + 1 for o, nxt in itertools.pairwise(offsets) if nxt > o + 1 and (o + 1) % KEYS_PER_ROUND)
    with wire.RawClient.to(matrix.server) as c:
        part = fetch_raw(c, COMPACTED, hole)
    batches = [b for _, b in iter_batches(part.records)]
    assert batches[0].last_offset >= hole  # the batch that spans the hole (its records may all be below it)
    assert batches[0].base_offset <= max([o for o in offsets if o < hole] + [0])
    after = [r.offset for b in batches for r in b.records() if r.offset >= hole]
    assert after[0] == min(o for o in offsets if o >= hole)


def test_every_partition_asked_for_is_answered_and_the_first_batch_comes_whole(matrix):
    """KIP-74: max_bytes is a soft limit for the first batch found, so no consumer is stuck behind a
    big one; after it the limit holds. Unknown partitions are answered too (with error 3)."""
    mod = wire.module_of("fetch", 11, "request")
    parts = tuple(mod.FetchPartition(partition=p, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1,
                                     partition_max_bytes=100) for p in (0, 1, 7))
    body = mod.FetchRequest(replica_id=-1, max_wait=wire.ms(0), min_bytes=1, max_bytes=100, isolation_level=1,
                            session_id=0, session_epoch=-1, forgotten_topics_data=(), rack_id="",
                            topics=(mod.FetchTopic(topic="two-parts", partitions=parts),
                                    mod.FetchTopic(topic="no-such-topic", partitions=parts[:1])))
    with wire.RawClient.to(matrix.server) as c:
        resp = c.call(body)
    assert resp.error_code == 0 and resp.session_id == 0
    got = {(t.topic, p.partition_index): p for t in resp.responses for p in t.partitions}
    assert sorted(got) == [("no-such-topic", 0), ("two-parts", 0), ("two-parts", 1), ("two-parts", 7)]
    assert got[("two-parts", 7)].error_code == 3 and got[("no-such-topic", 0)].error_code == 3
    whole = list(iter_batches(got[("two-parts", 0)].records))
    assert len(whole) == 1 and whole[0][1].record_count == 10  # well above 100 bytes, yet whole
    assert (got[("two-parts", 1)].error_code, got[("two-parts", 1)].records or b"") == (0, b"")  # budget spent
    assert got[("two-parts", 1)].high_watermark == 10 and got[("two-parts", 1)].last_stable_offset == 10


@pytest.mark.parametrize("client", CLIENTS)
def test_records_larger_than_the_fetch_limits_still_come_through(matrix, client):
    rows = [(f"big{i}".encode(), bytes([65 + i]) * 20_000, []) for i in range(4)]
    if raw_end_offset(matrix.server, "big-records") < len(rows):
        produce_confluent(matrix.server.bootstrap, "big-records", rows)
    if client == "confluent":
        c = confluent_kafka.Consumer({"bootstrap.servers": matrix.server.bootstrap, "group.id": "big",
                                      "fetch.max.bytes": 1024, "message.max.bytes": 1000,
                                      "max.partition.fetch.bytes": 512, "enable.partition.eof": True})
        c.assign([confluent_kafka.TopicPartition("big-records", 0, confluent_kafka.OFFSET_BEGINNING)])
        got = []
        deadline = time.monotonic() + WAIT
        while len(got) < len(rows) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
        c.close()
    elif client == "kafka-python":
        c = kafka.KafkaConsumer(bootstrap_servers=matrix.server.bootstrap, group_id=None,
                                max_partition_fetch_bytes=512, fetch_max_bytes=1024)
        tp = kafka.TopicPartition("big-records", 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        got = []
        deadline = time.monotonic() + WAIT
        while len(got) < len(rows) and time.monotonic() < deadline:
            got += [m.value for batch in c.poll(timeout_ms=500).values() for m in batch]
        c.close()
    else:
        async def go():
            c = aiokafka.AIOKafkaConsumer(bootstrap_servers=matrix.server.bootstrap, group_id=None,
                                          max_partition_fetch_bytes=512, fetch_max_bytes=1024)
            await c.start()
            tp = aiokafka.TopicPartition("big-records", 0)
            c.assign([tp])
            await c.seek_to_beginning(tp)
            out = []
            deadline = time.monotonic() + WAIT
            try:
                while len(out) < len(rows) and time.monotonic() < deadline:
                    out += [m.value for batch in (await c.getmany(timeout_ms=500)).values() for m in batch]
            finally:
                await c.stop()
            return out

        got = asyncio.run(go())
    assert got == [v for _, v, _ in rows]


# kcat ---------------------------------------------------------------------------------------------

@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_produces_and_consumes(matrix):
    lines = [f"key{i}:value{i}" for i in range(N)]
    subprocess.run(["kcat", "-b", matrix.server.bootstrap, "-P", "-t", "kcat-topic", "-K:", "-p", "0"],
                   input="\n".join(lines) + "\n", text=True, check=True, timeout=WAIT)
    out = subprocess.run(["kcat", "-b", matrix.server.bootstrap, "-C", "-t", "kcat-topic", "-p", "0", "-e",
                          "-f", "%o %k %s\n"], capture_output=True, text=True, check=True, timeout=WAIT)
    assert out.stdout.splitlines() == [f"{i} key{i} value{i}" for i in range(N)]
    out = subprocess.run(["kcat", "-b", matrix.server.bootstrap, "-C", "-t", COMPACTED, "-p", "0", "-e",
                          "-f", "%o\n"], capture_output=True, text=True, check=True, timeout=WAIT)
    assert [int(x) for x in out.stdout.split()] == [o for o, _, _ in matrix.compacted]


def test_a_partition_listed_many_times_in_one_fetch_is_read_once(matrix):
    """A small request naming one partition 2,000 times must not make the broker read it 2,000 times
    (memory, descriptors): the first listing gets the records, the repeats none."""
    req = wire.fetch("two-parts", 0, 0, max_bytes=1 << 30)
    topic = req.topics[0]
    req = dataclasses.replace(req, topics=(dataclasses.replace(topic, partitions=topic.partitions * 2000),))
    with wire.RawClient.to(matrix.server) as c:
        parts = c.call(req).responses[0].partitions
    assert len(parts) == 2000 and all(p.error_code == 0 for p in parts)
    assert parts[0].records and not any(p.records for p in parts[1:])
