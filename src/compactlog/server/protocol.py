"""Kafka's wire protocol, sans-IO: bytes in, requests out; responses in, bytes out.

A frame is an int32 size followed by that many bytes: a request header (api key, version, correlation
id, client id, and in flexible versions a tagged-field section) and the body. The body's layout comes
from the API's schema (``versions.py``); record batches inside Produce stay opaque bytes.

``Connection`` does no I/O. The server feeds it what the socket read (``receive_data``), takes whole
requests (``next_request``) and turns each response into bytes (``encode``). Anything that is not a
request we serve (an unknown API key, a version we never advertised, a body that does not parse, a frame
above ``socket.request.max.bytes``) raises ``ProtocolError``: Kafka closes such a connection without an
answer, and so do we. The one exception, as in Kafka, is ApiVersions at a version we do not know: it is
answered with UNSUPPORTED_VERSION and our ranges, so that the client can retry at a version we serve.
"""

from __future__ import annotations

import dataclasses
import io
import struct
from dataclasses import dataclass
from functools import cache
from typing import Any, Mapping, get_args, get_origin, get_type_hints

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from .versions import API_VERSIONS, SERVED, ApiRange, is_flexible, request_class, response_class

_HEAD = struct.Struct(">hhi")  # api key, api version, correlation id
_I32 = struct.Struct(">i")
SASL_HANDSHAKE = 17


class ProtocolError(Exception):
    """The peer sent something that is not a request we serve; the connection must close."""


class _Need:
    def __repr__(self) -> str:
        return "NEED_DATA"


NEED_DATA = _Need()


@dataclass(frozen=True, slots=True)
class Request:
    """One decoded request. ``body`` is kio's entity for (api_key, api_version)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any
    size: int  # frame size, for limits and logs

    @property
    def name(self) -> str:
        return SERVED[self.api_key].name if self.api_key in SERVED else f"api {self.api_key}"


@dataclass(frozen=True, slots=True)
class UnsupportedApiVersions:
    """An ApiVersions request at a version we do not serve: answer with error 35 in the v0 layout."""

    correlation_id: int
    api_version: int


@dataclass(frozen=True, slots=True)
class SaslToken:
    """A bare SASL token: after a SaslHandshake v0 request the client sends its tokens as a size and the
    bytes, with no request header (Kafka before KIP-152), and reads the answers the same way."""

    data: bytes


def read_uvarint(buf, pos: int) -> tuple[int, int]:
    """(value, next position) of an unsigned varint; ProtocolError on a runaway varint."""
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise ProtocolError("request header ends inside a varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise ProtocolError("varint longer than 5 bytes in a request header")


def parse_header(frame) -> tuple[int, int, int, str | None, int]:
    """(api key, version, correlation id, client id, body position) of a frame's request header.

    The client id is the classic i16-length string in every header version (so that any broker can read
    the header of any ApiVersions request); flexible versions add a tagged-field section after it.
    """
    if len(frame) < 10:
        raise ProtocolError(f"a request of {len(frame)} bytes is shorter than a request header")
    key, version, correlation = _HEAD.unpack_from(frame, 0)
    n = int.from_bytes(frame[8:10], "big", signed=True)
    pos = 10
    client_id = None
    if n >= 0:
        if pos + n > len(frame):
            raise ProtocolError("the client id runs past the end of the request")
        # Kafka reads the client id leniently (a bad byte becomes U+FFFD), so a client with a strange
        # id is still served; it only ever shows up in logs.
        client_id = bytes(frame[pos:pos + n]).decode("utf-8", errors="replace")
        pos += n
    elif n != -1:
        raise ProtocolError(f"negative client id length {n}")
    if key == API_VERSIONS and version >= 3 or key in SERVED and _flexible(key, version):
        count, pos = read_uvarint(frame, pos)
        for _ in range(count):
            _tag, pos = read_uvarint(frame, pos)
            size, pos = read_uvarint(frame, pos)
            pos += size
        if pos > len(frame):
            raise ProtocolError("the header's tagged fields run past the end of the request")
    return key, version, correlation, client_id, pos


@cache
def _arrays(cls: type) -> tuple[tuple[str, bool, type | None], ...]:
    """(field, nullable, element entity class or None) of each array field of a kio entity class, the
    element class given only when arrays may hide below it."""
    out = []
    for name, hint in get_type_hints(cls).items():
        args = get_args(hint)
        nullable = type(None) in args
        array = hint if get_origin(hint) is tuple else next((a for a in args if get_origin(a) is tuple), None)
        if array is None:
            continue
        element = get_args(array)[0]
        nested = element if dataclasses.is_dataclass(element) and _arrays(element) else None
        out.append((name, nullable, nested))
    return tuple(out)


def null_array(entity: Any) -> str | None:
    """The name of an array the schema says cannot be null but that came as null (length -1), or None.

    kio reads such an array as None; Kafka's parser refuses the request ("non-nullable field ... was
    serialized as null"), and so do we, before a handler iterates over None."""
    for name, nullable, nested in _arrays(type(entity)):
        value = getattr(entity, name)
        if value is None:
            if not nullable:
                return name
        elif nested is not None:
            for item in value:
                found = null_array(item)
                if found:
                    return f"{name}.{found}"
    return None


