"""The console's HTTP connections: aiohttp's, except for requests it cannot read as HTTP.

aiohttp answers a request it cannot parse (a request line or a header over 8,190 bytes, more than 128
headers, a bad method) before any middleware runs, with a plain-text 400 that repeats the start of the
raw bytes, and logs a traceback each time. The console answers such a request as it answers any other
mistake: a short page with the status a browser or proxy would give -- 414 for an address that is too
long, 431 for headers that are too large, 400 for the rest -- that names what was wrong without echoing
what was sent, and the log gets one line.
"""

from __future__ import annotations

import logging
import re

from aiohttp import web, web_protocol
from aiohttp.http_exceptions import BadHttpMessage, LineTooLong

from .render import render

log = logging.getLogger(__name__)
CONTENT_SECURITY_POLICY = ("default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
                           "connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
SECURITY_HEADERS = {"Content-Security-Policy": CONTENT_SECURITY_POLICY, "X-Content-Type-Options": "nosniff",
                    "Referrer-Policy": "same-origin", "X-Frame-Options": "DENY"}  # on every answer of the console
MAX_LINE = 8190  # aiohttp's bound on the request line and on one header line
MAX_HEADERS = 128  # and on their number
REQUEST_LINE = re.compile(rb"(?:/|[A-Za-z]+ |[a-z][a-z0-9+.-]*://)")  # where a too-long request line starts


def refusal(exc: BaseException | None) -> tuple[int, str, str]:
    """(status, title, message) for a request aiohttp's parser refused with ``exc``."""
    if isinstance(exc, LineTooLong):
        start = exc.args[0] if exc.args and isinstance(exc.args[0], (bytes, bytearray)) else b""
        if REQUEST_LINE.match(start):
            return 414, "Address too long", (f"The request line is longer than {MAX_LINE:,} bytes: shorten the "
                                             "address or its query.")
        return 431, "Headers too large", f"A request header is longer than {MAX_LINE:,} bytes."
    if isinstance(exc, BadHttpMessage) and "headers" in str(exc).lower():
        return 431, "Headers too large", f"The request has more than {MAX_HEADERS} headers."
    return 400, "Bad request", "The request could not be read as HTTP."


class ConsoleRequestHandler(web_protocol.RequestHandler):
    """aiohttp's connection handler, with :func:`refusal`'s answer for requests it cannot parse."""

    def handle_error(self, request, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        if not isinstance(exc, BadHttpMessage):
            return super().handle_error(request, status, exc, message)
        code, title, text = refusal(exc)
        log.warning("console: refused a request from %s with %d: %s", request.remote, code, text)
        if request.writer.output_size > 0:  # pragma: no cover - nothing is written before a parse error
            raise ConnectionError("the response had begun")
        html = render("error.html", viewer=None, request_path="/", title=title, message=text)
        response = web.Response(status=code, text=html, content_type="text/html",
                                headers={**SECURITY_HEADERS, "Cache-Control": "no-store"})
        response.force_close()
        return response


class ConsoleServer(web.Server):
    def __call__(self) -> web_protocol.RequestHandler:
        return ConsoleRequestHandler(self, loop=self._loop, **self._kwargs)


class ConsoleRunner(web.AppRunner):
    """An ``AppRunner`` whose connections are :class:`ConsoleRequestHandler`'s."""

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        server.__class__ = ConsoleServer  # aiohttp builds its Server inside the application; only the handler differs
        return server
