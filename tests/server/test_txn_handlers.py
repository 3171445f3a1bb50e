"""The transactional APIs on the wire, in-process: each version's fields and layout (every answer also
goes through the encoder), Kafka's access checks and error codes per version, and Produce's refusal of
a transactional batch whose partition is not in the producer's transaction (before any append)."""

from __future__ import annotations

import asyncio
import datetime
import importlib

from compactlog.records.batch import BatchInfo, build_batch
from compactlog.security.acls import AclBinding, Operation, PatternType, Permission, ResourceType
from compactlog.server import apis
from compactlog.server.broker import Broker, Session
from compactlog.server.protocol import Connection, Request
from compactlog.server.server_config import ServerConfig
from compactlog.server.versions import SERVED, request_class

ANYONE = Session("127.0.0.1", 5555)


def ms(n: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=n)


def nested(key: int, version: int, entity: str, **fields):
    module = importlib.import_module(f"kio.schema.{SERVED[key].name}.v{version}.request")
    return getattr(module, entity)(**fields)


def scenario(tmp_path, body, **config) -> None:
    async def main() -> None:
        broker = apis.install(Broker(tmp_path / "d", ServerConfig({"transaction.state.log.num.partitions": "2",
                                                                   "offsets.topic.num.partitions": "2", **config}),
                                     host="127.0.0.1", port=9092, background=False))
        try:
            await broker.start()
            while broker.extras["transactions"].loading:
                await asyncio.sleep(0.01)
            broker.cl.create_topic("t", 2)
            wire = Connection()

            async def call(key: int, version: int, session: Session = ANYONE, **fields):
                req = Request(key, version, 7, "client", request_class(key, version)(**fields), 0)
                resp = await broker.handle(req, session)
                assert wire.encode(req, resp)  # every answer encodes at its version
                return resp

            await body(broker, call)
        finally:
            await broker.stop()
            broker.close()
    asyncio.run(asyncio.wait_for(main(), 30))


async def init(call, version: int, tid: str | None = "app", timeout: int = 10_000, **fields):
    r = await call(22, version, transactional_id=tid, transaction_timeout=ms(timeout), **fields)
    return r.error_code.value, r.producer_id, r.producer_epoch


def topics_v(version: int, *pairs):
    grouped: dict[str, list[int]] = {}
    for name, p in pairs:
        grouped.setdefault(name, []).append(p)
    return tuple(nested(24, version, "AddPartitionsToTxnTopic", name=n, partitions=tuple(ps)) for n, ps in grouped.items())


async def add(call, version: int, pid: int, epoch: int, *pairs, tid="app", session=ANYONE):
    r = await call(24, version, session, v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                   v3_and_below_producer_epoch=epoch, v3_and_below_topics=topics_v(version, *pairs))
    return {(t.name, p.partition_index): p.partition_error_code.value for t in r.results_by_topic_v3_and_below
            for p in t.results_by_partition}


def test_the_classic_flow_at_every_version(tmp_path):
    async def body(broker, call):
        code, pid, epoch = await init(call, 0)
        assert (code, epoch) == (0, 0)
        for v in range(4):
            assert await add(call, v, pid, epoch, ("t", 0), ("t", 1)) == {("t", 0): 0, ("t", 1): 0}
            r = await call(25, v, transactional_id="app", producer_id=pid, producer_epoch=epoch, group_id="g")
            assert r.error_code.value == 0
            assert broker.extras["transactions"].transactions["app"].state.value == "Ongoing"
            broker.extras["transactions"].write_marker = _no_marker  # the markers are the storage's, not tested here
            r = await call(26, v, transactional_id="app", producer_id=pid, producer_epoch=epoch, committed=v % 2 == 0)
            assert r.error_code.value == 0
            assert broker.extras["transactions"].transactions["app"].state.value == (
                "CompleteCommit" if v % 2 == 0 else "CompleteAbort")
        # InitProducerId v3+ with the producer's id and epoch: the next epoch (KIP-360)
        assert await init(call, 3, producer_id=pid, producer_epoch=epoch) == (0, pid, epoch + 1)
        assert await init(call, 4, producer_id=pid, producer_epoch=-1) == (42, -1, -1)  # half of a pair

    scenario(tmp_path, body)


