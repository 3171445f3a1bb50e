"""A connection to a broker for the requests the command line writes by hand (OffsetDelete, DescribeLogDirs,
DescribeAcls, and ``transactions``' ListTransactions, DescribeTransactions, DescribeProducers and
WriteTxnMarkers):
librdkafka has no call for them, so they go over a socket of ours, which must log in as librdkafka does
on the listener ``--command-config`` names (``client_properties.py``).

On SASL_PLAINTEXT and SASL_SSL it sends SaslHandshake v1 and then the mechanism's tokens in
SaslAuthenticate v1 requests, as Kafka's Java client does: PLAIN (one message) and SCRAM-SHA-256/512 (RFC
5802: client-first, client-final, and the server's signature checked). On SSL and SASL_SSL the socket is
wrapped in TLS first, trusting the PEM truststore's certificates. A refused login is our
SaslAuthenticationFailedError with the broker's own message.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import io
import secrets
import socket
import struct

from ..errors import CompactLogError, SaslAuthenticationFailedError, error_for
from ..security.scram import SCRAM_MECHANISMS
from .client_properties import ClientSettings, current

_I32 = struct.Struct(">i")
MAX_SASL_ANSWER = 1 << 16  # a SCRAM server-first or server-final message is a few hundred bytes


def connect(host: str, port: int, timeout: float, settings: ClientSettings | None = None) -> socket.socket:
    """A socket to ``host:port`` ready for requests: TLS and a SASL login done as the settings ask."""
    settings = settings or current()
    sock = socket.create_connection((host, port), timeout=timeout)
    try:
        if settings.protocol in ("SSL", "SASL_SSL"):
            import ssl

            context = ssl.create_default_context(cafile=settings.ca_location)
            context.check_hostname = settings.check_hostname
            sock = context.wrap_socket(sock, server_hostname=host)
        if settings.protocol.startswith("SASL"):
            _login(sock, settings)
    except BaseException:
        sock.close()
        raise
    return sock


def exchange(sock: socket.socket, payload: bytes, limit: int, where: str) -> bytes:
    """Send one request frame; its answer's bytes (correlation id first)."""
    sock.sendall(_I32.pack(len(payload)) + payload)
    (size,) = _I32.unpack(read_exactly(sock, 4))
    if not 4 <= size <= limit:
        raise CompactLogError(f"the broker at {where} sent a {size}-byte answer")
    return read_exactly(sock, size)


def read_exactly(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def ask(sock: socket.socket, body, response_cls, limit: int, where: str, correlation: int = 1):
    """One request (kio's ``body``, under the header its schema's version takes) and its answer as
    ``response_cls``: the one path every request this package writes by hand goes through."""
    import sys

    from kio.serial import entity_reader, entity_writer

    header_cls = sys.modules[type(body).__module__].RequestHeader
    out = io.BytesIO()
    entity_writer(header_cls)(out, header_cls(request_api_key=body.__api_key__, request_api_version=body.__version__,
                                              correlation_id=correlation, client_id="compactlog-cli"))
    entity_writer(type(body))(out, body)
    payload = exchange(sock, out.getvalue(), limit, where)
    # the header its schema names: a flexible answer's (v1) carries tagged fields after the correlation id
    header, at = entity_reader(response_cls.__header_schema__)(memoryview(payload), 0)
    if header.correlation_id != correlation:
        raise CompactLogError(f"the broker at {where} answered another request")
    answer, _ = entity_reader(response_cls)(memoryview(payload), at)
    return answer


def _login(sock: socket.socket, settings: ClientSettings) -> None:
    from kio.schema.sasl_authenticate.v1 import request as auth_request
    from kio.schema.sasl_authenticate.v1.response import SaslAuthenticateResponse
    from kio.schema.sasl_handshake.v1 import request as hs_request
    from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse

    mechanism = settings.mechanism
    if mechanism != "PLAIN" and mechanism not in SCRAM_MECHANISMS:
        raise CompactLogError(f"sasl.mechanism={mechanism}: this command logs in with PLAIN, SCRAM-SHA-256 or "
                              "SCRAM-SHA-512 only")
    if settings.username is None or settings.password is None:
        raise CompactLogError("--command-config: a SASL login needs sasl.jaas.config with username and password")
    hs = ask(sock, hs_request.SaslHandshakeRequest(mechanism=mechanism), SaslHandshakeResponse, MAX_SASL_ANSWER,
             "the SASL listener", 1)
    if hs.error_code != 0:
        raise error_for(int(hs.error_code), f"the broker does not enable {mechanism} (it offers "
                                            f"{', '.join(hs.mechanisms) or 'none'})", "")
    correlation = 2

    def step(token: bytes) -> bytes:
        nonlocal correlation
        answer = ask(sock, auth_request.SaslAuthenticateRequest(auth_bytes=token), SaslAuthenticateResponse,
                     MAX_SASL_ANSWER, "the SASL listener", correlation)
        correlation += 1
        if answer.error_code != 0:
            raise SaslAuthenticationFailedError(answer.error_message or f"{mechanism} login refused")
        return bytes(answer.auth_bytes)

    if mechanism == "PLAIN":
        step(b"\0" + settings.username.encode() + b"\0" + settings.password.encode())
    else:
        _scram(step, SCRAM_MECHANISMS[mechanism], settings.username, settings.password)


def _scram(step, hash_name: str, user: str, password: str) -> None:
    """RFC 5802's client: prove the password without sending it, then check the server knew it too."""
    saslname = user.replace("=", "=3D").replace(",", "=2C")
    nonce = secrets.token_urlsafe(24)
    first_bare = f"n={saslname},r={nonce}"
    server_first = step(("n,," + first_bare).encode()).decode("utf-8", "replace")
    attrs = dict(part.split("=", 1) for part in server_first.split(",") if "=" in part)
    try:
        combined, salt, iterations = attrs["r"], base64.b64decode(attrs["s"]), int(attrs["i"][:6])
    except (KeyError, ValueError):
        raise CompactLogError("the broker's SCRAM server-first message is not one") from None
    if not combined.startswith(nonce) or not 1 <= iterations <= 100_000:
        raise CompactLogError("the broker's SCRAM server-first message is not one")
    without_proof = f"c={base64.b64encode(b'n,,').decode()},r={combined}"
    auth_message = f"{first_bare},{server_first},{without_proof}".encode()
    salted = hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hash_name).digest()
    signature = hmac.new(hashlib.new(hash_name, client_key).digest(), auth_message, hash_name).digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature))).decode()
    server_final = step(f"{without_proof},p={proof}".encode()).decode("utf-8", "replace")
    expected = hmac.new(hmac.new(salted, b"Server Key", hash_name).digest(), auth_message, hash_name).digest()
    if not hmac.compare_digest(server_final, "v=" + base64.b64encode(expected).decode()):
        raise CompactLogError("the broker's SCRAM signature is wrong: it does not know the password")
