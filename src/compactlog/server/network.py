"""The asyncio shell around the protocol and the broker: listeners, connections, limits, shutdown.

Each connection reads frames into its ``protocol.Connection`` and answers its requests one at a time, in
the order they came (clients match answers by order as well as by correlation id), as Kafka's
network threads do; other connections are never held up by one that is slow to read or stalled in a
long poll. A connection stops being read while ``queued.max.requests`` requests, or more than
``socket.request.max.bytes`` of them, wait, and waits for the
socket to drain after each answer, so a client that does not read its answers holds no more than one
answer's worth of memory. Anything that is not a request we serve closes that connection only.

A connection on which nothing moves (no bytes read, no answer written, no request being worked on)
for ``connections.max.idle.ms`` is dropped, whether its client went quiet or stopped reading with
answers pending; such a connection is aborted, since a polite close would wait for a flush that never
comes and keep its slot in ``max.connections`` forever. Listeners accept connections only once the
broker is ready to answer them.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import signal
import socket
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Callable, Mapping, Protocol, Sequence

from ..errors import InvalidConfigError, shown
from ..storage.configdef import invalid
from . import apis
from .broker import Broker, Session
from .protocol import NEED_DATA, Connection, Frame, ProtocolError, UnsupportedApiVersions, encode_unsupported_api_versions
from .versions import SERVED, ApiRange
from .protocol import SaslToken, encode_sasl_token
from .security import CLOSE_AFTER_RESPONSE, start_session
from .server_config import ServerConfig

log = logging.getLogger(__name__)
WRITE_SLICE = 256 * 1024
# After a refused login is answered, how long the connection waits for the client to close it before
# closing it itself. A client that gets the answer and the close in one read may drop the answer
# (kafka-python 3.0 does) and report a lost connection instead of the refusal.
REFUSAL_LINGER_S = 1.0


@dataclass(frozen=True)
class Listener:
    """One ``listeners`` entry: NAME://host:port, and the security protocol its name maps to."""

    name: str
    security_protocol: str
    host: str
    port: int

    def url(self, port: int | None = None) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port if port is None else port}"


def as_list(value) -> list[str]:
    """A list config's value (defaults are kept as Kafka writes them, comma-separated)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return list(value)


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def parse_listeners(entries, protocol_map) -> list[Listener]:
    """Kafka's ``listeners`` syntax; an empty host binds every interface, as in Kafka."""
    mapping = {}
    for item in as_list(protocol_map):
        name, _, proto = item.partition(":")
        if proto.strip().upper() not in SECURITY_PROTOCOLS:  # Kafka's ConfigException, in its words
            raise InvalidConfigError(f"Invalid security protocol `{shown(proto.strip(), '')}` defined in "
                                     "listener.security.protocol.map")
        mapping[name.strip().upper()] = proto.strip().upper()
    out = []
    for entry in as_list(entries):
        name, sep, rest = entry.strip().partition("://")
        if not sep:
            raise invalid("listeners", entry, "expected NAME://host:port")
        host, _, port = rest.rpartition(":")
        host = host.strip("[]")
        # ASCII digits only (int() would take spaces, '_' and other scripts' digits), counted before
        # int() sees them (it refuses over 4,300 digits with advice meant for programmers)
        if not (port.isascii() and port.isdigit()):
            raise invalid("listeners", entry, "the port is not a number")
        port_no = int(port) if len(port.lstrip("0")) <= 5 else 65536
        name = name.upper()
        if name not in mapping:
            raise InvalidConfigError(f"No security protocol defined for listener {shown(name, '')} "
                                     "(listener.security.protocol.map)")
        if not 0 <= port_no <= 65535:
            raise invalid("listeners", entry, "port out of range")
        out.append(Listener(name, mapping[name], host, port_no))
    if not out:  # an empty value (listeners=, or only commas) would leave nothing to serve on
        raise invalid("listeners", entries, "at least one listener is needed, as NAME://host:port")
    if len({x.name for x in out}) != len(out):
        raise InvalidConfigError("Each listener must have a different name (listeners)")
    return out


