"""The console's aiohttp application: listeners, middleware, and what every page handler shares.

Each page module under ``pages/`` holds a ``routes`` table (and may hold ``setup(console)``); the
middleware around them sets the security headers, finds the browser's session, asks for a login when
the data directory has SASL users, checks the CSRF token of every POST and turns our typed errors into
a page with Kafka's message.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import quote

from aiohttp import web

from ..errors import CompactLogError, UnknownTopicOrPartitionError
from . import auth
from .jobs import Jobs
from .listeners import HttpListener
from .render import render

log = logging.getLogger(__name__)
STATIC = Path(__file__).parent / "static"
MAX_FORM_BYTES = 64 * 1024  # the largest form a page sends (a config value, a key to look up)
PAGE_THREADS = 1  # the thread that reads the disk and renders for pages; one, so pages contend with the broker for one core at most
STOP_SECONDS = 30.0  # what a stop waits for a running job and page reads before the broker closes its logs
CONTENT_SECURITY_POLICY = ("default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
                           "connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
OPEN_PATHS = ("/login", "/static/")  # reachable before a login
# How long a thread may keep the GIL while another waits for it. Pages are Python work on the console's
# threads; at CPython's 5 ms every hand-over between the broker's event loop and its append threads could
# wait that long behind a page, several times a request (bench/bench_console.py: produce p50 1 ms idle,
# 52 ms with four page loaders at 5 ms, 7 ms at 1 ms).
GIL_SWITCH_SECONDS = 0.001


class Console:
    """The web console over one running broker: a service of the ``serve`` process (``network.Service``),
    started once the broker's listeners accept, on ``listeners``; ``on_url`` hears each bound address."""

    def __init__(self, broker, server=None, listeners: Sequence[HttpListener] = (),
                 on_url: Callable[[str], None] = lambda url: None) -> None:
        self.broker = broker
        self.server = server  # the network shell: its listeners are shown on the overview
        self.listeners = list(listeners)
        self.on_url = on_url
        self.cl = broker.cl
        self.started = time.time()
        self.sessions = auth.Sessions()
        self.jobs = Jobs()
        self._pool = ThreadPoolExecutor(max_workers=PAGE_THREADS, thread_name_prefix="console")
        self._reads: set[asyncio.Future] = set()  # reads under way on those threads (a stop waits for them)
        self.services: list = []  # things pages start with the console (the cleaner's sampler)
        self.urls: list[str] = []
        self.app = self._application()
        self._runner: web.AppRunner | None = None

    def _application(self) -> web.Application:
        from .pages import PAGES

        app = web.Application(middlewares=[_headers, _errors, _session, _csrf], client_max_size=MAX_FORM_BYTES)
        app[CONSOLE] = self
        app.router.add_static("/static", STATIC)
        for page in PAGES:
            app.add_routes(page.routes)
            if hasattr(page, "setup"):
                page.setup(self)
        return app

    async def run(self, fn: Callable, *args, **kwargs) -> Any:
        """``fn`` on the console's own thread (disk reads, decompression, rendering)."""
        future = asyncio.get_running_loop().run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))
        self._reads.add(future)
        future.add_done_callback(self._reads.discard)
        return await future

    def login_required(self) -> bool:
        """Logins are asked for once the data directory has a SASL user."""
        return bool(self.broker.extras["credentials"].describe())

    async def start(self) -> None:
        sys.setswitchinterval(min(sys.getswitchinterval(), GIL_SWITCH_SECONDS))
        self._runner = web.AppRunner(self.app, access_log=None, handle_signals=False)
        await self._runner.setup()
        for x in self.listeners:
            ssl_context = None
            if x.scheme == "https":
                from ..server.security import server_ssl_context

                ssl_context = server_ssl_context(self.broker.config)
            site = web.TCPSite(self._runner, x.host or None, x.port, ssl_context=ssl_context, reuse_address=True)
            await site.start()
            port = site._server.sockets[0].getsockname()[1]  # the bound port, for port 0
            self.urls.append(x.url(port))
            self.on_url(self.urls[-1])
        for s in self.services:
            await s.start()

    async def stop(self) -> None:
        for s in reversed(self.services):
            try:
                await s.stop()
            except Exception:
                log.exception("stopping %s failed", s)
        if self._runner is not None:
            await self._runner.cleanup()
        await self.jobs.stop(STOP_SECONDS)  # before the broker closes the logs the job writes
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._reads:  # a read still under way (a sampler's look, a page's) ends before the logs close
            await asyncio.wait(set(self._reads), timeout=STOP_SECONDS)


CONSOLE = web.AppKey("console", Console)
VIEWER = "viewer"  # request key of the auth.Viewer


# what page handlers share ------------------------------------------------------------------------

def console(request: web.Request) -> Console:
    return request.app[CONSOLE]


def viewer(request: web.Request) -> auth.Viewer:
    return request[VIEWER]


class RenderedPage(web.Response):
    """A page whose template is rendered on the console's threads just before it is sent.

    Rendering 500 formatted records is CPU work; done in the handler it would hold the event loop,
    and with it every produce and fetch, for as long as it takes."""

    def __init__(self, c: Console, template: str, context: dict, status: int) -> None:
        super().__init__(status=status, content_type="text/html", charset="utf-8")
        self._pending: tuple[Console, str, dict] | None = (c, template, context)

    async def prepare(self, request: web.BaseRequest):
        if self._pending is not None:
            c, template, context = self._pending
            self._pending = None
            try:
                self.text = await c.run(render, template, **context)
            except Exception:  # past the middleware: unanswered, the browser would see a dropped connection
                log.exception("console page %s could not be drawn", template)
                self.set_status(500)
                self.text = await c.run(render, "error.html", **{**context, "title": "Internal error",
                                        "message": "This page could not be drawn; the broker's log says why."})
        return await super().prepare(request)


