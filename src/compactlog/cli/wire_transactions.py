"""The requests behind ``compactlog transactions`` (Kafka's kafka-transactions.sh), written by hand.

librdkafka's Python admin client has no call for ListTransactions, DescribeTransactions,
DescribeProducers or WriteTxnMarkers, so each goes out with kio's schemas over a connection of ours
(``sasl_client.connect``: TLS and SASL as ``--command-config`` says), to the broker Kafka's admin
client would pick: ListTransactions to every broker, DescribeTransactions to the transactional id's
coordinator (FindCoordinator, key type 1), DescribeProducers to the partition's leader (or the broker
``--broker-id`` names), WriteTxnMarkers to the partition's leader. The brokers and leaders come from
Metadata, read through ``wire.WireClient`` (whose first call gives the one 'no broker answered' line
every wire command gives).

Each broker's refusal becomes our typed error carrying the message Kafka's admin client would give it
(``DescribeTransactions request for transactionalId `x` failed because the ID could not be found``...),
so the command prints what kafka-transactions.sh prints.
"""

from __future__ import annotations

import datetime
import functools
import logging
import time
from dataclasses import dataclass
from typing import Iterable, Sequence

from ..errors import CompactLogError, UnknownTopicOrPartitionError, error_for, shown
from ..partition import ProducerInfo  # what DescribeProducers answers per producer, as the partition keeps it
from .wire import TIMEOUT_S, WireClient

log = logging.getLogger("compactlog.wire")

MAX_ANSWER = 64 << 20  # every transactional id or producer of a broker, in one answer
TXN_KEY_TYPE = 1  # FindCoordinator's key type for a transactional id
LIST_TRANSACTIONS, API_VERSIONS = 66, 18
COORDINATOR_LOAD_IN_PROGRESS = 14  # asked again until TIMEOUT_S, as Kafka's admin client retries it
RETRY_S = 0.2
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, TRANSACTIONAL_ID_NOT_FOUND = 53, 105
TOPIC_AUTHORIZATION_FAILED, INVALID_TOPIC = 29, 17
CLUSTER_AUTHORIZATION_FAILED, INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED = 31, 47, 52


@dataclass(frozen=True)
class Listing:
    """One transactional id as ListTransactions lists it."""

    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True)
class Description:
    """One transactional id as DescribeTransactions describes it (start time None: no transaction open)."""

    coordinator_id: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    timeout_ms: int
    start_time_ms: int | None
    partitions: tuple[tuple[str, int], ...]


def partition_name(topic: str, partition: int) -> str:
    """A partition as Kafka's TopicPartition prints itself."""
    return f"{topic}-{partition}"


def _times_as_numbers(cls, nested: dict | None = None):
    """A copy of kio's schema ``cls`` whose millisecond times are read as plain numbers: kio refuses a
    negative time, and a broker answers -1 (Kafka's "none") for the start of a transaction that is not
    open. ``nested`` names fields to read with such copies of their entities."""
    import dataclasses

    from kio.static.primitive import i64

    fields = []
    for f in dataclasses.fields(cls):
        kind, meta = f.type, dict(f.metadata)
        if meta.get("kafka_type") == "datetime_i64":
            kind, meta = i64, {**meta, "kafka_type": "int64"}
        fields.append((f.name, (nested or {}).get(f.name, kind), dataclasses.field(metadata=meta)))
    kept = {k: v for k, v in vars(cls).items() if k in ("__type__", "__version__", "__flexible__", "__api_key__",
                                                           "__header_schema__")}
    return dataclasses.make_dataclass(cls.__name__, fields, namespace=kept, frozen=True, slots=True)


@functools.cache
def _describe_transactions_answer():
    """DescribeTransactions v0's answer, its start times read as numbers (``_times_as_numbers``)."""
    from kio.schema.describe_transactions.v0 import response

    return _times_as_numbers(response.DescribeTransactionsResponse, {
        "transaction_states": tuple[_times_as_numbers(response.TransactionState), ...]})


