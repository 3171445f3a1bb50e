"""The broker: one data directory served to Kafka clients, request by request.

``Broker`` owns the embedded ``CompactLog`` (storage, cleaner, Pulsar-style compaction, all running in
the background as in Kafka) and answers decoded requests (``protocol.Request``) with kio response
entities. Each API lives in the module named after it, above this one: ``apis.install`` fills the
broker's handler table from them (and lets the SASL module set the check that runs before a login), so
this module only routes requests through that table, turns our typed errors into Kafka's codes, and
wakes parked fetches when data arrives.

Everything here runs on the server's event loop. Work that touches the disk or inflates batches runs in
threads (``Broker.blocking``); compiled kernels release the GIL there.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from kio.schema.errors import ErrorCode

from .. import api, broker_files
from ..errors import CompactLogError, KafkaStorageError
from ..storage.configdef import parse_properties
from .protocol import ProtocolError, Request
from .server_config import ServerConfig
from .topic_ids import topic_text

log = logging.getLogger(__name__)

Handler = Callable[["Broker", Request, "Session"], Awaitable[Any]]
LoginCheck = Callable[["Session", Request], None]
NO_THROTTLE = datetime.timedelta(0)


@dataclass
class Session:
    """What the broker knows of one client connection."""

    client_host: str
    client_port: int
    listener: str = "PLAINTEXT"
    principal: str = "User:ANONYMOUS"
    authenticated: bool = True
    extra: dict = field(default_factory=dict)  # per-connection state of APIs that need one (SASL)


def error_code(exc: BaseException | int | None) -> ErrorCode:
    """Kafka's error code for one of our errors (or a code), UNKNOWN_SERVER_ERROR for anything else."""
    if exc is None:
        return ErrorCode.none
    if isinstance(exc, int):
        return ErrorCode(exc)
    if isinstance(exc, CompactLogError):
        try:
            return ErrorCode(exc.code)
        except ValueError:
            pass
    return ErrorCode.unknown_server_error


def refuse_before_login(session: Session, req: Request) -> None:
    """The check before a login while no SASL module installed its own: nothing gets through."""
    raise ProtocolError(f"{req.name} v{req.api_version} on listener {session.listener} before authentication; "
                        "closing the connection")


def ms(value: int | float) -> datetime.timedelta:
    """kio carries Kafka's millisecond fields as timedeltas."""
    return datetime.timedelta(milliseconds=value)


class Broker:
    """Answers requests against one data directory."""

    def __init__(self, data_dir, config: ServerConfig, *, host: str, port: int, background: bool = True) -> None:
        self.config = config
        self.node_id: int = config.get("node.id")
        self.host = host
        self.port = port
        self.cl = api.CompactLog(data_dir, config=config, background=background)
        try:
            self.cluster_id = self._cluster_id()
        except BaseException:
            self.cl.close()
            raise
        self._data_arrived = asyncio.Event()
        self.handlers: dict[int, Handler] = {}
        self.services: list = []  # things with ``async start()`` / ``async stop()`` (the group coordinator)
        self.advertised: dict[str, tuple[str, int]] = {}  # listener name -> (host, port) told to clients
        self.server = None  # the network shell, when there is one
        self.extras: dict[str, Any] = {}  # state of API modules, by name
        self.stopping = False
        # What may come before a login on a SASL listener; the SASL module installs its rule here.
        self.check_before_login: LoginCheck = refuse_before_login

    def _cluster_id(self) -> str:
        """A stable cluster id kept beside the data in ``meta.properties``, as Kafka keeps it. Made when
        the file is missing; a file without one is refused rather than overwritten (Kafka will not start)."""
        data_dir = self.cl.data_dir
        text = broker_files.read_text(data_dir, broker_files.META_PROPERTIES, encoding="latin-1")
        if text is None:
            cid = topic_text(uuid.uuid4())  # Kafka's random Uuid in its text form, as kafka-storage makes one
            broker_files.write_text(data_dir, broker_files.META_PROPERTIES,
                                    f"#compactlog\nversion=1\ncluster.id={cid}\nnode.id={self.node_id}\n")
            return cid
        cid = parse_properties(text).get("cluster.id", "").strip()
        if not cid:
            path = broker_files.path_of(data_dir, broker_files.META_PROPERTIES)
            raise KafkaStorageError(f"{path} holds no cluster.id; restore it, or remove the file to start a new cluster id")
        return cid

    def address(self, session: Session) -> tuple[str, int]:
        """The (host, port) clients of ``session``'s listener are told to use."""
        return self.advertised.get(session.listener, (self.host, self.port))

    # request routing ------------------------------------------------------------------------------
    async def handle(self, req: Request, session: Session) -> Any:
        """The response entity for ``req`` (None: send nothing, as for acks=0 produce)."""
        if not session.authenticated:  # a SASL listener before the login: only the login's own requests
            self.check_before_login(session, req)
        handler = self.handlers[req.api_key]
        return await handler(self, req, session)

    def authorize(self, session: Session, operation: str, resource_type: str, name: str = "kafka-cluster") -> bool:
        """Whether ``session``'s principal may do ``operation`` (Kafka's names: READ, WRITE, CREATE, DELETE,
        ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE) on the TOPIC, GROUP or CLUSTER
        ``name``, by the ACLs and ``super.users`` (``acls.py``). Every API module asks here, and answers
        TOPIC_ (29), GROUP_ (30) or CLUSTER_AUTHORIZATION_FAILED (31) when refused."""
        return self.extras["authorizer"].authorize(session, operation, resource_type, name)

    async def blocking(self, fn, *args):
        """Run a disk-bound call in a worker thread."""
        return await asyncio.to_thread(fn, *args)

    # fetch wake-ups -------------------------------------------------------------------------------
    def data_arrived(self) -> None:
        """Wake every parked fetch (after an append); they re-check their partitions."""
        self._data_arrived.set()
        self._data_arrived = asyncio.Event()

    async def wait_for_data(self, timeout: float) -> None:
        event = self._data_arrived
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except asyncio.TimeoutError:
            pass

    # lifecycle ------------------------------------------------------------------------------------
    async def start(self) -> None:
        for s in self.services:
            await s.start()

    async def stop(self) -> None:
        self.stopping = True
        self.data_arrived()  # parked fetches answer now
        for s in reversed(self.services):
            try:
                await s.stop()
            except Exception:
                log.exception("stopping %s failed", s)

    def close(self) -> None:
        """Flush, checkpoint and write the clean-shutdown marker (``.kafka_cleanshutdown``)."""
        self.cl.close()