async def _no_marker(*args) -> int:
    return 0


def test_a_fenced_epoch_is_producer_fenced_from_the_versions_that_know_it(tmp_path):
    async def body(broker, call):
        _, pid, old = await init(call, 4)
        assert (await init(call, 4))[0] == 0  # a newer producer: old is fenced
        assert (await add(call, 1, pid, old, ("t", 0)))[("t", 0)] == 47  # INVALID_PRODUCER_EPOCH before v2
        assert (await add(call, 2, pid, old, ("t", 0)))[("t", 0)] == 90  # PRODUCER_FENCED
        for v, wanted in ((1, 47), (2, 90)):
            r = await call(25, v, transactional_id="app", producer_id=pid, producer_epoch=old, group_id="g")
            assert r.error_code.value == wanted
            r = await call(26, v, transactional_id="app", producer_id=pid, producer_epoch=old, committed=True)
            assert r.error_code.value == wanted
        for v, wanted in ((3, 47), (4, 90)):  # InitProducerId names an epoch older than the last one
            assert await init(call, v, producer_id=pid, producer_epoch=old - 1 if old else 99) == (wanted, -1, -1)
        assert (await add(call, 3, pid + 7, old + 1, ("t", 0)))[("t", 0)] == 49  # INVALID_PRODUCER_ID_MAPPING
        assert await init(call, 4, timeout=900_001) == (50, -1, -1)  # above transaction.max.timeout.ms
        assert await init(call, 4, tid="") == (42, -1, -1)

    scenario(tmp_path, body)


def test_add_partitions_refuses_unknown_and_internal_topics_and_adds_nothing(tmp_path):
    async def body(broker, call):
        _, pid, epoch = await init(call, 4)
        assert await add(call, 3, pid, epoch, ("t", 0), ("t", 9), ("nope", 0)) == {
            ("t", 0): 55, ("t", 9): 3, ("nope", 0): 3}  # OPERATION_NOT_ATTEMPTED for the rest
        assert await add(call, 3, pid, epoch, ("t", 0), ("__consumer_offsets", 0)) == {
            ("t", 0): 55, ("__consumer_offsets", 0): 29}
        assert broker.extras["transactions"].transactions["app"].state.value == "Empty"
        assert await add(call, 3, pid, epoch, ("t", 0), ("t", 0)) == {("t", 0): 0}  # a repeat counts once

    scenario(tmp_path, body)


def test_access_to_transactional_ids_is_checked(tmp_path):
    alice = Session("127.0.0.1", 1, principal="User:alice")

    async def body(broker, call):
        broker.extras["acls"].add([
            AclBinding(ResourceType.TOPIC, "t", PatternType.LITERAL, "User:alice", "*", Operation.WRITE, Permission.ALLOW),
            AclBinding(ResourceType.TRANSACTIONAL_ID, "mine", PatternType.LITERAL, "User:alice", "*", Operation.WRITE,
                       Permission.ALLOW)])
        r = await call(22, 4, alice, transactional_id="theirs", transaction_timeout=ms(1000), producer_id=-1,
                       producer_epoch=-1)
        assert r.error_code.value == 53
        r = await call(22, 4, alice, transactional_id="mine", transaction_timeout=ms(1000), producer_id=-1,
                       producer_epoch=-1)
        assert r.error_code.value == 0
        assert await add(call, 3, r.producer_id, 0, ("t", 0), tid="theirs", session=alice) == {("t", 0): 53}
        assert await add(call, 3, r.producer_id, 0, ("t", 0), tid="mine", session=alice) == {("t", 0): 0}
        a = await call(25, 3, alice, transactional_id="mine", producer_id=r.producer_id, producer_epoch=0, group_id="g")
        assert a.error_code.value == 30  # READ on the group
        e = await call(26, 3, alice, transactional_id="theirs", producer_id=r.producer_id, producer_epoch=0,
                       committed=True)
        assert e.error_code.value == 53
        f = await call(10, 4, alice, key_type=1, coordinator_keys=("theirs", "mine"))
        assert [c.error_code.value for c in f.coordinators] == [53, 0]  # DESCRIBE (WRITE implies it)
        await init(call, 4, tid="theirs")  # the super user's
        listed = await call(66, 0, alice, state_filters=(), producer_id_filters=())
        assert [s.transactional_id for s in listed.transaction_states] == ["mine"]  # alice may describe hers only
        w = await call(27, 1, alice, markers=(nested(27, 1, "WritableTxnMarker", producer_id=1, producer_epoch=0,
                                                     transaction_result=False, coordinator_epoch=0, topics=(
            nested(27, 1, "WritableTxnMarkerTopic", name="t", partition_indexes=(0,)),)),))
        assert w.markers[0].topics[0].partitions[0].error_code.value == 31  # CLUSTER_ACTION

    scenario(tmp_path, body, **{"super.users": "User:ANONYMOUS"})


