"""Users' SCRAM credentials in the data directory: ``__security/credentials.json``.

The file maps each user to its credentials per mechanism (salt, stored key, server key, iterations;
see ``scram.py``), never a password. ``compactlog configs --entity-type users`` writes it and a
running broker reads it again whenever it changed, so a user added or removed while the broker runs
counts from that user's next login (connections already authenticated stay, as in Kafka).

Layout::

    {"version": 1,
     "users": {"alice": {"SCRAM-SHA-256": {"salt": "<base64>", "stored_key": "<base64>",
                                           "server_key": "<base64>", "iterations": 8192}}}}
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..errors import InvalidConfigError, shown
from ..storage import files
from .scram import DEFAULT_ITERATIONS, SCRAM_MECHANISMS, ScramCredential, make_credential
from .store import JsonFile

VERSION = 1


def _empty() -> dict:
    return {"version": VERSION, "users": {}}


@dataclass(frozen=True)
class NewCredential:
    """A credential to set: the password exists only on its way to the salted form."""

    mechanism: str
    password: str
    iterations: int = DEFAULT_ITERATIONS


class CredentialStore:
    """The credentials of one data directory."""

    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        self.file = JsonFile(data_dir, files.CREDENTIALS_FILE, _empty)

    def lookup(self, user: str, mechanism: str) -> ScramCredential | None:
        """The user's credential for a SCRAM mechanism, None if it has none (or is unknown)."""
        entry = self.file.read().get("users", {}).get(user, {}).get(mechanism)
        if entry is None:
            return None
        try:
            return ScramCredential.from_json(entry)
        except (KeyError, TypeError, ValueError):
            return None  # a damaged entry logs nobody in

    def describe(self, user: str | None = None) -> dict[str, dict[str, int]]:
        """user -> mechanism -> iterations (what ``--describe`` prints: never salts or keys)."""
        users = self.file.read().get("users", {})
        names = [user] if user is not None else sorted(users)
        return {u: {m: int(c.get("iterations", 0)) for m, c in sorted(users.get(u, {}).items())}
                for u in names if u in users}

    def alter(self, user: str, add: list[NewCredential] = (), delete: list[str] = ()) -> None:
        """Set and remove credentials of ``user`` in one write; a user left with none is removed."""
        if not user:
            raise InvalidConfigError("The user name must not be empty")
        for name in [c.mechanism for c in add] + list(delete):
            if name not in SCRAM_MECHANISMS:
                raise InvalidConfigError(f"Invalid config {shown(name, '')} for users: only "
                                         f"{' and '.join(SCRAM_MECHANISMS)} credentials can be set")
        both = {c.mechanism for c in add} & set(delete)
        if both:
            raise InvalidConfigError(f"{sorted(both)[0]} is both added and deleted")
        made = {c.mechanism: make_credential(c.mechanism, c.password, c.iterations) for c in add}

        def change(data: dict) -> None:
            users = data.setdefault("users", {})
            entry = users.setdefault(user, {})
            for name in delete:
                if name not in entry:
                    raise InvalidConfigError(f"User {shown(user, '')} has no {name} credential to delete")
                del entry[name]
            for name, cred in made.items():
                entry[name] = cred.to_json()
            if not entry:
                del users[user]

        self.file.update(change)

    def has(self, user: str, mechanism: str) -> bool:
        return mechanism in self.file.read().get("users", {}).get(user, {})

    def replace(self, deletions: list[tuple[str, str]], upsertions: list[tuple[str, str, ScramCredential]]) -> None:
        """Remove (user, mechanism) credentials and set (user, mechanism, credential) ones in one write
        (AlterUserScramCredentials applies a request's accepted changes together); a missing one to
        delete is skipped, a user left with none is removed. The caller has checked names and mechanisms."""
        def change(data: dict) -> None:
            users = data.setdefault("users", {})
            for user, mechanism in deletions:
                users.get(user, {}).pop(mechanism, None)
            for user, mechanism, cred in upsertions:
                users.setdefault(user, {})[mechanism] = cred.to_json()
            for user in {u for u, *_ in [*deletions, *upsertions]}:
                if user in users and not users[user]:
                    del users[user]

        self.file.update(change)
