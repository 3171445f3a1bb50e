"""The three Kafka clients in scope, driven the same way by the TLS, SASL and ACL tests, bounded in time.

Each helper produces a few records and reads them back, or reports how it failed, in a few seconds:
a failing login or handshake must show up as an error, not as a test that waits for a minute.
``module_server`` starts one ``compactlog serve`` for a whole test module (each start costs about a
second), with the listeners and settings the module needs.
"""

from __future__ import annotations

import asyncio
import io
import socket
import struct
import time

import wire
from kio.serial import entity_reader, entity_writer

ServeProcess = wire.serve_process_class()

T = 10  # seconds any one client step may take


def module_server(tmp_path_factory, name: str, **overrides: str) -> ServeProcess:
    d = tmp_path_factory.mktemp(name)
    return ServeProcess(d / "data", {k.replace("_", "."): v for k, v in overrides.items()}).start()


def cli(*args: str) -> str:
    """Run ``compactlog ARGS`` in this process (the CLI the tests use to manage users and ACLs while the
    broker runs) and return its output."""
    from click.testing import CliRunner

    from compactlog.cli import main

    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def add_users(data_dir, users: dict[str, str]) -> None:
    """SCRAM-SHA-256 credentials for each user -> password, as ``kafka-configs --entity-type users`` adds them."""
    for user, password in users.items():
        cli("configs", "--data-dir", str(data_dir), "--alter", "--entity-type", "users", "--entity-name", user,
            "--add-config", f"SCRAM-SHA-256=[password={password}]")


# librdkafka (confluent-kafka) ------------------------------------------------------------------------

def confluent_produce(conf: dict, topic: str, values: list[bytes], timeout: float = T) -> list:
    """Produce ``values``; the delivery errors (None for each success) and any client-level errors."""
    from confluent_kafka import Producer

    errors: list = []
    results: list = []
    p = Producer({"message.timeout.ms": int(timeout * 1000), "error_cb": errors.append, **conf})
    for v in values:
        p.produce(topic, v, on_delivery=lambda err, msg: results.append(err))
    p.flush(timeout + 2)
    return results + [e for e in errors if e is not None and _fatal(e)]


def _fatal(err) -> bool:
    from confluent_kafka import KafkaError

    return err.code() in (KafkaError._AUTHENTICATION, KafkaError._SSL, KafkaError._ALL_BROKERS_DOWN,
                          KafkaError._TRANSPORT)


def confluent_consume(conf: dict, topic: str, expect: int, timeout: float = T) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"group.id": "security-tests", "enable.auto.commit": False, **conf})
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < expect and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                out.append(m.value())
    finally:
        c.close()
    return out


def confluent_login_error(conf: dict, timeout: float = 6.0):
    """The first authentication, TLS or transport error a client meets asking for metadata, or None."""
    from confluent_kafka.admin import AdminClient

    errors: list = []
    admin = AdminClient({"error_cb": errors.append, **conf})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            admin.list_topics(timeout=0.2)
            return None
        except Exception:  # noqa: BLE001 - a timeout while the errors arrive (error_cb runs in poll)
            admin.poll(0)
        fatal = next((e for e in errors if _fatal(e)), None)
        if fatal is not None:
            return fatal
    return "no answer"


# kafka-python ----------------------------------------------------------------------------------------

def kafka_python_roundtrip(topic: str, values: list[bytes], **conf) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    p = KafkaProducer(request_timeout_ms=T * 1000, max_block_ms=T * 1000, **conf)
    try:
        for v in values:
            p.send(topic, v).get(timeout=T)
    finally:
        p.close(timeout=T)
    c = KafkaConsumer(consumer_timeout_ms=3000, request_timeout_ms=T * 1000 + 1, **conf)
    try:
        c.assign([TopicPartition(topic, 0)])
        c.seek_to_beginning()
        out = []
        for m in c:
            out.append(m.value)
            if len(out) >= len(values):
                break
        return out
    finally:
        c.close()


# aiokafka --------------------------------------------------------------------------------------------

def aiokafka_roundtrip(topic: str, values: list[bytes], **conf) -> list[bytes]:
    async def run() -> list[bytes]:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

        p = AIOKafkaProducer(request_timeout_ms=T * 1000, **conf)
        await asyncio.wait_for(p.start(), T)
        try:
            for v in values:
                await asyncio.wait_for(p.send_and_wait(topic, v), T)
        finally:
            await p.stop()
        c = AIOKafkaConsumer(auto_offset_reset="earliest", request_timeout_ms=T * 1000, **conf)
        await asyncio.wait_for(c.start(), T)
        try:
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            await c.seek_to_beginning(tp)
            out: list[bytes] = []
            while len(out) < len(values):
                batch = await asyncio.wait_for(c.getmany(tp, timeout_ms=1000), T)
                out += [m.value for m in batch.get(tp, [])]
            return out
        finally:
            await c.stop()

    return asyncio.run(asyncio.wait_for(run(), 3 * T))


def aiokafka_start_error(**conf) -> Exception | None:
    """The exception a producer's start raises (None: it connected)."""
    async def run():
        from aiokafka import AIOKafkaProducer

        p = AIOKafkaProducer(request_timeout_ms=5000, **conf)
        try:
            await asyncio.wait_for(p.start(), T)
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            return exc
        finally:
            await p.stop()
        return None

    return asyncio.run(run())


# raw frames ------------------------------------------------------------------------------------------

_I32 = struct.Struct(">i")


def frame(body, correlation_id: int) -> bytes:
    """A request frame for a kio request entity (header v1: these tests send non-flexible versions)."""
    cls = type(body)
    out = io.BytesIO()
    entity_writer(cls.__header_schema__)(out, cls.__header_schema__(
        request_api_key=cls.__api_key__, request_api_version=cls.__version__, correlation_id=correlation_id,
        client_id="security-tests"))
    entity_writer(cls)(out, body)
    payload = out.getvalue()
    return _I32.pack(len(payload)) + payload


def read_frame(sock: socket.socket) -> bytes | None:
    """One size-prefixed frame, or None when the broker closed the connection first."""
    def exactly(n: int) -> bytes | None:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                return None
            data += chunk
        return data

    head = exactly(4)
    return None if head is None else exactly(_I32.unpack(head)[0])


def decode(response_cls, payload: bytes):
    """(correlation id, body) of a non-flexible response."""
    body, _ = entity_reader(response_cls)(memoryview(payload), 4)
    return _I32.unpack_from(payload)[0], body