def test_list_and_describe_transactions_from_the_coordinators_state(tmp_path):
    async def body(broker, call):
        _, a, _ = await init(call, 4, tid="a")
        _, b, _ = await init(call, 4, tid="b")
        assert (await add(call, 3, b, 0, ("t", 1), tid="b")) == {("t", 1): 0}
        everything = await call(66, 0, state_filters=(), producer_id_filters=())
        assert [(s.transactional_id, s.producer_id, s.transaction_state) for s in everything.transaction_states] == [
            ("a", a, "Empty"), ("b", b, "Ongoing")]
        ongoing = await call(66, 0, state_filters=("Ongoing", "Nonsense"), producer_id_filters=())
        assert [s.transactional_id for s in ongoing.transaction_states] == ["b"]
        assert ongoing.unknown_state_filters == ("Nonsense",)
        by_pid = await call(66, 0, state_filters=(), producer_id_filters=(a,))
        assert [s.transactional_id for s in by_pid.transaction_states] == ["a"]
        none = await call(66, 0, state_filters=("Nonsense",), producer_id_filters=())
        assert none.transaction_states == ()  # an unknown state matches nothing
        d = await call(65, 0, transactional_ids=("b", "a", "zzz", ""))
        sb, sa, sz, se = d.transaction_states
        assert (sb.error_code.value, sb.transaction_state, sb.producer_id, sb.producer_epoch) == (0, "Ongoing", b, 0)
        assert sb.transaction_timeout == ms(10_000) and sb.transaction_start_time.timestamp() > 0
        assert [(t.topic, t.partitions) for t in sb.topics] == [("t", (1,))]
        assert (sa.error_code.value, sa.transaction_state, sa.topics) == (0, "Empty", ())
        assert sa.transaction_start_time.timestamp() == -0.001  # Kafka's -1: no transaction open
        assert (sz.error_code.value, se.error_code.value) == (105, 42)

    scenario(tmp_path, body)


def produce_request(version: int, tid: str | None, records: bytes, partition: int = 0):
    module = importlib.import_module(f"kio.schema.produce.v{version}.request")
    data = module.PartitionProduceData(index=partition, records=records)
    return dict(transactional_id=tid, acks=-1, timeout=ms(1000),
                topic_data=(module.TopicProduceData(name="t", partition_data=(data,)),))


