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

import base64
import hmac
import re
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
MAX_SESSIONS = 10_000  # logged-in sessions kept; the oldest go first
TOKEN = re.compile(r"[A-Za-z0-9_-]{43}")  # what secrets.token_urlsafe(32) gives
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
    """Sessions by cookie token: logins kept in memory, bounded in number and idle time; anonymous ones
    kept nowhere.

    Every request without a cookie gets a session, so storing those would let a flood of cookie-less
    requests push the logged-in sessions out of the bound (everyone logged out, by someone with no
    password). An anonymous session needs only its CSRF token, and that is derived from its cookie
    token with a key of this process (HMAC), so it costs no memory: only a login, which takes a
    password, stores a session."""

    def __init__(self) -> None:
        self._by_token: OrderedDict[str, WebSession] = OrderedDict()
        self._key = secrets.token_bytes(32)

    def get(self, token: str | None) -> WebSession | None:
        if not token or not TOKEN.fullmatch(token):
            return None
        s = self._by_token.get(token)
        now = time.monotonic()
        if s is not None and now - s.last_seen > IDLE_SECONDS:
            del self._by_token[s.token]
            s = None
        if s is None:
            return self._anonymous(token)
        s.last_seen = now
        self._by_token.move_to_end(s.token)
        return s

    def new(self, user: str | None = None) -> WebSession:
        token = secrets.token_urlsafe(32)
        if user is None:
            return self._anonymous(token)
        s = WebSession(token, secrets.token_urlsafe(32), user)
        self._by_token[s.token] = s
        while len(self._by_token) > MAX_SESSIONS:
            self._by_token.popitem(last=False)
        return s

    def drop(self, token: str) -> None:
        self._by_token.pop(token, None)

    def __len__(self) -> int:
        return len(self._by_token)

    def _anonymous(self, token: str) -> WebSession:
        csrf = base64.urlsafe_b64encode(hmac.digest(self._key, token.encode(), "sha256")).decode().rstrip("=")
        return WebSession(token, csrf)


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

    def describes_topic(self, topic: str) -> bool:
        """DESCRIBE on the topic: what a page asks before it shows a topic's offsets or name."""
        return self.can("DESCRIBE", "TOPIC", topic)

    def can_create_topics(self) -> bool:
        """Whether a Create topic form is worth showing: CREATE on the cluster, or on some topic (CreateTopics
        takes either; which names, the submitted form finds out)."""
        return self.can("CREATE") or self.broker.extras["authorizer"].authorize_any(self.session, "CREATE", "TOPIC")


def broker_session(client_host: str, principal: str) -> Session:
    """The broker's view of a browser: its address and principal, on the listener named HTTP."""
    return Session(client_host=client_host or "", client_port=0, listener="HTTP", principal=principal)
