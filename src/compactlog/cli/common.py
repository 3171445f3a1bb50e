"""Flags and helpers shared by every command, so a flag means the same thing everywhere."""

from __future__ import annotations

import functools
from typing import Callable

import click

from ..errors import CompactLogError


def data_dir_option(f: Callable) -> Callable:
    f = click.option("--server-properties", "server_properties", type=click.Path(exists=True, dir_okay=False),
                     help="Broker defaults in server.properties format (log.retention.ms=..., num.partitions=...).")(f)
    return click.option("--data-dir", required=True, type=click.Path(file_okay=False),
                        help="The data directory (Kafka's log.dirs); created if missing.")(f)


def kafka_errors(f: Callable) -> Callable:
    """Turn our typed errors into ``Error: ...`` and exit status 1."""

    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        try:
            return f(*args, **kwargs)
        except CompactLogError as exc:
            raise click.ClickException(str(exc)) from None

    return wrapper


def parse_key_values(items: tuple[str, ...] | list[str], what: str) -> dict[str, str]:
    """``k=v`` pairs from repeated flags or comma lists (``--add-config a=1,b=2``)."""
    out: dict[str, str] = {}
    for item in items:
        for part in _split_top_level(item):
            if not part:
                continue
            key, sep, value = part.partition("=")
            if not sep or not key.strip():
                raise click.BadParameter(f"expected key=value, got {part!r}", param_hint=what)
            out[key.strip()] = value.strip()
    return out


def _split_top_level(text: str) -> list[str]:
    """Split on commas, except inside [...] (kafka-configs lets list values be bracketed)."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    parts.append("".join(cur))
    return [p.replace("[", "").replace("]", "") for p in parts]


def open_data_dir(data_dir: str, server_properties: str | None):
    from .. import open as open_dir

    return open_dir(data_dir, server_properties)
