"""Kafka requests and responses as bytes, for tests that talk to the broker without a Kafka client.

Requests are built with kio's writers from kio's request entities, so the bytes come from Kafka's own
schemas rather than from the code under test; responses are read back with kio's readers. ``RawClient``
is a blocking socket speaking that framing, which lets a test send exactly what a client library would
never send (a repeated batch, a zstd batch on Produce v3, a half frame) and see exactly what comes back.
"""

from __future__ import annotations

import contextlib
import datetime
import importlib.util
import io
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Self

from kio.serial import entity_reader, entity_writer

API_VERSIONS = 18
_I32 = struct.Struct(">i")


def module_of(api: str, version: int, kind: str):
    """kio's module holding ``api``'s request or response classes at ``version`` (``kind``: request/response)."""
    return importlib.import_module(f"kio.schema.{api}.v{version}.{kind}")


def serve_process_class() -> type:
    """``ServeProcess`` from this directory's conftest.py, for module-scoped servers.

    Loaded by path: several test directories have a ``conftest`` module, and which one ``import
    conftest`` finds depends on what pytest collected last."""
    spec = importlib.util.spec_from_file_location("compactlog_tests_server_conftest",
                                                  Path(__file__).with_name("conftest.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.ServeProcess


@contextlib.contextmanager
def serving(data_dir: Path, overrides: dict[str, str] | None = None) -> Iterator[Any]:
    """A started ``ServeProcess`` on ``data_dir`` for a module-scoped fixture; killed when the block ends."""
    s = serve_process_class()(data_dir, overrides)
    s.start()
    try:
        yield s
    finally:
        s.kill()


def committed_and_open_transaction(bootstrap: str) -> Any:
    """Create topic ``live`` and leave in it one committed transaction (id ``done``) and one open one
    (id ``live``, a long timeout); returns the open one's producer, which the caller keeps referenced."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic("live", 1, 1)]).values():
        f.result(30)
    done = Producer({"bootstrap.servers": bootstrap, "transactional.id": "done"})
    done.init_transactions(30)
    done.begin_transaction()
    done.produce("live", b"committed", partition=0)
    done.commit_transaction(30)
    live = Producer({"bootstrap.servers": bootstrap, "transactional.id": "live", "transaction.timeout.ms": 600_000})
    live.init_transactions(30)
    live.begin_transaction()
    live.produce("live", b"open", partition=0)
    assert live.flush(30) == 0
    return live


def header_bytes(body: Any, correlation_id: int, client_id: str | None) -> bytes:
    """The request header kio's schema pairs with ``body``'s class (v1, or v2 for flexible versions)."""
    cls = type(body)
    header_cls = cls.__header_schema__
    out = io.BytesIO()
    entity_writer(header_cls)(out, header_cls(request_api_key=cls.__api_key__, request_api_version=cls.__version__,
                                              correlation_id=correlation_id, client_id=client_id))
    return out.getvalue()


def body_bytes(body: Any) -> bytes:
    out = io.BytesIO()
    entity_writer(type(body))(out, body)
    return out.getvalue()


def request_frame(body: Any, correlation_id: int = 1, client_id: str | None = "compactlog-tests") -> bytes:
    """A whole request frame: size, header, body."""
    payload = header_bytes(body, correlation_id, client_id) + body_bytes(body)
    return _I32.pack(len(payload)) + payload


def frame(payload: bytes) -> bytes:
    """``payload`` with its size in front (for hand-made, possibly broken, requests)."""
    return _I32.pack(len(payload)) + payload


def response_class_for(request_body: Any) -> type:
    """kio's response class answering ``request_body``'s API and version."""
    cls = type(request_body)
    mod = module_of(cls.__module__.split(".")[2], cls.__version__, "response")
    name = cls.__name__.removesuffix("Request") + "Response"
    return getattr(mod, name)


def decode_response(request_body: Any, payload: bytes) -> tuple[int, Any]:
    """(correlation id, response entity) from a response frame without its size.

    The header is v1 (a tagged-field section after the correlation id) for flexible versions, except
    for ApiVersions, which Kafka always answers with header v0 so that any client can read it.
    """
    cls = response_class_for(request_body)
    (correlation,) = _I32.unpack_from(payload, 0)
    pos = 4
    if cls.__flexible__ and cls.__api_key__ != API_VERSIONS:
        assert payload[pos] == 0, "a response header with tagged fields"
        pos += 1
    body, used = entity_reader(cls)(memoryview(payload), pos)
    assert pos + used == len(payload), f"{len(payload) - pos - used} bytes after the {cls.__name__}"
    return correlation, body


def ms(value: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value)


class RawClient:
    """One blocking connection speaking Kafka framing; ``call`` sends a request and reads its answer."""

    def __init__(self, host: str, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.correlation = 0

    @classmethod
    def to(cls, server, timeout: float = 10.0) -> RawClient:
        return cls("127.0.0.1", server.port, timeout)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def send(self, body: Any, correlation_id: int | None = None) -> int:
        """Send one request; returns its correlation id."""
        if correlation_id is None:
            self.correlation += 1
            correlation_id = self.correlation
        self.sock.sendall(request_frame(body, correlation_id))
        return correlation_id

    def read_exactly(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(min(n, 1 << 20))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def read_frame(self) -> bytes:
        (size,) = _I32.unpack(self.read_exactly(4))
        return self.read_exactly(size)

    def receive(self, body: Any, correlation_id: int) -> Any:
        """The answer to ``body`` sent earlier with ``correlation_id``."""
        correlation, response = decode_response(body, self.read_frame())
        assert correlation == correlation_id, (correlation, correlation_id)
        return response

    def call(self, body: Any) -> Any:
        return self.receive(body, self.send(body))

    def closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True once the broker has closed the connection (EOF or reset) within ``timeout`` seconds;
        anything the broker still sends first is read and dropped."""
        self.sock.settimeout(timeout)
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                if not self.sock.recv(65536):
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False
        return False


# request builders for the APIs the tests use --------------------------------------------------------

def api_versions(version: int = 0):
    mod = module_of("api_versions", version, "request")
    if version >= 3:
        return mod.ApiVersionsRequest(client_software_name="compactlog-tests", client_software_version="1.0")
    return mod.ApiVersionsRequest()


def metadata(topics: list[str] | None, version: int = 8, auto_create: bool = False):
    mod = module_of("metadata", version, "request")
    extra = {}
    if version >= 4:
        extra["allow_auto_topic_creation"] = auto_create
    if version >= 8:
        extra["include_topic_authorized_operations"] = False
    if 8 <= version <= 10:  # v11 left the cluster's operations to DescribeCluster
        extra["include_cluster_authorized_operations"] = False
    if topics is None and version == 0:
        topics = []  # v0 has no null list: an empty one means every topic
    ids = {"topic_id": None} if version >= 10 else {}  # v10+ may name topics by id; these go by name
    names = None if topics is None else tuple(mod.MetadataRequestTopic(name=t, **ids) for t in topics)
    return mod.MetadataRequest(topics=names, **extra)


def produce(topic: str, partition: int, records: bytes | None, version: int = 8, acks: int = -1):
    mod = module_of("produce", version, "request")
    return mod.ProduceRequest(
        transactional_id=None, acks=acks, timeout=ms(10_000),
        topic_data=(mod.TopicProduceData(name=topic, partition_data=(
            mod.PartitionProduceData(index=partition, records=records),)),),
    )


def fetch(topic, partition: int, offset: int, version: int = 11, max_wait: int = 0, min_bytes: int = 1,
          max_bytes: int = 1 << 20):
    """A one-partition Fetch; ``topic`` is a name, or from v13 a topic id (a ``uuid.UUID``)."""
    mod = module_of("fetch", version, "request")
    part = {"partition": partition, "fetch_offset": offset, "partition_max_bytes": max_bytes}
    if version >= 5:
        part["log_start_offset"] = -1
    if version >= 9:
        part["current_leader_epoch"] = -1
    top = {"replica_id": -1, "max_wait": ms(max_wait), "min_bytes": min_bytes, "max_bytes": max_bytes,
           "isolation_level": 0}
    if version >= 7:
        top.update(session_id=0, session_epoch=-1, forgotten_topics_data=())
    if version >= 11:
        top["rack_id"] = ""
    fields = {f for f in mod.FetchRequest.__dataclass_fields__}
    return mod.FetchRequest(**{k: v for k, v in top.items() if k in fields},
                            topics=(mod.FetchTopic(**{"topic_id" if version >= 13 else "topic": topic},
                                                   partitions=(mod.FetchPartition(**part),)),))


def list_offsets(topic: str, partition: int, timestamp: int, version: int = 5):
    mod = module_of("list_offsets", version, "request")
    part = {"partition_index": partition, "timestamp": timestamp}
    if version >= 4:
        part["current_leader_epoch"] = -1
    top = {"replica_id": -1}
    if version >= 2:
        top["isolation_level"] = 0
    return mod.ListOffsetsRequest(**top, topics=(mod.ListOffsetsTopic(name=topic, partitions=(
        mod.ListOffsetsPartition(**part),)),))


def init_producer_id(version: int = 1):
    mod = module_of("init_producer_id", version, "request")
    return mod.InitProducerIdRequest(transactional_id=None, transaction_timeout=ms(60_000))


def describe_cluster():
    mod = module_of("describe_cluster", 0, "request")
    return mod.DescribeClusterRequest(include_cluster_authorized_operations=False)