def test_produce_refuses_a_transactional_batch_outside_the_transaction(tmp_path):
    async def body(broker, call):
        _, pid, epoch = await init(call, 4)
        batch = build_batch([b"k"], [b"v"], [1], info=BatchInfo(producer_id=pid, producer_epoch=epoch, base_sequence=0,
                                                               is_transactional=True))

        async def produce(tid, records=batch, partition=0):
            r = await call(0, 9, **produce_request(9, tid, records, partition))
            p = r.responses[0].partition_responses[0]
            return p.error_code.value, p.error_message

        assert await produce(None) == (53, "Transactional Id authorization failed.")  # no transactional id
        code, message = await produce("app")
        assert (code, message) == (48, "Partition was not added to the transaction")  # INVALID_TXN_STATE
        assert await add(call, 3, pid, epoch, ("t", 1)) == {("t", 1): 0}
        assert (await produce("app"))[0] == 48  # partition 1 was added, not partition 0
        assert (await produce("other"))[0] == 49  # INVALID_PRODUCER_ID_MAPPING
        assert (await init(call, 4))[0] == 51  # a newer producer fences this one (its abort answers CONCURRENT)
        txn = broker.extras["transactions"]
        while txn.transactions["app"].state.value != "CompleteAbort":
            await asyncio.sleep(0.01)
        assert (await produce("app", partition=1))[0] == 47  # fenced: INVALID_PRODUCER_EPOCH
        assert broker.cl.partition("t", 0).log_end_offset == 0  # nothing was appended
        # a batch that is not transactional is not the coordinator's business
        plain = build_batch([b"k"], [b"v"], [1])
        assert (await produce("app", plain))[0] == 0

    scenario(tmp_path, body)


def test_requests_while_transaction_state_loads_are_told_to_wait(tmp_path):
    """The replay of ``__transaction_state`` is held until the test lets it go: meanwhile every request
    that needs the state answers COORDINATOR_LOAD_IN_PROGRESS (14), which clients retry."""
    async def main() -> None:
        broker = apis.install(Broker(tmp_path / "d", ServerConfig({"transaction.state.log.num.partitions": "2"}),
                                     host="127.0.0.1", port=9092, background=False))
        txn = broker.extras["transactions"]
        release = asyncio.Event()
        real_load = txn.store.load
        loop = asyncio.get_running_loop()

        def held_load(now):
            asyncio.run_coroutine_threadsafe(release.wait(), loop).result(10)
            return real_load(now)
        txn.store.load = held_load
        wire = Connection()

        async def call(key, version, **fields):
            req = Request(key, version, 7, "client", request_class(key, version)(**fields), 0)
            resp = await broker.handle(req, ANYONE)
            assert wire.encode(req, resp)
            return resp
        try:
            await broker.start()
            assert txn.loading
            assert await init(call, 4) == (14, -1, -1)
            assert (await call(66, 0, state_filters=(), producer_id_filters=())).error_code.value == 14
            assert (await call(65, 0, transactional_ids=("app",))).transaction_states[0].error_code.value == 14
            assert (await call(26, 3, transactional_id="app", producer_id=1, producer_epoch=0,
                               committed=True)).error_code.value == 14
            release.set()
            while txn.loading:
                await asyncio.sleep(0.01)
            assert (await init(call, 4))[0] == 0
        finally:
            release.set()
            await broker.stop()
            broker.close()
    asyncio.run(asyncio.wait_for(main(), 30))


def test_write_txn_markers_writes_a_marker_per_partition(tmp_path):
    async def body(broker, call):
        def marker(pid, commit, *partitions, topic="t"):
            return nested(27, 1, "WritableTxnMarker", producer_id=pid, producer_epoch=0, transaction_result=commit,
                          coordinator_epoch=0, topics=(nested(27, 1, "WritableTxnMarkerTopic", name=topic,
                                                              partition_indexes=partitions),))
        w = await call(27, 1, markers=(marker(5, False, 0, 7), marker(-1, True, 1), marker(6, True, 0, topic="nope")))
        assert [(m.producer_id, [(t.name, p.partition_index, p.error_code.value) for t in m.topics
                                 for p in t.partitions]) for m in w.markers] == [
            (5, [("t", 0, 0), ("t", 7, 3)]), (-1, [("t", 1, 42)]), (6, [("nope", 0, 3)])]
        (only,) = list(broker.cl.partition("t", 0).batches())
        assert only.is_control and only.producer_id == 5  # the ABORT marker, nothing else written
        assert list(broker.cl.partition("t", 1).batches()) == []

    scenario(tmp_path, body)
