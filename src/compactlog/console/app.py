"""The console's aiohttp application, composed: the page registry and the middleware around it.

Each page module under ``pages/`` holds a ``routes`` table (and may hold ``setup(console)``); ``PAGES``
lists them and ``build`` hands them to a ``Console`` (``runtime.py``). The middleware around them sets
the security headers, finds the browser's session, asks for a login when the data directory has SASL
users, checks the CSRF token of every POST and turns our typed errors into a page with Kafka's message.
What the pages share lives below, in ``handlers.py`` and ``runtime.py``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from urllib.parse import quote

from aiohttp import web

from ..errors import CompactLogError, UnknownTopicOrPartitionError, shown
from . import auth
from .fields import FieldError
from .handlers import VIEWER, Refused, console, page
from .listeners import HttpListener
from .pages import cleaner, compression, groups, jobs, login, messages, overview, topics, transactions
from .protocol import SECURITY_HEADERS
from .render import render
from .runtime import FAVICON, MAX_FORM_BYTES, Console

log = logging.getLogger(__name__)
OPEN_PATHS = ("/login", "/static/", FAVICON)  # reachable before a login
PAGES = [login, overview, topics, messages, groups, transactions, cleaner, compression, jobs]


def build(broker, server=None, listeners: Sequence[HttpListener] = (),
          on_url: Callable[[str], None] = lambda url: None) -> Console:
    """The console over ``broker`` with every page of ``PAGES`` behind the middleware; ``start`` serves it."""
    return Console(broker, server, listeners, on_url, pages=PAGES, middlewares=[_headers, _errors, _session, _csrf])


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
    except FieldError as exc:  # a form or query value a page could not take, named by the message
        return _error_page(request, 400, f"Bad value for {exc.field}", str(exc))
    except web.HTTPNotFound:
        return _error_page(request, 404, "Not found", f"There is no page at {shown(request.path, '')}.")
    except web.HTTPRequestEntityTooLarge:
        return _error_page(request, 413, "Too large", f"The form is larger than {MAX_FORM_BYTES:,} bytes.")
    except web.HTTPMethodNotAllowed as exc:  # a form's address typed into the browser (GET /topics)
        allowed = ", ".join(sorted(exc.allowed_methods))
        response = _error_page(request, 405, "Method not allowed",
                               f"{request.path} takes {allowed}, not {request.method}: it is where a form sends.")
        response.headers["Allow"] = allowed
        return response
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
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    if not request.path.startswith("/static/"):
        response.headers.setdefault("Cache-Control", "no-store")
    return response


@web.middleware
async def _session(request: web.Request, handler):
    c = console(request)
    if request.path.startswith("/static/") or request.path == FAVICON:
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