def _flexible(key: int, version: int) -> bool:
    r = SERVED[key]
    return r.min_version <= version <= r.max_version and is_flexible(key, version)


class Connection:
    """The protocol state of one client connection (h11's ``Connection``, for Kafka)."""

    def __init__(self, max_request_bytes: int = 104857600, apis: Mapping[int, ApiRange] = SERVED) -> None:
        """``apis`` are the APIs this connection accepts (the broker passes those it has handlers for,
        so that a request for an API it does not serve is refused here, like an unknown one)."""
        self.max_request_bytes = max_request_bytes
        self.apis = apis
        self._buf = bytearray()
        self._pos = 0
        self.broken = False
        # True from a SaslHandshake v0 request until the server ends the login (``sasl.py``): the frames
        # read meanwhile are SaslTokens. Set here, as the handshake is read, so a token that follows at
        # once is never taken for a request.
        self.sasl_tokens = False

    # reading ------------------------------------------------------------------------------------
    def receive_data(self, data: bytes) -> None:
        """Buffer bytes read from the socket. Bytes of requests already handed out are dropped first:
        a client that keeps a request in flight across every read (pipelining producers do) would
        otherwise grow the buffer for as long as the connection lives. What is moved is at most the
        part of a frame not yet complete, as long as the caller drains ``next_request``."""
        if self.broken:
            return  # nothing after a protocol error is read: the connection is closing
        if self._pos:
            del self._buf[:self._pos]
            self._pos = 0
        self._buf += data

    @property
    def buffered(self) -> int:
        return len(self._buf) - self._pos

    def next_request(self) -> Request | UnsupportedApiVersions | _Need:
        """The next whole request, NEED_DATA, or ProtocolError (after which the connection is dead)."""
        if self.broken:
            raise ProtocolError("the connection already failed")
        try:
            return self._next()
        except ProtocolError:
            self.broken = True
            raise

    def _next(self) -> Request | UnsupportedApiVersions | _Need:
        avail = len(self._buf) - self._pos
        if avail < 4:
            return NEED_DATA
        (size,) = _I32.unpack_from(self._buf, self._pos)
        if size < 0 or size > self.max_request_bytes:
            raise ProtocolError(
                f"request size {size} is outside [0, socket.request.max.bytes={self.max_request_bytes}]"
            )
        if avail < 4 + size:
            return NEED_DATA
        start = self._pos + 4
        if self.sasl_tokens:
            self._pos = start + size
            return SaslToken(bytes(self._buf[start:start + size]))
        frame = memoryview(self._buf).toreadonly()[start:start + size]
        try:
            key, version, correlation, client_id, body_at = parse_header(frame)
            served = self.apis.get(key)
            if served is None:
                raise ProtocolError(f"unknown API key {key}")
            if not served.min_version <= version <= served.max_version:
                if key == API_VERSIONS:  # too new or nonsense (negative): Kafka answers both with 35
                    return UnsupportedApiVersions(correlation, version)
                raise ProtocolError(f"{served.name} version {version} is not served "
                                    f"(versions {served.min_version}-{served.max_version})")
            try:
                body, used = entity_reader(request_class(key, version))(frame, body_at)
            except Exception as exc:  # kio raises several kinds on truncated or impossible bodies
                raise ProtocolError(f"cannot parse {served.name} v{version}: {exc}") from None
            # Bytes after the body are ignored, as Kafka's request parsing ignores them: librdkafka (2.16
            # at least) ends its AlterUserScramCredentials with a second, empty tagged-field section.
            null = null_array(body)
            if null:
                raise ProtocolError(f"cannot parse {served.name} v{version}: the non-nullable array {null} is null")
        finally:
            frame.release()
            self._pos = start + size
        if key == SASL_HANDSHAKE and version == 0:
            self.sasl_tokens = True
        return Request(key, version, correlation, client_id, body, size)

    # writing ------------------------------------------------------------------------------------
    def encode(self, request: Request, body: Any) -> bytes:
        """The response frame for ``request``: size, header (v1 with tags for flexible versions except
        ApiVersions, which always answers with header v0) and ``body``."""
        head = _I32.pack(request.correlation_id)
        if request.api_key != API_VERSIONS and is_flexible(request.api_key, request.api_version):
            head += b"\x00"
        out = io.BytesIO()
        out.write(b"\0\0\0\0")
        out.write(head)
        entity_writer(response_class(request.api_key, request.api_version))(out, body)
        data = out.getbuffer()
        _I32.pack_into(data, 0, len(data) - 4)
        del data
        return out.getvalue()


@dataclass(frozen=True, slots=True)
class Frame:
    """A response already encoded by its API (Fetch writes its own, records straight from the log)."""

    parts: list


def encode_unsupported_api_versions(req: UnsupportedApiVersions) -> bytes:
    """ApiVersions error 35 in the v0 body layout, listing our ApiVersions range (Kafka's answer)."""
    r = SERVED[API_VERSIONS]
    body = struct.pack(">ihi hhh", req.correlation_id, ErrorCode.unsupported_version.value, 1,
                       API_VERSIONS, r.min_version, r.max_version)
    return _I32.pack(len(body)) + body


def encode_sasl_token(data: bytes) -> bytes:
    """A bare SASL token frame (the answers after SaslHandshake v0)."""
    return _I32.pack(len(data)) + data
