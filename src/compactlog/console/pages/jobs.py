"""A long action's page: its progress, asked for every second, then its result (``jobs.py`` says why)."""

from __future__ import annotations

from aiohttp import web

from ..handlers import console, page, viewer
from ..jobs import Job

routes = web.RouteTableDef()


def _job(request: web.Request) -> Job:
    text = request.match_info["id"]  # digits of any script match the route's \d: only ASCII ones, of a sane length, name a job
    job = console(request).jobs.get(int(text)) if text.isascii() and len(text) <= 18 else None
    v = viewer(request)
    if job is None or (job.owner != v.principal and not v.can("ALTER")):
        raise web.HTTPNotFound()
    return job


@routes.get(r"/jobs/{id:\d+}")
async def job_page(request: web.Request) -> web.Response:
    return page(request, "job.html", job=_job(request))


@routes.get(r"/jobs/{id:\d+}/status")
async def job_status(request: web.Request) -> web.Response:
    """The fragment the page swaps in; once the job is done it stops asking (no hx-trigger left)."""
    return page(request, "job_status.html", job=_job(request))
