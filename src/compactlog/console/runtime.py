"""One running web console: the ``Console`` every page handler reaches through its request.

It holds what the pages share over the broker (its ``CompactLog``, the browser sessions, the jobs, the
console's one thread for disk reads and rendering) and serves the aiohttp application on its
listeners as a service of the ``serve`` process. The pages and the middleware are handed in as tables
(``app.py`` composes them), so this module, below the pages, knows none of them.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

from aiohttp import web

from . import auth
from .jobs import Jobs
from .listeners import HttpListener
from .protocol import ConsoleRunner

log = logging.getLogger(__name__)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Middleware = Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]  # aiohttp's new-style middleware
STATIC = Path(__file__).parent / "static"
FAVICON = "/favicon.ico"
MAX_FORM_BYTES = 64 * 1024  # the largest form a page sends (a config value, a key to look up)
PAGE_THREADS = 1  # the thread that reads the disk and renders for pages; one, so pages contend with the broker for one core at most
STOP_SECONDS = 30.0  # what a stop waits for a running job and page reads before the broker closes its logs
# How long a thread may keep the GIL while another waits for it. Pages are Python work on the console's
# threads; at CPython's 5 ms every hand-over between the broker's event loop and its append threads could
# wait that long behind a page, several times a request (bench/bench_console.py: produce p50 1 ms idle,
# 52 ms with four page loaders at 5 ms, 7 ms at 1 ms).
GIL_SWITCH_SECONDS = 0.001


class Console:
    """The web console over one running broker: a service of the ``serve`` process (``network.Service``),
    started once the broker's listeners accept, on ``listeners``; ``on_url`` hears each bound address."""

    def __init__(self, broker, server=None, listeners: Sequence[HttpListener] = (),
                 on_url: Callable[[str], None] = lambda url: None, *, pages: Sequence[ModuleType] = (),
                 middlewares: Sequence[Middleware] = ()) -> None:
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
        self.app = self._application(pages, middlewares)
        self._runner: web.AppRunner | None = None

    def _application(self, pages: Sequence[ModuleType], middlewares: Sequence[Middleware]) -> web.Application:
        """The aiohttp application: each page module's ``routes``, and its ``setup(console)`` if it has one."""
        app = web.Application(middlewares=list(middlewares), client_max_size=MAX_FORM_BYTES)
        app[CONSOLE] = self
        app.router.add_static("/static", STATIC)
        app.router.add_get(FAVICON, _favicon)  # browsers ask for it at the root, whatever the page links
        for page in pages:
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
        self._runner = ConsoleRunner(self.app, access_log=None, handle_signals=False)
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


async def _favicon(request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC / "favicon.ico", headers={"Cache-Control": "max-age=86400"})


CONSOLE = web.AppKey("console", Console)
