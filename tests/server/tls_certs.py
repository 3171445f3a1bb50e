"""Test certificates made with the ``openssl`` command line: a CA, a server certificate for 127.0.0.1 and
localhost, and a client certificate, all signed by the CA (EC P-256 keys: fast to make).

The ``cryptography`` package is not installed here and the broker does not need it, so the tests do
not either; every machine the tests run on has ``openssl``.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

CLIENT_SUBJECT = "/C=US/O=Acme, Inc/OU=eng/CN=client"
CLIENT_PRINCIPAL = "User:CN=client,OU=eng,O=Acme\\, Inc,C=US"  # RFC 2253: most specific first, ',' escaped
KEY_PASSWORD = "key-secret"


@dataclass(frozen=True)
class Certs:
    ca: Path  # the CA certificate (the truststore)
    server_keystore: Path  # the server's certificate and unencrypted key in one PEM file
    server_cert: Path
    server_key_encrypted: Path  # PKCS #8, encrypted with KEY_PASSWORD
    client_cert: Path
    client_key: Path
    other_ca: Path  # a CA nobody signed with: a client trusting only it must fail


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=30)


def _key(name: str, d: Path) -> None:
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", name, cwd=d)


def _ca(name: str, d: Path) -> None:
    _key(f"{name}.key", d)
    _openssl("req", "-x509", "-new", "-key", f"{name}.key", "-out", f"{name}.pem", "-days", "2",
             "-subj", f"/CN=compactlog tests {name}", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)


def _signed(name: str, subject: str, extensions: str, d: Path) -> None:
    _key(f"{name}.key", d)
    _openssl("req", "-new", "-key", f"{name}.key", "-out", f"{name}.csr", "-subj", subject, cwd=d)
    (d / f"{name}.ext").write_text(extensions)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext", cwd=d)


def make_certs(d: Path) -> Certs:
    d.mkdir(parents=True, exist_ok=True)
    _ca("ca", d)
    _ca("other", d)
    _signed("server", "/CN=localhost", "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
            "extendedKeyUsage=serverAuth\n", d)
    _signed("client", CLIENT_SUBJECT, "extendedKeyUsage=clientAuth\n", d)
    (d / "server-keystore.pem").write_text((d / "server.pem").read_text() + (d / "server.key").read_text())
    _openssl("pkcs8", "-topk8", "-in", "server.key", "-out", "server-enc.key", "-v2", "aes-256-cbc",
             "-passout", f"pass:{KEY_PASSWORD}", cwd=d)
    return Certs(d / "ca.pem", d / "server-keystore.pem", d / "server.pem", d / "server-enc.key",
                 d / "client.pem", d / "client.key", d / "other.pem")


@pytest.fixture(scope="session")
def certs(tmp_path_factory) -> Certs:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command line is needed to make test certificates")
    return make_certs(tmp_path_factory.mktemp("certs"))
