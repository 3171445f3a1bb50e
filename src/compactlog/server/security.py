"""Connection security: the TLS context of SSL and SASL_SSL listeners, and who a new connection is.

``server_ssl_context`` builds a listener's ``ssl.SSLContext`` from Kafka's ``ssl.*`` broker configs
(``listener.name.<name>.ssl.*`` over them), PEM only:
the broker's certificate chain and key from ``ssl.keystore.location`` (one PEM file holding both) or
inline from ``ssl.keystore.certificate.chain`` and ``ssl.keystore.key``; CAs for client certificates
from ``ssl.truststore.location`` or inline ``ssl.truststore.certificates``; ``ssl.client.auth`` and
``ssl.enabled.protocols`` as Kafka reads them.

``start_session`` runs when a connection is accepted (after the TLS handshake). On an SSL listener a
client that showed a certificate is ``User:<subject DN>``, the DN written as RFC 2253 has it (what
Kafka's default principal builder takes from Java's ``X500Principal.getName()``: most specific RDN
first, ``CN=client,OU=eng,O=Acme,C=US``); without one it is ``User:ANONYMOUS``. On SASL listeners the
session starts unauthenticated, and ``sasl.py`` decides what it may send until it logs in.
"""

from __future__ import annotations

import re
import ssl
import tempfile
from pathlib import Path
from typing import Any

from ..errors import InvalidConfigError, shown
from .broker import Session

SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})
SECURITY_PROTOCOL = "security_protocol"  # Session.extra key: the listener's security protocol
CLOSE_AFTER_RESPONSE = "close_after_response"  # Session.extra key: close once the current answer is sent
ANONYMOUS = "User:ANONYMOUS"

_TLS_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.S)


# TLS context ------------------------------------------------------------------------------------------

def normalize_pem(text: str) -> str:
    """PEM blocks with their base64 wrapped at 64 columns again.

    A PEM value in ``server.properties`` is usually continued over lines with backslashes, which Java's
    Properties (and ours) join without the line breaks; OpenSSL wants them back.
    """
    blocks = []
    for kind, body in _PEM_BLOCK.findall(text):
        if ":" in body:  # a block with headers (legacy encrypted keys): kept as written
            blocks.append(f"-----BEGIN {kind}-----{body}-----END {kind}-----\n")
            continue
        b64 = "".join(body.split())
        lines = [b64[i:i + 64] for i in range(0, len(b64), 64)]
        blocks.append("\n".join([f"-----BEGIN {kind}-----", *lines, f"-----END {kind}-----"]) + "\n")
    if not blocks:
        raise InvalidConfigError("expected PEM text (-----BEGIN ...-----)")
    return "".join(blocks)


class _Settings:
    """The ``ssl.*`` settings of one listener: ``listener.name.<name>.ssl.x`` over ``ssl.x``, as Kafka reads them."""

    def __init__(self, config, listener: Any = None) -> None:
        self.config = config
        self.prefix = f"listener.name.{listener.name.lower()}." if listener is not None else None

    def get(self, name: str) -> Any:
        if self.prefix is not None and self.prefix + name in self.config.originals:
            return self.config.TABLE[name].parse(self.config.originals[self.prefix + name])  # its type and checks
        return self.config.get(name)

    def is_set(self, name: str) -> bool:
        return self.prefix is not None and self.prefix + name in self.config.originals


def _load_keystore(ctx: ssl.SSLContext, config: _Settings) -> None:
    password = config.get("ssl.key.password")
    location = config.get("ssl.keystore.location")
    chain, key = config.get("ssl.keystore.certificate.chain"), config.get("ssl.keystore.key")
    try:
        if location:
            ctx.load_cert_chain(location, password=password)
            return
        if not (chain and key):
            raise InvalidConfigError("An SSL or SASL_SSL listener needs the broker's certificate and key: "
                                     "ssl.keystore.location, or ssl.keystore.certificate.chain with ssl.keystore.key")
        # OpenSSL reads keys from files only: a private directory that lives for the call.
        with tempfile.TemporaryDirectory(prefix="compactlog-tls-") as tmp:
            cert_file, key_file = Path(tmp) / "chain.pem", Path(tmp) / "key.pem"
            cert_file.write_text(normalize_pem(chain))
            key_file.touch(mode=0o600)
            key_file.write_text(normalize_pem(key))
            ctx.load_cert_chain(cert_file, key_file, password=password)
    except FileNotFoundError as exc:
        raise InvalidConfigError(f"Invalid value {shown(exc.filename, '')} for configuration ssl.keystore.location: "
                                 "no such file") from None
    except ssl.SSLError as exc:
        raise InvalidConfigError(f"Cannot load the broker's certificate and key (ssl.keystore.*, ssl.key.password): "
                                 f"{exc.reason or exc}") from None


