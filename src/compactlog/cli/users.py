"""``configs --entity-type users``: SCRAM credentials, as kafka-configs.sh manages them.

    compactlog configs --data-dir D --alter --entity-type users --entity-name alice \\
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]'
    compactlog configs --data-dir D --alter --entity-type users --entity-name alice --delete-config SCRAM-SHA-256
    compactlog configs --data-dir D --describe --entity-type users [--entity-name alice]

The credentials go to the data directory's ``__security/credentials.json`` salted (``compactlog.security``),
without opening the data directory, so this works while ``compactlog serve`` runs on it: the broker
reads the file again at the next login. ``--describe`` shows mechanisms and iterations, never secrets.
With ``--bootstrap-server`` they go through the broker (DescribeUserScramCredentials and
AlterUserScramCredentials, ``wire_users.py``).
"""

from __future__ import annotations

import click

from ..security.credentials import CredentialStore, NewCredential
from ..security.scram import DEFAULT_ITERATIONS
from .common import INT_MAX, parse_number


def _split(text: str) -> list[str]:
    """Split on commas outside [...]."""
    parts, depth, cur = [], 0, []
    for ch in text:
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def parse_credentials(items: tuple[str, ...] | list[str]) -> list[NewCredential]:
    """``MECHANISM=[iterations=N,password=P]`` entries (iterations optional, 4096 by default)."""
    out = []
    for item in items:
        for part in _split(item):
            mechanism, sep, value = part.partition("=")
            value = value.strip()
            if not sep or not (value.startswith("[") and value.endswith("]")):
                raise click.BadParameter(f"expected MECHANISM=[iterations=N,password=P], got {part!r}",
                                         param_hint="'--add-config'")
            fields: dict[str, str] = {}
            for field in value[1:-1].split(","):
                key, eq, v = field.partition("=")
                if not eq or key.strip() not in ("iterations", "password"):
                    raise click.BadParameter(f"{mechanism}: expected iterations=N and password=P, got {field!r}",
                                             param_hint="'--add-config'")
                fields[key.strip()] = v
            if "password" not in fields:
                raise click.BadParameter(f"{mechanism}: a password is required", param_hint="'--add-config'")
            try:
                iterations = parse_number(fields.get("iterations", str(DEFAULT_ITERATIONS)), 1, INT_MAX)
            except ValueError as exc:
                raise click.BadParameter(f"{mechanism}: iterations: {exc}", param_hint="'--add-config'") from None
            out.append(NewCredential(mechanism.strip(), fields["password"], iterations))
    return out


def configure_users(data_dir: str | None, user: str | None, action: str, add: tuple[str, ...],
                    delete: tuple[str, ...], bootstrap: str | None = None) -> None:
    """Run ``configs --alter`` or ``--describe`` for ``--entity-type users``, on the data directory's
    store or, with ``bootstrap``, through the broker (wire_users.py); the same lines either way."""
    if action == "alter":
        if not user:
            raise click.UsageError("--alter --entity-type users needs --entity-name")
        if not add and not delete:
            raise click.UsageError("--alter needs --add-config or --delete-config")
        names = [n.strip() for item in delete for n in item.split(",") if n.strip()]
        if bootstrap is not None:
            from . import wire_users  # noqa: PLC0415 - loads the Kafka client only when used

            wire_users.alter(bootstrap, user, parse_credentials(add), names)
        else:
            CredentialStore(data_dir).alter(user, parse_credentials(add), names)
        click.echo(f"Completed updating config for user {user}.")
        return
    if bootstrap is not None:
        from . import wire_users  # noqa: PLC0415

        described = wire_users.describe(bootstrap, user)
    else:
        described = CredentialStore(data_dir).describe(user)
    if user is not None and user not in described:
        click.echo(f"User {user} has no SCRAM credentials.")
    for name, mechanisms in described.items():
        shown = ", ".join(f"{m} (iterations={i})" for m, i in mechanisms.items())
        click.echo(f"SCRAM credentials of user {name}: {shown}")
