"""Who is looking: console logins, sessions, CSRF tokens and the ACL checks behind every form.

A console login is a SASL PLAIN login in another dress: the user and password go through the broker's
own PLAIN server against the same SCRAM credentials (``compactlog users``), so a password that logs a
Kafka client in logs the browser in, and a wrong one waits ``connection.failed.authentication.delay.ms``
as a Kafka client's does. Logins are asked for once the data directory has SASL users; before that the
console is open to whoever can reach its (loopback) address, as an unauthenticated PLAINTEXT listener is.

The principal is ``User:<name>`` (``User:ANONYMOUS`` without a login) and every page and form asks the
broker's authorizer, so the ACLs a Kafka client meets are the ones a browser meets: a user who may not
ALTER_CONFIGS a topic sees its configs without the form, and a forged POST is refused all the same.

Sessions live in memory (a restart logs everyone out) and carry a CSRF token that every POST must send
back, as a form field or the ``X-CSRF-Token`` header htmx adds; the session cookie is HttpOnly and
SameSite=Strict.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from ..errors import SaslAuthenticationFailedError
from ..security.scram import PlainServer
from ..server.broker import Session

COOKIE = "compactlog_console"
CSRF_FIELD = "csrf"
CSRF_HEADER = "X-CSRF-Token"
IDLE_SECONDS = 8 * 3600  # a session not seen for this long is forgotten
MAX_SESSIONS = 10_000  # the oldest go first: a flood of cookie-less requests cannot grow memory
ANONYMOUS = "User:ANONYMOUS"


@dataclass
class WebSession:
    """One browser: its CSRF token and, once logged in, its principal."""

    token: str
    csrf: str
    user: str | None = None
    last_seen: float = field(default_factory=time.monotonic)

    @property
    def principal(self) -> str:
        return f"User:{self.user}" if self.user else ANONYMOUS

    def csrf_matches(self, sent: str | None) -> bool:
        return sent is not None and hmac.compare_digest(sent.encode(), self.csrf.encode())


class Sessions:
    """Sessions by cookie token, bounded in number and idle time."""

    def __init__(self) -> None:
        self._by_token: OrderedDict[str, WebSession] = OrderedDict()

    def get(self, token: str | None) -> WebSession | None:
        s = self._by_token.get(token) if token else None
        now = time.monotonic()
        if s is not None and now - s.last_seen > IDLE_SECONDS:
            del self._by_token[s.token]
            s = None
        if s is not None:
            s.last_seen = now
            self._by_token.move_to_end(s.token)
        return s

    def new(self, user: str | None = None) -> WebSession:
        s = WebSession(secrets.token_urlsafe(32), secrets.token_urlsafe(32), user)
        self._by_token[s.token] = s
        while len(self._by_token) > MAX_SESSIONS:
            self._by_token.popitem(last=False)
        return s

    def drop(self, token: str) -> None:
        self._by_token.pop(token, None)


def check_password(credentials, user: str, password: str) -> bool:
    """Whether ``user``/``password`` is a SASL PLAIN login the broker would accept (slow: PBKDF2)."""
    server = PlainServer(credentials.lookup)
    try:
        server.step(b"\0" + user.encode("utf-8") + b"\0" + password.encode("utf-8"))
    except SaslAuthenticationFailedError:
        return False
    return True


@dataclass(frozen=True)
class Viewer:
    """The principal behind a request, asking the broker's authorizer what it may do."""

    broker: object
    session: Session
    csrf: str
    logged_in: bool
    login_required: bool

    @property
    def principal(self) -> str:
        return self.session.principal

    def can(self, operation: str, resource_type: str = "CLUSTER", name: str = "kafka-cluster") -> bool:
        """Kafka's operation (READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS)
        on a TOPIC, GROUP or the CLUSTER."""
        return self.broker.authorize(self.session, operation, resource_type, name)


def broker_session(client_host: str, principal: str) -> Session:
    """The broker's view of a browser: its address and principal, on the listener named HTTP."""
    return Session(client_host=client_host or "", client_port=0, listener="HTTP", principal=principal)
