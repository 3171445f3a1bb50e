"""read_committed over the wire: Fetch and ListOffsets by isolation level, and three Kafka clients.

One ``compactlog serve`` for the module, on a data directory built through the embedded API
(``txn_support``): a committed, an aborted and an open transaction interleaved across producers and
segments. The tests run in file order: first everything while the transaction is open (readers stop at
its first offset), then the commit (the broker writes the marker: WriteTxnMarkers, as the coordinator
does) with read_committed consumers already waiting, which must wake and read the rest.
"""

from __future__ import annotations

import asyncio
import dataclasses
import select
import threading
import time

import pytest
import txn_support as tx
import wire
from kio.schema.errors import ErrorCode

import compactlog
from compactlog.records.batch import BatchInfo, build_batch, iter_batches

T = 30.0


BIG = "txn-big"  # large batches: answers past the zero-copy threshold, sent from the files with sendfile
BIG_BATCH = 200 * 1024


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    d = tmp_path_factory.mktemp("rc") / "data"
    b = tx.build(d)
    with compactlog.open(d) as cl:  # 6 committed batches of 200 KB, then one open transaction of 2 more
        cl.create_topic(BIG, 1)
        part = cl.partition(BIG, 0)
        for i in range(8):
            pid = tx.C if i < 6 else tx.O
            info = BatchInfo(producer_id=pid, producer_epoch=0, base_sequence=i * 10 if i < 6 else (i - 6) * 10,
                             is_transactional=True)
            part.append(build_batch([None] * 10, [bytes([65 + i]) * (BIG_BATCH // 10)] * 10, info=info))
            if i == 5:
                part.write_txn_marker(tx.C, 0, True, 0)
    return d, b


@pytest.fixture(scope="module")
def server(built):
    with wire.serving(built[0]) as s:
        yield s


def committed(req):
    return dataclasses.replace(req, isolation_level=1)


def fetch_one(server, offset: int, version: int, isolation: int, max_bytes: int = 1 << 20, max_wait: int = 0):
    req = wire.fetch(tx.TOPIC, 0, offset, version=version, max_bytes=max_bytes, max_wait=max_wait)
    with wire.RawClient.to(server, timeout=T) as c:
        resp = c.call(dataclasses.replace(req, isolation_level=isolation))
    return resp.responses[0].partitions[0]


def batches_of(records: bytes | None):
    return [b for _, b in iter_batches(records or b"")]


def values_of(batches, aborted: list[tuple[int, int]] = ()) -> list[bytes]:
    """What a read_committed client makes of a Fetch answer: data records, minus those of each aborted
    transaction (its producer's batches from the first offset up to its ABORT marker)."""
    out, dropping = [], set()
    starts = sorted(aborted, key=lambda a: a[1])
    for b in batches:
        for pid, first in starts:
            if pid == b.producer_id and first <= b.base_offset:
                dropping.add(pid)
        starts = [(pid, first) for pid, first in starts if not (pid == b.producer_id and first <= b.base_offset)]
        if b.is_control:
            dropping.discard(b.producer_id)
            continue
        if b.producer_id in dropping:
            continue
        out += [r.value for r in b.records()]
    return out


# Fetch --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [4, 11, 12, 16])
def test_read_committed_fetch_ends_below_the_lso_and_lists_the_aborted_transactions(server, built, version):
    _, b = built
    topic = tx.TOPIC if version < 13 else stored_topic_id(server)
    got, offset, seen_aborted = [], 0, []
    while offset < b.lso:  # a client's loop: fetch from the next offset until nothing comes
        req = wire.fetch(topic, 0, offset, version=version)
        with wire.RawClient.to(server, timeout=T) as c:
            part = c.call(committed(req)).responses[0].partitions[0]
        assert part.error_code == ErrorCode.none
        assert (part.high_watermark, part.last_stable_offset) == (b.end, b.lso)
        assert part.aborted_transactions is not None
        batches = batches_of(part.records)
        if not batches:
            break
        assert batches[-1].last_offset < b.lso  # nothing at or above the LSO goes out
        seen_aborted += [(a.producer_id, a.first_offset) for a in part.aborted_transactions]
        got += values_of(batches, [(a.producer_id, a.first_offset) for a in part.aborted_transactions])
        offset = batches[-1].last_offset + 1
    assert got == tx.COMMITTED_BEFORE
    assert offset == b.lso
    assert (tx.A, b.offsets[b"a2-a"]) in seen_aborted
    assert all(pid == tx.A for pid, _ in seen_aborted)  # never a committed or open one


def stored_topic_id(server):
    with wire.RawClient.to(server, timeout=T) as c:
        (topic,) = c.call(wire.metadata([tx.TOPIC], 12)).topics
    return topic.topic_id


def test_a_read_committed_fetch_at_or_above_the_lso_gets_no_bytes_but_the_watermarks(server, built):
    _, b = built
    for offset in (b.lso, b.lso + 1, b.end):
        part = fetch_one(server, offset, 12, 1)
        assert part.error_code == ErrorCode.none
        assert part.records in (None, b"")
        assert (part.high_watermark, part.last_stable_offset) == (b.end, b.lso)
        assert part.aborted_transactions == ()
    # past the log end is out of range at either level, as in Kafka
    assert fetch_one(server, b.end + 1, 12, 1).error_code == ErrorCode.offset_out_of_range


def test_the_first_batch_goes_out_whole_below_the_lso_but_never_one_above_it(server, built):
    """KIP-74's first batch whatever max_bytes, but the LSO bounds even that one."""
    _, b = built
    part = fetch_one(server, 0, 12, 1, max_bytes=1)
    assert [x.base_offset for x in batches_of(part.records)] == [0]
    part = fetch_one(server, b.lso, 12, 1, max_bytes=1)
    assert batches_of(part.records) == []


def test_read_uncommitted_fetch_reads_to_the_high_watermark_with_the_lso_and_a_null_aborted_list(server, built):
    _, b = built
    got, offset = [], 0
    while offset < b.end:
        part = fetch_one(server, offset, 12, 0)
        assert part.aborted_transactions is None  # not looked for, as Kafka answers read_uncommitted
        assert (part.high_watermark, part.last_stable_offset) == (b.end, b.lso)
        batches = batches_of(part.records)
        got += [r.value for x in batches if not x.is_control for r in x.records()]
        offset = batches[-1].last_offset + 1
    assert got == tx.ALL


def test_a_large_read_committed_answer_sent_from_the_file_ends_at_the_lso(server):
    """Past 1 MB a fetch is read in a worker thread and its ranges sent with sendfile: the LSO cuts them too."""
    for isolation, batches in ((1, 7), (0, 9)):  # 6 data batches and the COMMIT marker below the LSO, 2 above
        part = fetch_one_of(server, BIG, 0, isolation, max_bytes=8 << 20)
        got = batches_of(part.records)
        assert len(got) == batches
        assert part.last_stable_offset == 61  # 6 batches of 10, the COMMIT marker, then the open transaction
        assert all(x.last_offset < 61 for x in got) == (isolation == 1)


def fetch_one_of(server, topic: str, offset: int, isolation: int, max_bytes: int):
    req = wire.fetch(topic, 0, offset, version=12, max_bytes=max_bytes)
    with wire.RawClient.to(server, timeout=T) as c:
        return c.call(dataclasses.replace(req, isolation_level=isolation)).responses[0].partitions[0]


# ListOffsets --------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [2, 5, 8])
def test_list_offsets_latest_is_the_lso_for_read_committed_and_the_high_watermark_otherwise(server, built, version):
    _, b = built
    with wire.RawClient.to(server, timeout=T) as c:
        def ask(ts, isolation):
            req = wire.list_offsets(tx.TOPIC, 0, ts, version=version)
            (p,) = c.call(dataclasses.replace(req, isolation_level=isolation)).topics[0].partitions
            assert p.error_code == ErrorCode.none
            return p.offset

        assert ask(-1, 0) == b.end
        assert ask(-1, 1) == b.lso
        assert ask(-2, 1) == ask(-2, 0) == 0
        # a timestamp lookup answers only what this consumer may fetch: below the LSO for read_committed
        below, above = b.timestamps[b"c1-a"], b.timestamps[b"c4-a"]
        assert ask(below, 1) == ask(below, 0) == b.offsets[b"c1-a"]
        assert ask(above, 0) == b.offsets[b"c4-a"]
        assert ask(above, 1) == -1


def test_list_offsets_v1_has_no_isolation_level_and_answers_the_high_watermark(server, built):
    _, b = built
    with wire.RawClient.to(server, timeout=T) as c:
        (p,) = c.call(wire.list_offsets(tx.TOPIC, 0, -1, version=1)).topics[0].partitions
    assert p.offset == b.end


# Kafka's clients ----------------------------------------------------------------------------------

def confluent_read(server, isolation: str, stop_at_eof: bool = True, expect: int | None = None):
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": f"rc-{isolation}-{time.monotonic_ns()}",
                  "enable.auto.commit": False, "enable.partition.eof": True, "isolation.level": isolation,
                  "fetch.wait.max.ms": 50})
    try:
        c.assign([TopicPartition(tx.TOPIC, 0, 0)])
        got, deadline = [], time.monotonic() + T
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                if stop_at_eof and (expect is None or len(got) >= expect):
                    break
                continue
            got.append(m.value())
        position = c.position([TopicPartition(tx.TOPIC, 0)])[0].offset
        low, high = c.get_watermark_offsets(TopicPartition(tx.TOPIC, 0), timeout=T, cached=False)
        return got, position, high
    finally:
        c.close()


def test_confluent_read_committed_sees_exactly_the_committed_records_and_stops_at_the_lso(server, built):
    _, b = built
    got, position, high = confluent_read(server, "read_committed")
    assert got == tx.COMMITTED_BEFORE
    # librdkafka's position follows the last record it handed out, not the aborted batch just below the
    # LSO that it dropped (Kafka's Java consumer, kafka-python and aiokafka move past it, to the LSO)
    assert position == b.offsets[tx.COMMITTED_BEFORE[-1]] + 1 == b.lso - 1
    assert high == b.lso  # librdkafka's end offset for read_committed is the LSO


def test_confluent_read_uncommitted_sees_all_data_and_no_control_record(server, built):
    _, b = built
    got, position, high = confluent_read(server, "read_uncommitted", expect=len(tx.ALL))
    assert got == tx.ALL
    assert high == b.end


def kafka_python_read(server, isolation: str, end: int) -> tuple[list[bytes], int, int]:
    """(values, position, end offset) of a kafka-python consumer reading from 0 until its position is ``end``."""
    from kafka import KafkaConsumer, TopicPartition

    tp = TopicPartition(tx.TOPIC, 0)
    c = KafkaConsumer(bootstrap_servers=server.bootstrap, isolation_level=isolation, enable_auto_commit=False,
                      fetch_max_wait_ms=50, request_timeout_ms=20_000)
    try:
        c.assign([tp])
        c.seek(tp, 0)
        got, deadline = [], time.monotonic() + T
        while c.position(tp) < end and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=500).values():
                got += [r.value for r in recs]
        assert all(r == [] for r in c.poll(timeout_ms=300).values())  # nothing beyond
        return got, c.position(tp), c.end_offsets([tp])[tp]
    finally:
        c.close()


def aiokafka_read(server, isolation: str, end: int) -> tuple[list[bytes], int, int]:
    """The same with aiokafka."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    tp = TopicPartition(tx.TOPIC, 0)

    async def read() -> tuple[list[bytes], int, int]:
        c = AIOKafkaConsumer(bootstrap_servers=server.bootstrap, isolation_level=isolation,
                             enable_auto_commit=False, fetch_max_wait_ms=50)
        await c.start()
        try:
            c.assign([tp])
            c.seek(tp, 0)
            got, deadline = [], time.monotonic() + T
            while await c.position(tp) < end and time.monotonic() < deadline:
                for recs in (await c.getmany(timeout_ms=500)).values():
                    got += [r.value for r in recs]
            return got, await c.position(tp), (await c.end_offsets([tp]))[tp]
        finally:
            await c.stop()

    return asyncio.run(read())


@pytest.mark.parametrize("read", [kafka_python_read, aiokafka_read], ids=["kafka-python", "aiokafka"])
def test_kafka_python_and_aiokafka_read_committed_stop_at_the_lso(server, built, read):
    """Both move their position past the aborted batch just below the LSO, to the LSO."""
    _, b = built
    assert read(server, "read_committed", b.lso) == (tx.COMMITTED_BEFORE, b.lso, b.lso)
    assert read(server, "read_uncommitted", b.end) == (tx.ALL, b.end, b.end)


# the console consumer ------------------------------------------------------------------------------

@pytest.mark.parametrize("isolation, want", [(None, tx.ALL), ("read_uncommitted", tx.ALL),
                                             ("read_committed", tx.COMMITTED_BEFORE)])
def test_compactlog_consume_through_the_broker_by_isolation_level(server, isolation, want):
    """kafka-console-consumer's --isolation-level, read_uncommitted by default (librdkafka's own default,
    read_committed, is not the tool's)."""
    from click.testing import CliRunner

    from compactlog.cli import main

    flag = [] if isolation is None else ["--isolation-level", isolation]
    res = CliRunner().invoke(main, ["consume", "--bootstrap-server", server.bootstrap, "--topic", tx.TOPIC,
                                    "--from-beginning", *flag])
    assert res.exit_code == 0, res.output
    assert res.stdout.encode().split() == want


# the commit: waiting consumers wake -----------------------------------------------------------------

def write_commit_marker(server) -> None:
    """WriteTxnMarkers v1 (what the coordinator writes, and kafka-transactions.sh's --abort sends): COMMIT
    for O's open transaction in the topic's partition 0."""
    mod = wire.module_of("write_txn_markers", 1, "request")
    req = mod.WriteTxnMarkersRequest(markers=(mod.WritableTxnMarker(
        producer_id=tx.O, producer_epoch=tx.EPOCH, transaction_result=True, coordinator_epoch=tx.COORDINATOR_EPOCH,
        topics=(mod.WritableTxnMarkerTopic(name=tx.TOPIC, partition_indexes=(0,)),)),))
    with wire.RawClient.to(server, timeout=T) as c:
        resp = c.call(req)
    (marker,) = resp.markers
    assert [p.error_code for t in marker.topics for p in t.partitions] == [ErrorCode.none]


def test_a_parked_read_committed_fetch_and_a_waiting_consumer_wake_when_the_commit_marker_lands(server, built):
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    _, b = built
    # a Fetch at the LSO, min_bytes 1, max_wait 25 s: parked, as nothing below the LSO is new
    raw = wire.RawClient.to(server, timeout=T + 30)
    req = committed(wire.fetch(tx.TOPIC, 0, b.lso, version=12, max_wait=25_000))
    cid = raw.send(req)
    assert select.select([raw.sock], [], [], 1.0)[0] == [], "a read_committed fetch at the LSO answered at once"

    # a consumer that has read everything committed and waits at the LSO
    at_lso, got, failure = threading.Event(), [], []

    def consume() -> None:
        c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "rc-waiting", "enable.auto.commit": False,
                      "enable.partition.eof": True, "isolation.level": "read_committed", "fetch.wait.max.ms": 500})
        try:
            c.assign([TopicPartition(tx.TOPIC, 0, 0)])
            deadline = time.monotonic() + 2 * T
            while len(got) < len(tx.COMMITTED_AFTER) and time.monotonic() < deadline:
                m = c.poll(0.2)
                if m is None:
                    continue
                if m.error():
                    if m.error().code() != KafkaError._PARTITION_EOF:
                        failure.append(m.error())
                        return
                    if got == tx.COMMITTED_BEFORE:
                        at_lso.set()
                    continue
                got.append(m.value())
        finally:
            c.close()

    t = threading.Thread(target=consume)
    t.start()
    try:
        assert at_lso.wait(T), f"the consumer did not reach the LSO: {got}"
        write_commit_marker(server)
        committed_at = time.monotonic()
        part = raw.receive(req, cid).responses[0].partitions[0]
        answered = time.monotonic() - committed_at
    finally:
        t.join(2 * T + 10)
        raw.close()
    assert answered < 10, "woken by max_wait, not by the marker"
    assert part.last_stable_offset == part.high_watermark == b.end + 1
    assert values_of(batches_of(part.records))[:2] == [b"o3-a", b"o3-b"]
    assert failure == []
    assert got == tx.COMMITTED_AFTER


