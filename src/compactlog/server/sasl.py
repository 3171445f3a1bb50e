"""SaslHandshake (17) and SaslAuthenticate (36): logging in on SASL_PLAINTEXT and SASL_SSL listeners.

A connection to a SASL listener goes through these states, as Kafka's server authenticator's do:

| state | may send | then |
|---|---|---|
| start | ApiVersions, SaslHandshake(mechanism) | handshaken, or UNSUPPORTED_SASL_MECHANISM (33) and close |
| handshaken | SaslAuthenticate(token), repeated while the mechanism needs | authenticated, or SASL_AUTHENTICATION_FAILED (58) and close |
| authenticated | anything (the ACLs decide) | |

Any other request before the login closes the connection without an answer (``check_request``, which
``setup`` installs as the broker's check before a login), so an unauthenticated client gets no data. A
failed login is answered after ``connection.failed.authentication.delay.ms``, then the connection closes.

SaslHandshake v0 predates SaslAuthenticate (KIP-152): after it the client sends its tokens as bare
frames (a size and the token, no request header) and reads bare answers. ``protocol.Connection``
hands those frames out as ``SaslToken``; ``raw_token`` answers them here. A failure there closes the
connection without an answer, as Kafka does.

The mechanisms (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and the credentials are in ``compactlog.security``.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from dataclasses import dataclass
from typing import Any

from ..errors import SaslAuthenticationFailedError
from ..security.credentials import CredentialStore
from ..security.scram import PLAIN, server_mechanism
from .broker import Broker, Session, error_code
from .entities import response
from .protocol import ProtocolError, Request
from .security import CLOSE_AFTER_RESPONSE, SASL_PROTOCOLS, SECURITY_PROTOCOL

SASL_HANDSHAKE, SASL_AUTHENTICATE, API_VERSIONS = 17, 36, 18
ILLEGAL_SASL_STATE, UNSUPPORTED_SASL_MECHANISM, SASL_AUTHENTICATION_FAILED = 34, 33, 58
STATE = "sasl"  # Session.extra key of the login's state
log = logging.getLogger(__name__)


@dataclass
class LoginState:
    """One connection's SASL login so far."""

    stage: str = "start"  # start, handshaken, authenticated
    mechanism: Any = None  # the server side of the chosen mechanism (compactlog.security.scram)
    raw: bool = False  # SaslHandshake v0: tokens come as bare frames


def _state(session: Session) -> LoginState:
    return session.extra.setdefault(STATE, LoginState())


def on_sasl_listener(session: Session) -> bool:
    return session.extra.get(SECURITY_PROTOCOL) in SASL_PROTOCOLS


def check_request(session: Session, req: Request) -> None:
    """Refuse (ProtocolError: the connection closes unanswered) what may not come before the login."""
    if session.authenticated:
        return
    stage = _state(session).stage
    allowed = {API_VERSIONS, SASL_HANDSHAKE} if stage == "start" else {SASL_AUTHENTICATE}
    if req.api_key not in allowed:
        raise ProtocolError(f"{req.name} v{req.api_version} on SASL listener {session.listener} before "
                            f"authentication (in state {stage}); closing the connection")


def credentials(broker: Broker) -> CredentialStore:
    return broker.extras["credentials"]


async def _step(broker: Broker, state: LoginState, token: bytes) -> bytes:
    """One step of the mechanism; PLAIN runs PBKDF2, so it goes to a worker thread."""
    if state.mechanism.mechanism == PLAIN:
        return await broker.blocking(state.mechanism.step, token)
    return state.mechanism.step(token)


async def _failed(broker: Broker, session: Session, state: LoginState, exc: Exception) -> None:
    """Log a failed login (who tried, from where: the audit trail Kafka's log gives) and wait
    ``connection.failed.authentication.delay.ms`` before the answer, to slow down password guessing."""
    log.info("failed SASL %s login from %s:%s as %r: %s", state.mechanism.mechanism, session.client_host,
             session.client_port, state.mechanism.username, exc)
    await asyncio.sleep(broker.config.get("connection.failed.authentication.delay.ms") / 1000)


def _logged_in(session: Session, state: LoginState) -> None:
    state.stage = "authenticated"
    session.authenticated = True
    session.principal = f"User:{state.mechanism.username}"


async def sasl_handshake(broker: Broker, req: Request, session: Session):
    enabled = tuple(broker.config.get("sasl.enabled.mechanisms"))
    state = _state(session)

    def refuse(code: int):
        session.extra[CLOSE_AFTER_RESPONSE] = True
        return response(req, error_code=error_code(code), mechanisms=enabled)

    if not on_sasl_listener(session) or state.stage != "start":
        return refuse(ILLEGAL_SASL_STATE)
    if req.body.mechanism not in enabled:
        return refuse(UNSUPPORTED_SASL_MECHANISM)
    state.mechanism = server_mechanism(req.body.mechanism, credentials(broker).lookup)
    state.stage = "handshaken"
    state.raw = req.api_version == 0
    return response(req, error_code=error_code(0), mechanisms=enabled)


async def sasl_authenticate(broker: Broker, req: Request, session: Session):
    state = _state(session)
    if not on_sasl_listener(session) or state.stage != "handshaken" or state.raw:
        session.extra[CLOSE_AFTER_RESPONSE] = True
        return response(req, error_code=error_code(ILLEGAL_SASL_STATE), error_message=(
            f"SaslAuthenticate is not expected now (SASL state {state.stage})"), auth_bytes=b"",
            session_lifetime=datetime.timedelta(0))
    try:
        reply = await _step(broker, state, req.body.auth_bytes)
    except SaslAuthenticationFailedError as exc:
        await _failed(broker, session, state, exc)
        session.extra[CLOSE_AFTER_RESPONSE] = True
        return response(req, error_code=error_code(SASL_AUTHENTICATION_FAILED), error_message=str(exc),
                        auth_bytes=b"", session_lifetime=datetime.timedelta(0))
    if state.mechanism.complete:
        _logged_in(session, state)
    return response(req, error_code=error_code(0), error_message=None, auth_bytes=reply,
                    session_lifetime=datetime.timedelta(0))  # 0: no re-authentication (KIP-368) asked for


async def raw_token(broker: Broker, token: bytes, session: Session) -> bytes | None:
    """The answer to a bare SASL token after SaslHandshake v0, or None: the login failed, close unanswered."""
    state = _state(session)
    if not on_sasl_listener(session) or state.stage != "handshaken" or not state.raw:
        return None
    try:
        reply = await _step(broker, state, token)
    except SaslAuthenticationFailedError as exc:
        await _failed(broker, session, state, exc)
        return None
    if state.mechanism.complete:
        _logged_in(session, state)
    return reply


def setup(broker: Broker) -> None:
    broker.extras["credentials"] = CredentialStore(broker.cl.data_dir)
    broker.check_before_login = check_request


HANDLERS = {SASL_HANDSHAKE: sasl_handshake, SASL_AUTHENTICATE: sasl_authenticate}