def _ms(value) -> int:
    """A kio time (a datetime, or a timedelta for a duration) in milliseconds."""
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    return round(value.timestamp() * 1000)


class WireTransactions:
    """The transactional state of the cluster behind ``bootstrap``."""

    def __init__(self, bootstrap: str) -> None:
        self.client = WireClient(bootstrap)
        self.metadata = self.client._metadata()
        self.brokers = {b.id: (b.host, b.port) for b in self.metadata.brokers.values()}

    # one request to one broker ------------------------------------------------------------------
    def ask(self, broker_id: int, body, response_cls):
        from .sasl_client import ask, connect

        if broker_id not in self.brokers:
            raise CompactLogError(f"no broker {broker_id} in the cluster (brokers: "
                                  f"{', '.join(map(str, sorted(self.brokers))) or 'none'})")
        host, port = self.brokers[broker_id]
        where = f"{host}:{port} (broker {broker_id})"
        try:
            with connect(host, port, TIMEOUT_S) as sock:
                return ask(sock, body, response_cls, MAX_ANSWER, where)
        except OSError as exc:
            raise CompactLogError(f"no answer to {type(body).__name__.removesuffix('Request')} from {where}: "
                                  f"{exc}") from None

    def max_version(self, broker_id: int, api_key: int) -> int:
        """The newest version of ``api_key`` the broker takes (ApiVersions), -1 for none."""
        from kio.schema.api_versions.v3 import request, response

        answer = self.ask(broker_id, request.ApiVersionsRequest(client_software_name="compactlog-cli",
                                                                client_software_version="0"),
                          response.ApiVersionsResponse)
        return next((int(k.max_version) for k in answer.api_keys if k.api_key == api_key), -1)

    # the cluster's topics -----------------------------------------------------------------------
    def leader(self, topic: str, partition: int) -> int:
        meta = self.metadata.topics.get(topic)
        if meta is None or partition not in meta.partitions:
            raise UnknownTopicOrPartitionError("This server does not host this topic-partition.")
        return meta.partitions[partition].leader

    def topic_partitions(self, topics: Iterable[str] | None, broker_id: int | None) -> list[tuple[str, int]]:
        """Every partition of ``topics`` (all topics, internal ones too, when None), only those with a
        replica on ``broker_id`` when it is given (find-hanging's scope)."""
        found = []
        for name in sorted(self.metadata.topics) if topics is None else topics:
            meta = self.metadata.topics.get(name)
            if meta is None:
                raise UnknownTopicOrPartitionError("This server does not host this topic-partition.")
            for index in sorted(meta.partitions):
                if broker_id is None or broker_id in meta.partitions[index].replicas:
                    found.append((name, index))
        return found

    # ListTransactions ---------------------------------------------------------------------------
    def list(self, duration_ms: int | None = None, producer_ids: Iterable[int] = (),
             states: Iterable[str] = ()) -> dict[int, list[Listing]]:
        """Per broker id, the transactional ids its coordinator holds (every broker is asked)."""
        from kio.schema.list_transactions.v0 import request as v0, response as r0
        from kio.schema.list_transactions.v1 import request as v1, response as r1

        out: dict[int, list[Listing]] = {}
        for broker_id in sorted(self.brokers):
            if duration_ms is not None and duration_ms >= 0:
                if self.max_version(broker_id, LIST_TRANSACTIONS) < 1:
                    raise CompactLogError("Duration filter can be set only when using API version 1 or higher. "
                                          "If client is connected to an older broker, do not specify duration "
                                          "filter or set duration filter to -1.")
                body = v1.ListTransactionsRequest(state_filters=tuple(states), producer_id_filters=tuple(producer_ids),
                                                  duration_filter=duration_ms)
                response_cls = r1.ListTransactionsResponse
            else:
                body = v0.ListTransactionsRequest(state_filters=tuple(states), producer_id_filters=tuple(producer_ids))
                response_cls = r0.ListTransactionsResponse
            answer = self._until_loaded(lambda: self.ask(broker_id, body, response_cls), lambda a: a.error_code)
            if answer.error_code != 0:
                raise error_for(int(answer.error_code), f"ListTransactions request sent to broker {broker_id} failed "
                                                        "with an unexpected exception")
            out[broker_id] = [Listing(t.transactional_id, int(t.producer_id), t.transaction_state)
                              for t in answer.transaction_states]
        return out

    # DescribeTransactions -----------------------------------------------------------------------
    def coordinator(self, transactional_id: str) -> int:
        """The broker id of ``transactional_id``'s coordinator (FindCoordinator v4, key type 1)."""
        from kio.schema.find_coordinator.v4 import request, response

        answer = self.ask(self._any_broker(), request.FindCoordinatorRequest(
            key_type=TXN_KEY_TYPE, coordinator_keys=(transactional_id,)), response.FindCoordinatorResponse)
        (found,) = answer.coordinators
        if found.error_code != 0:
            raise error_for(int(found.error_code), found.error_message or None)
        self.brokers.setdefault(int(found.node_id), (found.host, int(found.port)))
        return int(found.node_id)

    def describe(self, transactional_ids: Sequence[str]) -> dict[str, Description]:
        """Each id's description, asked of its coordinator; a refusal is raised in Kafka's admin words."""
        return {tid: self._describe_one(tid) for tid in transactional_ids}

    def describe_or_none(self, transactional_id: str) -> Description | None:
        """The id's description, None when its coordinator does not hold it (TRANSACTIONAL_ID_NOT_FOUND)."""
        try:
            return self._describe_one(transactional_id)
        except CompactLogError as exc:
            if getattr(exc, "code", None) == TRANSACTIONAL_ID_NOT_FOUND:
                return None
            raise

    def _describe_one(self, tid: str) -> Description:
        from kio.schema.describe_transactions.v0 import request

        coordinator = self.coordinator(tid)
        answer_cls = _describe_transactions_answer()
        answer = self._until_loaded(
            lambda: self.ask(coordinator, request.DescribeTransactionsRequest(transactional_ids=(tid,)), answer_cls),
            lambda a: a.transaction_states[0].error_code if a.transaction_states else 0)
        (state,) = answer.transaction_states
        code = int(state.error_code)
        about = f"DescribeTransactions request for transactionalId `{tid}` "
        if code == TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
            raise error_for(code, about + "failed due to authorization failure")
        if code == TRANSACTIONAL_ID_NOT_FOUND:
            raise error_for(code, about + "failed because the ID could not be found")
        if code != 0:
            raise error_for(code, about + "failed due to unexpected error")
        start = int(state.transaction_start_time)
        return Description(coordinator, tid, int(state.producer_id), int(state.producer_epoch),
                           state.transaction_state, _ms(state.transaction_timeout), None if start < 0 else start,
                           tuple((t.topic, int(p)) for t in state.topics for p in t.partitions))

    # DescribeProducers --------------------------------------------------------------------------
    def producers(self, partitions: Sequence[tuple[str, int]], broker_id: int | None = None
                  ) -> dict[tuple[str, int], list[ProducerInfo]]:
        """Each partition's producers, asked of its leader (or of ``broker_id``), one request per broker."""
        from kio.schema.describe_producers.v0 import request, response

        by_broker: dict[int, list[tuple[str, int]]] = {}
        for tp in partitions:
            by_broker.setdefault(self.leader(*tp) if broker_id is None else broker_id, []).append(tp)
        out: dict[tuple[str, int], list[ProducerInfo]] = {}
        for target, tps in by_broker.items():
            topics: dict[str, list[int]] = {}
            for t, p in tps:
                topics.setdefault(t, []).append(p)
            body = request.DescribeProducersRequest(topics=tuple(
                request.TopicRequest(name=t, partition_indexes=tuple(ps)) for t, ps in topics.items()))
            answer = self.ask(target, body, response.DescribeProducersResponse)
            for topic in answer.topics:
                for part in topic.partitions:
                    key = (topic.name, int(part.partition_index))
                    _check_producers(key, int(part.error_code), part.error_message)
                    out[key] = [ProducerInfo(int(s.producer_id), int(s.producer_epoch), int(s.last_sequence),
                                         int(s.last_timestamp), int(s.coordinator_epoch),
                                         int(s.current_txn_start_offset)) for s in part.active_producers]
        return out

    # WriteTxnMarkers ----------------------------------------------------------------------------
    def abort(self, topic: str, partition: int, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """An ABORT marker for the producer's transaction in the partition, written by its leader, as
        Kafka's admin client's abortTransaction sends it."""
        from kio.schema.write_txn_markers.v1 import request, response

        spec = (f"AbortTransactionSpec(topicPartition={partition_name(topic, partition)}, producerId={producer_id}, "
                f"producerEpoch={producer_epoch}, coordinatorEpoch={coordinator_epoch})")
        body = request.WriteTxnMarkersRequest(markers=(request.WritableTxnMarker(
            producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=False,
            topics=(request.WritableTxnMarkerTopic(name=topic, partition_indexes=(partition,)),),
            coordinator_epoch=coordinator_epoch),))
        answer = self.ask(self.leader(topic, partition), body, response.WriteTxnMarkersResponse)
        codes = [int(p.error_code) for m in answer.markers for t in m.topics for p in t.partitions]
        if len(codes) != 1:
            raise CompactLogError(f"WriteTxnMarkers response included unexpected marker entries (expected to find "
                                  f"exactly one entry with producerId {producer_id})")
        code = codes[0]
        if code == CLUSTER_AUTHORIZATION_FAILED:
            raise error_for(code, f"WriteTxnMarkers request with {spec} failed due to cluster authorization error")
        if code == INVALID_PRODUCER_EPOCH:
            raise error_for(code, f"WriteTxnMarkers request with {spec} failed due an invalid producer epoch")
        if code == TRANSACTION_COORDINATOR_FENCED:
            raise error_for(code, f"WriteTxnMarkers request with {spec} failed since the provided coordinator epoch "
                                  f"{coordinator_epoch} has been fenced by the active coordinator")
        if code != 0:
            message = str(error_for(code))
            raise error_for(code, f"WriteTxnMarkers request with {spec} failed due to unexpected error: {message}")

    @staticmethod
    def _until_loaded(send, code_of):
        """An answer other than COORDINATOR_LOAD_IN_PROGRESS (a coordinator replaying its topic after a
        start), asked again for up to TIMEOUT_S; the last answer after that."""
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            answer = send()
            if int(code_of(answer)) != COORDINATOR_LOAD_IN_PROGRESS or time.monotonic() >= deadline:
                return answer
            time.sleep(RETRY_S)

    def _any_broker(self) -> int:
        node = self.client.node_id
        return node if node in self.brokers else min(self.brokers)


def _check_producers(key: tuple[str, int], code: int, message: str | None) -> None:
    """A partition's refusal in the words of Kafka's DescribeProducers handler."""
    name = partition_name(*key)
    if code == 0:
        return
    if code == INVALID_TOPIC:
        raise error_for(code, f"Failed to fetch metadata for partition {name} due to invalid topic error: "
                              f"{message or str(error_for(code))}")
    if code == TOPIC_AUTHORIZATION_FAILED:
        raise error_for(code, f"Failed to describe active producers for partition {name} due to authorization "
                              f"failure on topic `{shown(key[0])}`")
    raise error_for(code, f"Failed to describe active producers for partition {name} due to unexpected error")