class ClientConnection(asyncio.Protocol):
    def __init__(self, server: "KafkaServer", listener: Listener) -> None:
        self.server = server
        self.listener = listener
        self.transport: asyncio.Transport | None = None
        self.conn = Connection(server.config.get("socket.request.max.bytes"), server.served_apis)
        self.queue: collections.deque = collections.deque()
        self.ready = asyncio.Event()
        self.writable = asyncio.Event()
        self.writable.set()
        self.reading = True
        self.task: asyncio.Task | None = None
        self.session: Session | None = None
        self.last_active = asyncio.get_running_loop().time()
        self.handling = False  # a request is with the broker (a parked fetch is not idleness)
        self.max_queued = server.config.get("queued.max.requests")
        self.max_request_bytes = server.config.get("socket.request.max.bytes")
        self.max_login_bytes = server.config.get("sasl.server.max.receive.size")
        self.queued_bytes = 0  # frame bytes of the requests waiting in ``queue``

    # asyncio callbacks ------------------------------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport
        transport.set_write_buffer_limits(high=WRITE_SLICE)
        peer = transport.get_extra_info("peername") or ("?", 0)
        self.session = Session(peer[0], peer[1], listener=self.listener.name)
        start_session(self.session, self.listener.security_protocol, transport)  # principal, SASL or not
        if not self.server.admit(self):
            transport.abort()
            return
        self.task = asyncio.get_running_loop().create_task(self._serve())

    def data_received(self, data: bytes) -> None:
        self.last_active = asyncio.get_running_loop().time()
        # Before a SASL login only small frames are taken (Kafka's sasl.server.max.receive.size): a
        # stranger must not make the broker buffer and parse 100 MB requests it will refuse anyway.
        self.conn.max_request_bytes = (self.max_request_bytes if self.session.authenticated
                                       else min(self.max_login_bytes, self.max_request_bytes))
        self.conn.receive_data(data)
        try:
            while True:
                req = self.conn.next_request()
                if req is NEED_DATA:
                    break
                self.queue.append(req)
                self.queued_bytes += getattr(req, "size", 0)
        except ProtocolError as exc:
            log.info("closing the connection from %s:%s: %s", self.session.client_host, self.session.client_port, exc)
            self.queue.append(None)  # answer what came before, then close
            if self.reading:  # nothing after the bad frame is wanted
                self.transport.pause_reading()
                self.reading = False
        self.ready.set()
        if (len(self.queue) >= self.max_queued or self.queued_bytes > self.max_request_bytes) and self.reading:
            self.transport.pause_reading()
            self.reading = False

    def connection_lost(self, exc) -> None:
        self.server.forget(self)
        if self.task is not None:
            self.task.cancel()

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()
        self.last_active = asyncio.get_running_loop().time()  # the client is reading again

    async def _write_parts(self, parts: list) -> None:
        """Write a large answer in slices, each after the socket took the last.

        asyncio keeps what the socket did not take in one buffer and shifts it after every send, so
        an 8 MB fetch answer handed over at once costs many copies of megabytes; slices of WRITE_SLICE
        bytes written as the socket drains keep that buffer small.
        """
        try:
            for part in parts:
                if self.transport.is_closing():  # the client went away: asyncio warns of every write after
                    return                       # the fifth to a lost socket, and sendfile refuses one
                if hasattr(part, "send"):  # a file range (fetch.FileRegion): sendfile
                    await part.send(self.transport)
                    continue
                view = memoryview(part)
                for i in range(0, len(view), WRITE_SLICE):
                    if not self.writable.is_set():
                        await self.writable.wait()
                    if self.transport.is_closing():
                        return
                    self.transport.write(view[i:i + WRITE_SLICE])
        finally:  # file ranges not sent (the connection went away) give their descriptors back
            for part in parts:
                if hasattr(part, "close"):
                    part.close()

    # serving ----------------------------------------------------------------------------------------
    async def _serve(self) -> None:
        broker = self.server.broker
        try:
            while True:
                while not self.queue:
                    self.ready.clear()
                    await self.ready.wait()
                req = self.queue.popleft()
                if req is None:
                    break
                self.queued_bytes -= getattr(req, "size", 0)
                if (not self.reading and not self.conn.broken and len(self.queue) < self.max_queued // 2 + 1
                        and self.queued_bytes <= self.max_request_bytes // 2):
                    self.transport.resume_reading()
                    self.reading = True
                if isinstance(req, UnsupportedApiVersions):
                    self.transport.write(encode_unsupported_api_versions(req))
                    await self.writable.wait()
                    continue
                if isinstance(req, SaslToken):  # a bare token after SaslHandshake v0 (sasl.py)
                    from .sasl import raw_token  # noqa: PLC0415 - only old clients get here

                    reply = await raw_token(broker, req.data, self.session)
                    if reply is None:
                        break  # a failed login closes unanswered
                    self.conn.sasl_tokens = not self.session.authenticated
                    self.transport.write(encode_sasl_token(reply))
                    continue
                self.handling = True
                try:
                    resp = await broker.handle(req, self.session)
                    data = None if resp is None or isinstance(resp, Frame) else self.conn.encode(req, resp)
                except ProtocolError as exc:
                    log.info("closing the connection from %s: %s", self.session.client_host, exc)
                    break
                except Exception:  # a bug, or an answer our schema cannot encode: this connection only
                    log.exception("%s v%s from %s failed; closing the connection", req.name, req.api_version,
                                  self.session.client_host)
                    break
                finally:
                    self.handling = False
                    self.last_active = asyncio.get_running_loop().time()
                if resp is None:
                    continue
                if isinstance(resp, Frame):
                    await self._write_parts(resp.parts)
                else:
                    self.transport.write(data)
                self.last_active = asyncio.get_running_loop().time()
                await self.writable.wait()
                if self.session.extra.get(CLOSE_AFTER_RESPONSE):  # a refused SASL login: answered, then closed
                    # once the client closes (connection_lost cancels this task), or after the linger
                    await asyncio.sleep(REFUSAL_LINGER_S)
                    break
        except asyncio.CancelledError:
            return
        self.transport.close()


class Service(Protocol):
    """Something the same process serves beside the Kafka listeners, on the same event loop (the web
    console): made once the broker is ready, started once the listeners accept, stopped before they close."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class KafkaServer:
    """Listeners over one broker; ``run`` serves until SIGTERM or SIGINT, then shuts down cleanly.

    ``services`` make what else the process serves from the running server (``compactlog serve`` adds
    the web console this way), so this shell knows nothing of them."""

    def __init__(self, data_dir: str | Path, config: ServerConfig,
                 on_listening: Callable[[str], None] | None = None,
                 services: Sequence[Callable[["KafkaServer"], Service]] = ()) -> None:
        self.data_dir = Path(data_dir)
        self.config = config
        self.listeners = parse_listeners(config.get("listeners"), config.get("listener.security.protocol.map"))
        self.on_listening = on_listening or (lambda url: None)
        self._make_services = list(services)
        self.services: list[Service] = []  # those started, in order
        self.broker: Broker | None = None
        self.servers: list[asyncio.base_events.Server] = []
        self.connections: set[ClientConnection] = set()
        self.per_ip: collections.Counter = collections.Counter()
        self.stopped = asyncio.Event()
        self.bound: dict[str, tuple[str, int]] = {}
        self.served_apis: Mapping[int, ApiRange] = SERVED  # narrowed to the broker's handlers in start()

    # connection limits ------------------------------------------------------------------------------
    def admit(self, conn: ClientConnection) -> bool:
        ip = conn.session.client_host
        if len(self.connections) >= self.config.get("max.connections"):
            log.warning("refusing a connection from %s: max.connections=%s reached", ip, self.config.get("max.connections"))
            return False
        if self.per_ip[ip] >= self.config.get("max.connections.per.ip"):
            log.warning("refusing a connection from %s: max.connections.per.ip=%s reached", ip,
                        self.config.get("max.connections.per.ip"))
            return False
        self.connections.add(conn)
        self.per_ip[ip] += 1
        return True

    def forget(self, conn: ClientConnection) -> None:
        if conn in self.connections:
            self.connections.discard(conn)
            self.per_ip[conn.session.client_host] -= 1

    async def _close_idle(self) -> None:
        idle = self.config.get("connections.max.idle.ms") / 1000
        if idle <= 0:
            return
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(min(max(idle / 4, 0.05), 30))
            now = loop.time()
            for c in list(self.connections):
                if now - c.last_active > idle and not c.handling:
                    log.info("closing the connection from %s: nothing moved for %.0f ms", c.session.client_host,
                             idle * 1000)
                    c.transport.abort()

    # lifecycle ------------------------------------------------------------------------------------
    def _advertised(self) -> dict[str, tuple[str, int]]:
        adv = {}
        configured = self.config.get("advertised.listeners")
        if configured:
            for x in parse_listeners(configured, self.config.get("listener.security.protocol.map")):
                adv[x.name] = (x.host, x.port)
        for name, (host, port) in self.bound.items():
            if name not in adv:
                adv[name] = (host if host not in ("", "0.0.0.0", "::") else socket.getfqdn(), port)
        return adv

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        for x in self.listeners:
            ssl_context = self.ssl_context(x)
            try:
                srv = await loop.create_server(lambda x=x: ClientConnection(self, x), x.host or None, x.port,
                                               ssl=ssl_context, reuse_address=True, start_serving=False)
            except (OSError, UnicodeError) as exc:  # in use, an unknown host, a name the resolver cannot encode
                why = exc.strerror if isinstance(exc, OSError) and exc.strerror else \
                    "not a host name this machine can resolve" if isinstance(exc, UnicodeError) else str(exc)
                raise InvalidConfigError(f"Socket server failed to bind to {shown(x.host, '')}:{x.port}: {why} "
                                         "(listeners)") from None
            self.servers.append(srv)
            self.bound[x.name] = (x.host, srv.sockets[0].getsockname()[1])
        adv = self._advertised()
        first = self.listeners[0].name
        self.broker = await asyncio.to_thread(
            lambda: apis.install(Broker(self.data_dir, self.config, host=adv[first][0], port=adv[first][1])))
        self.broker.advertised = adv
        self.broker.server = self
        self.served_apis = MappingProxyType({k: r for k, r in SERVED.items() if k in self.broker.handlers})
        await self.broker.start()
        for srv in self.servers:  # bound early for the advertised ports; accepting only now the broker answers
            await srv.start_serving()
        for x in self.listeners:
            self.on_listening(x.url(self.bound[x.name][1]))
        self._idle_task = loop.create_task(self._close_idle())
        for make in self._make_services:
            service = make(self)
            await service.start()
            self.services.append(service)

    def ssl_context(self, listener: Listener):
        """The TLS context of an SSL or SASL_SSL listener (None for plaintext ones)."""
        if listener.security_protocol in ("SSL", "SASL_SSL"):
            from .security import server_ssl_context  # noqa: PLC0415 - only TLS listeners need it

            return server_ssl_context(self.config, listener)
        return None

    async def stop(self) -> None:
        for service in reversed(self.services):  # before the broker closes the logs they read
            try:
                await service.stop()
            except Exception:
                log.exception("stopping %s failed", service)
        for srv in self.servers:
            srv.close()
        self._idle_task.cancel()
        if self.broker is not None:
            await self.broker.stop()
        for c in list(self.connections):
            c.transport.close()
        for _ in range(20):  # a moment to flush the last answers; a client that does not read gets none
            if not self.connections:
                break
            await asyncio.sleep(0.05)
        for c in list(self.connections):
            c.transport.abort()
        for srv in self.servers:
            await srv.wait_closed()
        if self.broker is not None:
            await asyncio.to_thread(self.broker.close)
        self.stopped.set()

    async def run(self) -> None:
        """Serve until SIGTERM or SIGINT, then stop cleanly (the data directory gets its clean-shutdown marker).

        The handlers are in place before the listeners are announced: a SIGTERM sent as soon as a
        supervisor reads "listening" still gets the clean shutdown, not the signal's default death."""
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await self.start()
        await stop.wait()
        log.info("shutting down")
        await self.stop()
