"""Every form field and URL parameter of the console, given what a user can type -- negative, zero, a
number past any long, empty, non-ASCII, 5,000 digits -- answers with one page: the value worked, or a
400 that names the field; never a 500, a traceback or Python's advice about its integer digit limit.
And requests aiohttp cannot parse (an address or a header over 8 KB) get a short page, not an echo.

One real ``compactlog serve`` for the module, spoken to over plain HTTP (a cookie jar and the CSRF
token, as a browser sends them).
"""

from __future__ import annotations

import http.cookiejar
import re
import socket
import urllib.error
import urllib.parse
import urllib.request

import pytest
from confluent_kafka import Consumer, TopicPartition
from console_support import module_serve

import compactlog

NEGATIVE, ZERO, HUGE, EMPTY, DIGIT, TEXT, DIGITS = "-1", "0", "9" * 20, "", "٣", "ünï", "9" * 5000
VALUES = {"negative": NEGATIVE, "zero": ZERO, "huge": HUGE, "empty": EMPTY, "non-ascii-digit": DIGIT,
          "non-ascii": TEXT, "5000-digits": DIGITS}
SHOP, CONFIGS, GROW, GROUP = "shop", "configs", "grow", "idle"
BAD = 400


class Client:
    """A browser's cookies and CSRF token, without the browser; redirects are answers, not followed."""

    class _NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    def __init__(self, base: str) -> None:
        self.base = base
        jar = urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        self.opener = urllib.request.build_opener(jar, self._NoRedirect)
        self.csrf = re.search(r'"X-CSRF-Token": "([^"]+)"', self.open("GET", "/", {})[1]).group(1)

    def open(self, method: str, path: str, fields: dict[str, str]) -> tuple[int, str]:
        data = None
        if method == "GET":
            path += ("&" if "?" in path else "?") + urllib.parse.urlencode(fields) if fields else ""
        else:
            data = urllib.parse.urlencode({**fields, "csrf": self.csrf}).encode()
        try:
            with self.opener.open(urllib.request.Request(self.base + path, data=data, method=method), timeout=30) as r:
                return r.status, r.read().decode(errors="replace")
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(errors="replace")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    d = tmp_path_factory.mktemp("form-values") / "data"
    with compactlog.open(str(d)) as cl:
        for topic in (SHOP, CONFIGS, GROW):
            cl.create_topic(topic, 2)
        cl.produce_batch(SHOP, [(b"k%d" % i, b"v") for i in range(5)], partition=0)
    with module_serve(d, **{"http.listeners": "http://127.0.0.1:0"}) as s:
        c = Consumer({"bootstrap.servers": s.bootstrap, "group.id": GROUP, "enable.auto.commit": False})
        c.commit(offsets=[TopicPartition(SHOP, 0, 2)], asynchronous=False)
        c.close()
        yield s


@pytest.fixture(scope="module")
def client(server):
    return Client(server.console_url)