def test_after_the_commit_every_client_reads_the_rest_in_order(server, built):
    _, b = built
    got, position, high = confluent_read(server, "read_committed", expect=len(tx.COMMITTED_AFTER))
    assert got == tx.COMMITTED_AFTER and position == high == b.end + 1
    for read in (kafka_python_read, aiokafka_read):
        assert read(server, "read_committed", b.end + 1) == (tx.COMMITTED_AFTER, b.end + 1, b.end + 1)


@pytest.mark.parametrize("isolation", [2, -1, 127])
def test_an_isolation_level_neither_0_nor_1_is_refused_by_name_for_each_partition(server, isolation):
    """Kafka fails such a request whole (an unknown server error); here each partition gets
    INVALID_REQUEST and nothing is read, and the connection stays usable."""
    part = fetch_one(server, 0, 12, isolation)
    assert part.error_code == ErrorCode.invalid_request and not part.records
    with wire.RawClient.to(server, timeout=T) as c:
        req = wire.list_offsets(tx.TOPIC, 0, -1, version=5)
        (p,) = c.call(dataclasses.replace(req, isolation_level=isolation)).topics[0].partitions
        assert p.error_code == ErrorCode.invalid_request and p.offset == -1
        (p,) = c.call(wire.list_offsets(tx.TOPIC, 0, -1, version=5)).topics[0].partitions
        assert p.error_code == ErrorCode.none
