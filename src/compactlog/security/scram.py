"""SCRAM credentials and the server side of the SASL mechanisms PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512.

A SCRAM credential (RFC 5802, as Kafka stores one) is what a server needs to check a password without
keeping it: a random salt, an iteration count, ``StoredKey = H(HMAC(SaltedPassword, "Client Key"))`` and
``ServerKey = HMAC(SaltedPassword, "Server Key")``, where ``SaltedPassword`` is PBKDF2 of the password.
PLAIN logins are checked against the same credential (the server derives the stored key from the
offered password), so no password is kept in any form that gives it back.

The mechanisms are sans-IO: ``step(token)`` takes the client's bytes and returns the server's answer,
raising ``SaslAuthenticationFailedError`` when the login fails; ``complete`` tells when it succeeded.
Every failure gives the client the same text, so that it learns nothing about which users exist: an
unknown user is even offered a made-up salt and only fails at the proof, as a wrong password does.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass
from typing import Callable

from ..errors import InvalidConfigError, SaslAuthenticationFailedError, shown

# name -> hashlib name. Kafka's limits on iterations for both: 4096 to 16384, 4096 by default.
SCRAM_MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS, MAX_ITERATIONS, DEFAULT_ITERATIONS = 4096, 16384, 4096
PLAIN = "PLAIN"
MECHANISMS = (PLAIN, *SCRAM_MECHANISMS)
_PROCESS_SECRET = os.urandom(32)  # made-up salts for unknown users, stable while the process runs


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)


@dataclass(frozen=True)
class ScramCredential:
    """What is kept of one user's password for one SCRAM mechanism (Kafka's four fields)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_json(self) -> dict:
        return {"salt": _b64(self.salt), "stored_key": _b64(self.stored_key),
                "server_key": _b64(self.server_key), "iterations": self.iterations}

    @classmethod
    def from_json(cls, d: dict) -> "ScramCredential":
        return cls(_unb64(d["salt"]), _unb64(d["stored_key"]), _unb64(d["server_key"]), int(d["iterations"]))


def _hmac(hash_name: str, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, hash_name).digest()


def _keys(hash_name: str, password: str, salt: bytes, iterations: int) -> tuple[bytes, bytes, bytes]:
    """(ClientKey, StoredKey, ServerKey) of a password, per RFC 5802."""
    salted = hashlib.pbkdf2_hmac(hash_name, password.encode("utf-8"), salt, iterations)
    client_key = _hmac(hash_name, salted, b"Client Key")
    return client_key, hashlib.new(hash_name, client_key).digest(), _hmac(hash_name, salted, b"Server Key")


def check_iterations(mechanism: str, iterations: int) -> None:
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise InvalidConfigError(f"Invalid value {iterations} for iterations of {mechanism}: "
                                 f"must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}")