# (form, method, path, other fields, the field (or field=how the value is typed in it), what its refusal
# says, {value name: status when not 400})
FIELDS = [
    ("browse", "GET", f"/topics/{SHOP}/messages", {}, "partition", "partition", {"zero": 200, "empty": 200}),
    ("browse", "GET", f"/topics/{SHOP}/messages", {}, "offset", "offset", {"zero": 200, "empty": 200}),
    ("browse", "GET", f"/topics/{SHOP}/messages", {"start": "timestamp"}, "timestamp", "timestamp", {"zero": 200}),
    ("browse", "GET", f"/topics/{SHOP}/messages", {}, "limit", "limit", {"empty": 200}),
    ("browse", "GET", f"/topics/{SHOP}/messages", {}, "format", "format", {"empty": 200}),
    ("browse", "GET", f"/topics/{SHOP}/messages", {}, "start", "Start", {"empty": 200}),
    ("key lookup", "GET", f"/topics/{SHOP}/messages/key", {}, "key", "", {v: 200 for v in VALUES}),
    ("key lookup", "GET", f"/topics/{SHOP}/messages/key", {"key_format": "hex"}, "key", "hex",
     {"huge": 200, "empty": 200, "5000-digits": 200}),
    ("key lookup", "GET", f"/topics/{SHOP}/messages/key", {"key": "k"}, "key_format", "key format", {"empty": 200}),
    ("create topic", "POST", "/topics", {"name": "new-{n}"}, "partitions", "partitions", {"empty": 303}),
    ("create topic", "POST", "/topics", {"name": "cfg-{n}"}, "configs=segment.ms={v}", "segment.ms", {}),
    ("create topic", "POST", "/topics", {}, "name", "opic", {"negative": 303, "zero": 303, "huge": 303}),
    ("config", "POST", f"/topics/{CONFIGS}/config", {"name": "retention.ms"}, "value", "retention.ms",
     {"negative": 303, "zero": 303}),
    ("config", "POST", f"/topics/{CONFIGS}/config", {"value": "1"}, "name", "", {}),
    ("config", "POST", f"/topics/{CONFIGS}/config", {"name": "retention.ms", "value": "1"}, "action", "action", {}),
    ("add partitions", "POST", f"/topics/{GROW}/partitions", {}, "count", "partitions", {}),
    ("delete topic", "POST", f"/topics/{SHOP}/delete", {}, "confirm", "Type the topic", {}),
    ("reset dry run", "GET", f"/groups/{GROUP}/reset", {"to": "offset"}, "offset", "offset",
     {"negative": 200, "zero": 200}),
    ("reset dry run", "GET", f"/groups/{GROUP}/reset", {}, "to", "reset to", {}),
    ("reset dry run", "GET", f"/groups/{GROUP}/reset", {"to": "datetime"}, "datetime", "date", {}),
    ("reset dry run", "GET", f"/groups/{GROUP}/reset", {"to": "earliest"}, "topic={v}-gone", "does not exist", {}),
    ("reset", "POST", f"/groups/{GROUP}/reset", {"to": "offset"}, "offset", "offset", {"negative": 303, "zero": 303}),
    ("advisor", "POST", f"/topics/{SHOP}/compression", {"min_mbps": "1"}, "sample_mb", "sample size", {}),
    ("advisor", "POST", f"/topics/{SHOP}/compression", {"sample_mb": "1"}, "min_mbps", "compression speed",
     {"zero": 303}),
    ("recompress", "POST", f"/topics/{SHOP}/compression/recompress", {"codec": "gzip"}, "level", "level",
     {"negative": 303, "empty": 303}),
    ("recompress", "POST", f"/topics/{SHOP}/compression/recompress", {}, "codec", "compression", {}),
    ("apply advice", "POST", f"/topics/{SHOP}/compression/apply", {"compression.type": "gzip"}, "level", "level",
     {"negative": 303, "empty": 303}),
    ("apply advice", "POST", f"/topics/{SHOP}/compression/apply", {}, "compression.type", "compression", {}),
    ("login", "POST", "/login", {"password": "secret"}, "username", "Invalid username or password",
     {v: 401 for v in VALUES}),
    ("login", "POST", "/login", {"username": "alice"}, "password", "Invalid username or password",
     {v: 401 for v in VALUES}),
]
CASES = [pytest.param(f, name, id=f"{f[0]}-{f[4].partition('=')[0]}-{name}") for f in FIELDS for name in VALUES]


@pytest.mark.parametrize("field, value_name", CASES)
def test_every_field_answers_a_typed_value_with_a_page(client, field, value_name):
    form, method, path, others, name, says, fine = field
    name, _, typed = name.partition("=")
    value = (typed or "{v}").format(v=VALUES[value_name])
    others = {k: v.format(n=f"{name}-{value_name}") for k, v in others.items()}
    status, text = client.open(method, path, {**others, name: value})
    expected = fine.get(value_name, BAD)
    assert status == expected, (status, re.sub(r"\s+", " ", text)[-400:])
    for leak in ("Traceback", "set_int_max_str_digits", "Exceeds the limit", "Internal error"):
        assert leak not in text
    if status in (BAD, 401):
        assert len(text) < 40_000, "a refusal is a short page (it does not repeat 5,000 digits)"
        message = re.search(r'class="error"[^>]*>(.*?)</', text, re.S)
        assert message, re.sub(r"\s+", " ", text)[-400:]
        assert says in message.group(1), (says, message.group(1))


def test_the_server_logged_no_traceback(server, client):
    client.open("GET", f"/topics/{SHOP}/messages", {"offset": DIGITS})
    assert "Traceback" not in server.log_text()


# requests aiohttp cannot parse -------------------------------------------------------------------------

def raw_request(server, data: bytes) -> tuple[int, bytes, bytes]:
    host, port = urllib.parse.urlsplit(server.console_url).netloc.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(data)
        raw = b""
        while chunk := s.recv(65536):
            raw += chunk
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), head, body


@pytest.mark.parametrize("data, status", [
    (b"GET /?" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414),
    (b"GET /topics/" + b"t" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414),
    (b"GET / HTTP/1.1\r\nHost: x\r\nX-Long: " + b"b" * 9000 + b"\r\n\r\n", 431),
    (b"GET / HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(200)) + b"\r\n", 431),
    (b"BREW /pot HTTP/1.1\r\n\r\n", 400),
], ids=["long-query", "long-path", "long-header", "many-headers", "bad-method"])
def test_unparseable_requests_get_a_short_page_and_one_log_line(server, data, status):
    before = server.log_text().count("refused a request")
    got, head, body = raw_request(server, data)
    assert got == status
    assert b"text/html" in head and b"<h1>" in body and len(body) < 4000
    assert b"Content-Security-Policy: default-src 'self'" in head
    assert b"aaaa" not in body and b"bbbb" not in body and b"tttt" not in body and b"BREW" not in body
    log = server.log_text()
    assert log.count("refused a request") == before + 1 and "Traceback" not in log