def page(request: web.Request, template: str, status: int = 200, **context: Any) -> web.Response:
    """A whole page (or an htmx fragment) from ``template``, with the viewer, the CSRF token and the
    console in its context; rendered off the event loop (``RenderedPage``)."""
    c = console(request)
    return RenderedPage(c, template, dict(viewer=viewer(request), console=c, request_path=request.path, **context),
                        status)


def require(request: web.Request, operation: str, resource_type: str = "CLUSTER", name: str = "kafka-cluster") -> None:
    """Refuse the request (403, with the reason on the page) unless the ACLs allow it."""
    if not viewer(request).can(operation, resource_type, name):
        what = "the cluster" if resource_type == "CLUSTER" else f"{resource_type.lower()} {name}"
        raise Refused(f"{viewer(request).principal} is not authorized to {operation} {what}")


def see_other(location: str) -> web.HTTPSeeOther:
    """The answer to a form that worked: the browser loads ``location`` (POST, redirect, GET)."""
    return web.HTTPSeeOther(location)


async def start_job(request: web.Request, title: str, template: str, action: Callable, topic: str | None = None,
                    **context: Any) -> web.HTTPSeeOther:
    """Queue a long action owned by the viewer and answer with its page (``jobs.py``). With ``topic``, an
    unknown topic is refused now, with Kafka's message, rather than as a failed job."""
    c = console(request)
    if topic is not None:
        await c.run(c.cl.manager.partitions_for, topic)
        context["topic"] = topic
    job = c.jobs.start(title, template, owner=viewer(request).principal, action=action, **context)
    return see_other(f"/jobs/{job.id}")


def topic_url(topic: str, *rest: str) -> str:
    return "/".join(["/topics", quote(topic, safe=""), *rest])


class Refused(Exception):
    """Not allowed by the ACLs: a 403 page saying who was refused what."""


# middleware ----------------------------------------------------------------------------------------

@web.middleware
async def _errors(request: web.Request, handler):
    try:
        return await handler(request)
    except Refused as exc:
        return _error_page(request, 403, "Not authorized", str(exc))
    except UnknownTopicOrPartitionError as exc:  # gone, or never there: the page's subject does not exist
        return _error_page(request, 404, "Unknown topic", str(exc))
    except CompactLogError as exc:
        return _error_page(request, 400, type(exc).__name__, str(exc))
    except web.HTTPNotFound:
        return _error_page(request, 404, "Not found", f"There is no page at {request.path}.")
    except web.HTTPRequestEntityTooLarge:
        return _error_page(request, 413, "Too large", f"The form is larger than {MAX_FORM_BYTES:,} bytes.")
    except web.HTTPException:
        raise
    except Exception:  # a bug: the log gets the traceback, the page only says so
        log.exception("console request %s %s failed", request.method, request.path)
        return _error_page(request, 500, "Internal error", "This request failed; the broker's log says why.")


def _error_page(request: web.Request, status: int, title: str, message: str) -> web.Response:
    if VIEWER not in request:  # before the session was known (a refused CSRF token, say)
        html = render("error.html", viewer=None, console=console(request), request_path=request.path,
                      title=title, message=message)
        return web.Response(text=html, content_type="text/html", status=status)
    return page(request, "error.html", status=status, title=title, message=message)


@web.middleware
async def _headers(request: web.Request, handler):
    response = await handler(request)
    response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("Referrer-Policy", "same-origin")
    response.headers.setdefault("X-Frame-Options", "DENY")
    if not request.path.startswith("/static/"):
        response.headers.setdefault("Cache-Control", "no-store")
    return response


@web.middleware
async def _session(request: web.Request, handler):
    c = console(request)
    if request.path.startswith("/static/"):
        return await handler(request)
    s = c.sessions.get(request.cookies.get(auth.COOKIE))
    fresh = s is None
    if fresh:
        s = c.sessions.new()
    required = c.login_required()
    request["web_session"] = s
    request[VIEWER] = auth.Viewer(c.broker, auth.broker_session(request.remote or "", s.principal), s.csrf,
                                  s.user is not None, required)
    if required and s.user is None and not request.path.startswith(OPEN_PATHS):
        if request.method == "GET" and "HX-Request" not in request.headers:
            response: web.StreamResponse = web.HTTPSeeOther(f"/login?next={quote(request.path_qs, safe='')}")
        else:
            response = _error_page(request, 401, "Login required", "Log in to use the console.")
    else:
        try:
            response = await handler(request)
        except web.HTTPException as exc:  # redirects are answers too, and carry the cookie
            response = exc
    if fresh or request.get("new_session_cookie"):
        set_cookie(request, response, request["web_session"])
    if isinstance(response, web.HTTPException) and response.status >= 300:
        raise response
    return response


def set_cookie(request: web.Request, response: web.StreamResponse, s: auth.WebSession) -> None:
    response.set_cookie(auth.COOKIE, s.token, httponly=True, samesite="Strict", path="/",
                        secure=request.secure)


@web.middleware
async def _csrf(request: web.Request, handler):
    """Every POST carries the session's token; a cross-site form cannot know it."""
    if request.method not in ("GET", "HEAD", "OPTIONS") and not request.path.startswith("/static/"):
        s: auth.WebSession = request["web_session"]
        sent = request.headers.get(auth.CSRF_HEADER)
        if sent is None:
            sent = (await request.post()).get(auth.CSRF_FIELD)
        if not s.csrf_matches(sent if isinstance(sent, str) else None):
            return _error_page(request, 403, "Refused", "The form's security token is missing or out of date: "
                               "reload the page and try again.")
    return await handler(request)