def make_credential(mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    """A new credential for ``password`` (a random 32-byte salt unless one is given, for tests)."""
    if mechanism not in SCRAM_MECHANISMS:
        raise InvalidConfigError(f"Unknown SCRAM mechanism {mechanism} (known: {', '.join(SCRAM_MECHANISMS)})")
    check_iterations(mechanism, iterations)
    if not password:
        raise InvalidConfigError(f"The password of {mechanism} must not be empty")
    salt = os.urandom(32) if salt is None else salt
    _, stored, server = _keys(SCRAM_MECHANISMS[mechanism], password, salt, iterations)
    return ScramCredential(salt, stored, server, iterations)


def credential_from_salted(mechanism: str, salt: bytes, salted_password: bytes, iterations: int) -> ScramCredential:
    """The credential of a password a client salted itself (AlterUserScramCredentials sends
    ``SaltedPassword``, so the password never reaches the broker): the keys derive from it as in RFC 5802."""
    hash_name = SCRAM_MECHANISMS[mechanism]
    client_key = _hmac(hash_name, salted_password, b"Client Key")
    return ScramCredential(salt, hashlib.new(hash_name, client_key).digest(),
                           _hmac(hash_name, salted_password, b"Server Key"), iterations)


def password_matches(mechanism: str, credential: ScramCredential, password: str) -> bool:
    """Whether ``password`` is the one ``credential`` was made from (for PLAIN logins). Slow on purpose:
    it runs PBKDF2 with the credential's iterations."""
    _, stored, _ = _keys(SCRAM_MECHANISMS[mechanism], password, credential.salt, credential.iterations)
    return hmac.compare_digest(stored, credential.stored_key)


# The server side of a login --------------------------------------------------------------------------

Lookup = Callable[[str, str], "ScramCredential | None"]  # (user, mechanism) -> credential


def _failed(mechanism: str) -> SaslAuthenticationFailedError:
    """A wrong password or unknown user, in the words Kafka's broker answers (what operators search for):
    PLAIN's own message, and for SCRAM the generic one Kafka gives for any failed exchange."""
    return SaslAuthenticationFailedError(failed_login_message(mechanism))


def failed_login_message(mechanism: str) -> str:
    if mechanism == PLAIN:
        return "Authentication failed: Invalid username or password"
    return f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"


class PlainServer:
    """SASL PLAIN (RFC 4616): one message ``authzid NUL user NUL password``, one empty answer."""

    mechanism = PLAIN

    def __init__(self, lookup: Lookup, order: tuple[str, ...] = ("SCRAM-SHA-512", "SCRAM-SHA-256")) -> None:
        self.lookup = lookup
        self.order = order  # which stored credential checks the password, first found wins
        self.username: str | None = None
        self.complete = False

    def step(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslAuthenticationFailedError("The PLAIN exchange is already complete")
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise SaslAuthenticationFailedError("Invalid SASL/PLAIN request: expected 3 tokens")
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise SaslAuthenticationFailedError("Invalid SASL/PLAIN request: not UTF-8") from None
        if not user or not password:
            raise SaslAuthenticationFailedError("Invalid SASL/PLAIN request: empty username or password")
        if authzid and authzid != user:
            raise SaslAuthenticationFailedError("Authentication failed: the authorization id differs from the username")
        for mechanism in self.order:
            cred = self.lookup(user, mechanism)
            if cred is not None:
                ok = password_matches(mechanism, cred, password)
                break
        else:  # an unknown user costs the same work as a known one
            password_matches("SCRAM-SHA-256", make_credential("SCRAM-SHA-256", "x", salt=b"\0" * 32), password)
            ok = False
        if not ok:
            raise _failed(PLAIN)
        self.username = user
        self.complete = True
        return b""


def _attributes(text: str) -> list[tuple[str, str]]:
    """``a=1,b=2`` as pairs (values may hold '=', never ','). Kafka's extensions have longer names
    (``tokenauth=true``), so any non-empty name is read."""
    out = []
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SaslAuthenticationFailedError(f"Invalid SCRAM message attribute {shown(item)}")
        out.append((key, value))
    return out


def _printable(nonce: str) -> bool:
    """A nonce as Kafka's SCRAM messages allow one: printable ASCII ('!' to '~'), at least one character
    (',' cannot occur: it separates the attributes)."""
    return bool(nonce) and all("!" <= c <= "~" for c in nonce)


def _saslname(text: str) -> str:
    """A SCRAM username with its escapes (=2C for ',', =3D for '=') undone; any other '=' is invalid."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "=":
            code = text[i + 1:i + 3]
            if code not in ("2C", "3D"):
                raise SaslAuthenticationFailedError("Invalid SCRAM username encoding")
            out.append("," if code == "2C" else "=")
            i += 3
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


class ScramServer:
    """The server side of SCRAM-SHA-256/512: client-first -> server-first, client-final -> server-final."""

    def __init__(self, mechanism: str, lookup: Lookup) -> None:
        self.mechanism = mechanism
        self.hash = SCRAM_MECHANISMS[mechanism]
        self.lookup = lookup
        self.username: str | None = None
        self.complete = False
        self._state = "first"
        self._credential: ScramCredential | None = None
        self._known = False
        self._gs2_header = ""
        self._nonce = ""
        self._messages: list[str] = []

    def step(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationFailedError("Invalid SCRAM message: not UTF-8") from None
        if self._state == "first":
            return self._first(text).encode("utf-8")
        if self._state == "final":
            return self._final(text).encode("utf-8")
        raise SaslAuthenticationFailedError("The SCRAM exchange is already complete")

    def _first(self, text: str) -> str:
        flag, sep1, rest = text.partition(",")
        authzid, sep2, bare = rest.partition(",")
        if not (sep1 and sep2) or flag != "n":  # Kafka's server takes "n" only (no channel binding)
            raise SaslAuthenticationFailedError("Invalid SCRAM client-first message (channel binding is not supported)")
        attrs = _attributes(bare)
        if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r" or not _printable(attrs[1][1]):
            raise SaslAuthenticationFailedError("Invalid SCRAM client-first message: expected n=user,r=nonce")
        user = _saslname(attrs[0][1])
        if authzid and (not authzid.startswith("a=") or _saslname(authzid[2:]) != user):
            raise SaslAuthenticationFailedError("Authentication failed: the authorization id differs from the username")
        for key, value in attrs[2:]:  # other extensions are ignored, as Kafka ignores ones it does not know
            if key == "m" or (key == "tokenauth" and value.lower() == "true"):
                raise SaslAuthenticationFailedError(f"Unsupported SCRAM extension {shown(f'{key}={value}', '')} "
                                                    "(no delegation tokens here)")
        self.username = user
        cred = self.lookup(user, self.mechanism)
        self._known = cred is not None
        if cred is None:  # offer a salt that looks real; the proof will fail
            fake_salt = _hmac("sha256", _PROCESS_SECRET, f"{self.mechanism}\0{user}".encode())
            cred = ScramCredential(fake_salt, os.urandom(64), os.urandom(64), DEFAULT_ITERATIONS)
        self._credential = cred
        self._gs2_header = f"{flag},{authzid},"
        self._nonce = attrs[1][1] + secrets.token_urlsafe(18)
        server_first = f"r={self._nonce},s={_b64(cred.salt)},i={cred.iterations}"
        self._messages = [bare, server_first]
        self._state = "final"
        return server_first

    def _final(self, text: str) -> str:
        """Check ``c=<binding>,r=<nonce>[,ext...],p=<proof>`` as Kafka's SCRAM server does.

        The nonce must *end with* the combined nonce sent in server-first (Kafka's rule since 3.8.1):
        librdkafka before 2.6.1 (Debian 12's 2.0.2, for one) repeats its own nonce in front of it. The
        proof is checked over the messages as exchanged, with that nonce as the client sent it; as in
        Kafka, extensions in this message are not part of the signed text.
        """
        without_proof, sep, proof_b64 = text.rpartition(",p=")
        if not sep:
            raise SaslAuthenticationFailedError("Invalid SCRAM client-final message: no proof")
        attrs = _attributes(without_proof)
        if len(attrs) < 2 or attrs[0][0] != "c" or attrs[1][0] != "r":
            raise SaslAuthenticationFailedError("Invalid SCRAM client-final message: expected c=...,r=...,p=...")
        binding, nonce = attrs[0][1], attrs[1][1]
        if not _printable(nonce):
            raise SaslAuthenticationFailedError("Invalid SCRAM client-final message: the nonce is not printable")
        if binding != _b64(self._gs2_header.encode("utf-8")):
            raise SaslAuthenticationFailedError("Invalid SCRAM client-final message: channel binding differs")
        if not nonce.endswith(self._nonce):
            raise SaslAuthenticationFailedError("Invalid SCRAM client-final message: the nonce does not end "
                                                "with the server's nonce")
        self._state = "done"
        try:
            proof = _unb64(proof_b64)
        except ValueError:
            raise _failed(self.mechanism) from None
        cred = self._credential
        auth_message = ",".join([*self._messages, f"c={binding},r={nonce}"]).encode("utf-8")
        signature = _hmac(self.hash, cred.stored_key, auth_message)
        if len(proof) != len(signature):
            raise _failed(self.mechanism)
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not self._known or not hmac.compare_digest(hashlib.new(self.hash, client_key).digest(), cred.stored_key):
            raise _failed(self.mechanism)
        self.complete = True
        return "v=" + _b64(_hmac(self.hash, cred.server_key, auth_message))


def server_mechanism(mechanism: str, lookup: Lookup):
    """A fresh server side of ``mechanism`` (PLAIN or SCRAM-SHA-256/512)."""
    if mechanism == PLAIN:
        return PlainServer(lookup)
    return ScramServer(mechanism, lookup)
