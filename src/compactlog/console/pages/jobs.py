"""A long action's page: its progress, asked for every second, then its result (``jobs.py`` says why)."""

from __future__ import annotations

from aiohttp import web

from ...numbers import read_integer
from ..handlers import console, page, viewer
from ..jobs import Job

routes = web.RouteTableDef()


def _job(request: web.Request) -> Job:
    job_id = read_integer(request.match_info["id"])  # the route's \d also matches other scripts' digits: not a job's
    job = console(request).jobs.get(job_id) if job_id is not None else None
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
