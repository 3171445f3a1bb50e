"""Helpers the console tests share (imported by name: pytest puts this directory on the path)."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
ARTIFACTS = ROOT / "test-artifacts" / "console"


def shot(pg, name: str) -> Path:
    """Save a full-page screenshot as a test artifact; returns its path."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / (re.sub(r"[^A-Za-z0-9._-]", "_", name) + ".png")
    try:
        pg.screenshot(path=str(path), full_page=True)
    except Exception:  # noqa: BLE001 - a page that already closed leaves no picture
        pass
    return path


@contextlib.contextmanager
def module_serve(data_dir: Path, **overrides: str):
    """One ``compactlog serve`` for a whole module (with the console when ``http.listeners`` is given)."""
    from security_clients import ServeProcess

    s = ServeProcess(data_dir, overrides).start()
    try:
        yield s
    finally:
        s.kill()


SECURED = {"http.listeners": "http://127.0.0.1:0", "super.users": "User:admin"}  # a console behind logins


def users_data_dir(tmp_path_factory, name: str, users: dict[str, str]) -> Path:
    """A fresh data directory with SCRAM users (user -> password), made before the broker starts."""
    from security_clients import add_users

    d = tmp_path_factory.mktemp(name) / "data"
    d.mkdir()
    add_users(d, users)
    return d


def allow(data_dir: Path, principal: str, operations: tuple[str, ...], *resource: str) -> None:
    """ALLOW ACLs for ``principal``, one an operation, on ``resource`` (``kafka-acls`` flags such as
    ``--topic shared``), added while the broker is down."""
    from security_clients import cli

    for op in operations:
        cli("acls", "--data-dir", str(data_dir), "--add", "--allow-principal", principal, "--operation", op, *resource)