def _load_truststore(ctx: ssl.SSLContext, config: _Settings) -> None:
    location, inline = config.get("ssl.truststore.location"), config.get("ssl.truststore.certificates")
    try:
        if location:
            ctx.load_verify_locations(cafile=location)
        elif inline:
            ctx.load_verify_locations(cadata=normalize_pem(inline))
        elif ctx.verify_mode != ssl.CERT_NONE:
            ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)  # as Kafka falls back on the JVM's CAs
    except FileNotFoundError:
        raise InvalidConfigError(f"Invalid value {shown(location, '')} for configuration ssl.truststore.location: "
                                 "no such file") from None
    except ssl.SSLError as exc:
        raise InvalidConfigError(f"Cannot load the trusted certificates (ssl.truststore.*): "
                                 f"{exc.reason or exc}") from None


def server_ssl_context(config, listener: Any = None) -> ssl.SSLContext:
    """The TLS context of an SSL or SASL_SSL ``listener`` (InvalidConfigError when incomplete).

    Settings prefixed ``listener.name.<name>.`` apply to that listener only. On a SASL_SSL listener the
    client logs in with SASL, so ``ssl.client.auth`` applies there only when given with the listener's
    prefix (Kafka's rule since KIP-684).
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    settings = _Settings(config, listener)
    versions = sorted(_TLS_VERSIONS[p] for p in settings.get("ssl.enabled.protocols"))
    if not versions:
        raise InvalidConfigError("ssl.enabled.protocols must name at least one TLS version")
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    sasl = listener is not None and listener.security_protocol == "SASL_SSL"
    client_auth = settings.get("ssl.client.auth") if not sasl or settings.is_set("ssl.client.auth") else "none"
    ctx.verify_mode = _CLIENT_AUTH[client_auth]
    _load_keystore(ctx, settings)
    _load_truststore(ctx, settings)
    return ctx


# Principals -------------------------------------------------------------------------------------------

# Attribute names RFC 2253 writes as keywords; others are written as their OID with the value in hex DER.
_KEYWORDS = {"commonName": "CN", "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
             "organizationName": "O", "organizationalUnitName": "OU", "streetAddress": "STREET",
             "domainComponent": "DC", "userId": "UID"}
_IA5_ATTRIBUTES = {"emailAddress"}  # PKCS #9 strings are IA5; other unknown attributes are taken as UTF8String


def _escape(value: str) -> str:
    out = []
    for i, ch in enumerate(value):
        if ch in ',+"\\<>;' or (i == 0 and ch in "# ") or (i == len(value) - 1 and ch == " "):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def _der_string(name: str, value: str) -> str:
    data = value.encode("utf-8")
    tag = 0x16 if name in _IA5_ATTRIBUTES else 0x0C
    n = len(data)
    if n < 0x80:
        length = bytes([n])
    else:  # DER's long form: the count of length bytes, then the length
        size = (n.bit_length() + 7) // 8
        length = bytes([0x80 | size]) + n.to_bytes(size, "big")
    return "#" + (bytes([tag]) + length + data).hex()


def _oid(name: str) -> str | None:
    try:
        return ssl._ssl.txt2obj(name, name=True)[3]  # type: ignore[attr-defined]  # (nid, short, long, oid)
    except (AttributeError, ValueError, TypeError, IndexError):
        return None


def rfc2253_name(subject: Any) -> str:
    """The RFC 2253 string of a subject as ``SSLSocket.getpeercert()`` gives it (RDNs in certificate
    order, each a tuple of (attribute, value) pairs)."""
    rdns = []
    for rdn in reversed(subject):
        parts = []
        for name, value in rdn:
            if name in _KEYWORDS:
                parts.append(f"{_KEYWORDS[name]}={_escape(value)}")
            else:
                oid = _oid(name)
                parts.append(f"{oid}={_der_string(name, value)}" if oid else f"{name}={_escape(value)}")
        rdns.append("+".join(parts))
    return ",".join(rdns)


def start_session(session: Session, security_protocol: str, transport: Any) -> None:
    """Set up a new connection's session for its listener's security protocol."""
    session.extra[SECURITY_PROTOCOL] = security_protocol
    if security_protocol in SASL_PROTOCOLS:
        session.authenticated = False
        return
    if security_protocol == "SSL":
        cert = transport.get_extra_info("peercert") if transport is not None else None
        if cert and cert.get("subject"):
            session.principal = "User:" + rfc2253_name(cert["subject"])
