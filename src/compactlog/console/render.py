"""Pages from Jinja templates, autoescaped: nothing a user typed or a record holds becomes markup.

Values reach the page as text; the only markup not written in a template is the SVG of ``charts.py``,
which escapes every label it draws. The filters say how sizes, times and offsets read on a page.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
from pathlib import Path
from typing import Any
import jinja2

from .paths import segment

_env: jinja2.Environment | None = None


def size(n: float | None) -> str:
    """Bytes as people read them: 1.2 MB (decimal, as Kafka's tools print MB/sec)."""
    if n is None:
        return "-"
    n = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000
    return f"{n:,.1f} TB"  # pragma: no cover - the loop returns


def when(ms: float | None) -> str:
    """A Kafka timestamp (ms since the epoch) in UTC, to the millisecond; '-' for none (-1)."""
    if ms is None or ms < 0:
        return "-"
    try:  # a producer may stamp a record with any long: past year 9999 there is no date to show
        t = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    except (OverflowError, ValueError, OSError):
        return f"{int(ms):,} ms (past year 9999)"
    return t.strftime("%Y-%m-%d %H:%M:%S.") + f"{int(ms) % 1000:03d} UTC"


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 1:
        return f"{seconds * 1000:,.0f} ms"
    if seconds < 120:
        return f"{seconds:,.1f} s"
    minutes, s = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days} d {hours} h"
    return f"{hours} h {minutes} min" if hours else f"{minutes} min {s} s"


def number(n: float | None) -> str:
    return "-" if n is None else f"{n:,}"


def plural(n: int, one: str, many: str) -> str:
    """``1 batch``, ``3 batches``: a count with its noun."""
    return f"{number(n)} {one if n == 1 else many}"


def percent(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:,.1f}%"


@functools.cache
def static(name: str) -> str:
    """A file under static/ with its content's hash in the query: browsers cache it until it changes."""
    digest = hashlib.sha256((Path(__file__).parent / "static" / name).read_bytes()).hexdigest()[:12]
    return f"/static/{name}?v={digest}"


def environment() -> jinja2.Environment:
    global _env
    if _env is None:
        env = jinja2.Environment(loader=jinja2.PackageLoader("compactlog.console", "templates"),
                                 autoescape=True, undefined=jinja2.StrictUndefined,
                                 trim_blocks=True, lstrip_blocks=True)
        env.filters.update(size=size, when=when, duration=duration, number=number, percent=percent, segment=segment,
                           plural=plural)
        env.globals.update(static=static)
        _env = env
    return _env


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)
