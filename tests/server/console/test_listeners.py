"""Where the console listens: ``--http`` / ``http.listeners``, loopback unless a host says otherwise, https
with the broker's keystore, and a clear refusal of a value that is not an address."""

from __future__ import annotations

import ssl
import subprocess
import sys
import urllib.request

import pytest
from tls_certs import certs  # noqa: F401 - the session fixture

from compactlog.console.listeners import HttpListener, parse_http_listeners
from compactlog.errors import InvalidConfigError


def test_a_port_alone_means_loopback_and_a_host_is_kept():
    assert parse_http_listeners(["8080"]) == [HttpListener("http", "127.0.0.1", 8080)]
    assert parse_http_listeners([":0"]) == [HttpListener("http", "127.0.0.1", 0)]
    assert parse_http_listeners(["https://0.0.0.0:8443", "localhost:8080"]) == [
        HttpListener("https", "0.0.0.0", 8443), HttpListener("http", "localhost", 8080)]
    assert parse_http_listeners(None) == []
    for bad in ("ftp://127.0.0.1:21", "http://127.0.0.1", "127.0.0.1:port", "http://127.0.0.1:80/console"):
        with pytest.raises(InvalidConfigError, match="for configuration http.listeners"):
            parse_http_listeners([bad])


def test_serve_refuses_a_bad_console_address_before_it_starts(tmp_path):
    r = subprocess.run([sys.executable, "-m", "compactlog", "serve", "--data-dir", str(tmp_path / "d"),
                        "--override", "listeners=PLAINTEXT://127.0.0.1:0", "--http", "127.0.0.1:http"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "Invalid value http://127.0.0.1:http for configuration http.listeners" in r.stderr


def test_https_serves_the_console_with_the_broker_keystore(serve_factory, certs):  # noqa: F811
    s = serve_factory(**{"http.listeners": "https://127.0.0.1:0", "ssl.keystore.type": "PEM",
                         "ssl.keystore.location": str(certs.server_keystore)})
    assert s.console_url.startswith("https://127.0.0.1:")
    trusting = ssl.create_default_context(cafile=str(certs.ca))
    with urllib.request.urlopen(s.console_url + "/", context=trusting, timeout=30) as r:
        assert r.status == 200
        assert "Overview" in r.read().decode()
        cookie = r.headers["Set-Cookie"]
    assert "Secure" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(s.console_url + "/", context=ssl.create_default_context(cafile=str(certs.other_ca)),
                               timeout=30)
