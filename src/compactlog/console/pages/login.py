"""Logging in and out with the broker's SASL credentials (``auth.py`` says how)."""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import urlsplit

from aiohttp import web

from .. import auth
from ..fields import shown
from ..handlers import console, page, see_other

routes = web.RouteTableDef()
log = logging.getLogger(__name__)


def _safe_next(target: str | None) -> str:
    """Only a path of this console: ``next`` must not send a logged-in user to another site.

    Browsers read a backslash as a slash and drop tabs and newlines from a Location, so ``/\\host`` and
    ``/<tab>/host`` mean ``//host``: a target with either, or any other control character, goes home."""
    if (not target or not target.startswith("/") or target.startswith("//") or urlsplit(target).netloc
            or "\\" in target or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in target)):
        return "/"
    return target


@routes.get("/login")
async def login_form(request: web.Request) -> web.Response:
    return page(request, "login.html", next=_safe_next(request.query.get("next")), error=None, user="")


@routes.post("/login")
async def login(request: web.Request) -> web.Response:
    c = console(request)
    form = await request.post()
    user, password = str(form.get("username", "")), str(form.get("password", ""))
    target = _safe_next(str(form.get("next", "")))
    if user and password and await c.run(auth.check_password, c.broker.extras["credentials"], user, password):
        old = request["web_session"]
        c.sessions.drop(old.token)
        request["web_session"] = c.sessions.new(user)  # a new token at login: a planted cookie gains nothing
        request["new_session_cookie"] = True
        log.info("console login as %s from %s", shown(user), request.remote)
        raise see_other(target)
    log.info("failed console login as %s from %s", shown(user), request.remote)
    await asyncio.sleep(c.broker.config.get("connection.failed.authentication.delay.ms") / 1000)
    return page(request, "login.html", status=401, next=target, user=user,
                error="Authentication failed: Invalid username or password")  # the broker's PLAIN words


@routes.post("/logout")
async def logout(request: web.Request) -> web.Response:
    c = console(request)
    c.sessions.drop(request["web_session"].token)
    request["web_session"] = c.sessions.new()
    request["new_session_cookie"] = True
    raise see_other("/login" if c.login_required() else "/")

