"""``http.listeners``: where the web console listens (apart from ``app.py`` so that reading the
config does not load the web stack)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from ..errors import InvalidConfigError, shown


@dataclass(frozen=True)
class HttpListener:
    scheme: str  # http or https
    host: str
    port: int

    def url(self, port: int | None = None) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port if port is None else port}"


LOOPBACK = "127.0.0.1"


def parse_http_listeners(entries) -> list[HttpListener]:
    """``http.listeners``: ``http://host:port`` or ``https://host:port`` entries; ``host:port`` means http,
    and a missing host (``:8080``, ``8080``) means loopback: the console is reachable from elsewhere only
    when a host says so (``0.0.0.0`` for every interface)."""
    out = []
    for entry in entries or ():
        entry = entry.strip()
        if not entry:
            continue
        if entry.isdigit():
            entry = f":{entry}"
        parts = urlsplit(entry if "://" in entry else f"http://{entry}")
        try:
            port = parts.port
        except ValueError:
            port = None
        if parts.scheme not in ("http", "https") or port is None or parts.path not in ("", "/"):
            raise InvalidConfigError(f"Invalid value {shown(entry, '')} for configuration http.listeners: expected "
                                     "http://host:port or https://host:port")
        out.append(HttpListener(parts.scheme, parts.hostname or LOOPBACK, port))
    return out
