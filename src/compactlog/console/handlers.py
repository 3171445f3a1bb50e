"""What every page handler shares: the console and viewer of a request, and its answers (a page
rendered off the event loop, a redirect, a refusal by the ACLs, a job).

The page modules under ``pages/`` import this module and ``runtime.py``, never ``app.py``, which
composes them into the application.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any
from aiohttp import web

from . import auth, paths
from .render import render
from .runtime import CONSOLE, Console

log = logging.getLogger(__name__)
VIEWER = "viewer"  # request key of the auth.Viewer


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
        await c.run(c.cl.partitions_for, topic)
        context["topic"] = topic
    job = c.jobs.start(title, template, owner=viewer(request).principal, action=action, **context)
    return see_other(f"/jobs/{job.id}")


def topic_url(topic: str, *rest: str) -> str:
    return paths.path("/topics", topic, *rest)


def group_url(group_id: str, *rest: str) -> str:
    return paths.path("/groups", group_id, *rest)


def path_name(request: web.Request, key: str) -> str:
    """The topic or group a route's ``{key}`` names (``paths.py``: how names become segments)."""
    return paths.name(request.match_info[key])


class Refused(Exception):
    """Not allowed by the ACLs: a 403 page saying who was refused what."""
