"""A security review of the console, held by tests: redirects that stay on site, sessions a flood cannot
push out, pages that show only what the ACLs let the viewer describe, hostile input answered with a
page (never a dropped connection or a traceback), a static route that stays in its directory, and every
POST behind the CSRF token.

One real ``serve`` process with SASL users for the module, driven over plain HTTP (no browser is needed
to read a Location header or an HTML answer): ``admin`` is a super user, ``alice`` may DESCRIBE and READ
the topic ``shared`` and the group ``mixed``, ``bob`` may CREATE topics whose names start ``bob-``.
"""

from __future__ import annotations

import http.cookiejar
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

import pytest
from console_support import SECURED, allow, module_serve, users_data_dir
from security_clients import cli

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
LONG_MAX = 2**63 - 1
GROUP = "mixed"
MARKUP_GROUP = '"><svg onload=alert(1)>'


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    from confluent_kafka import Consumer, Producer, TopicPartition
    d = users_data_dir(tmp_path_factory, "console-review", USERS)
    for topic in ("shared", "secret"):
        cli("topics", "--data-dir", str(d), "--create", "--topic", topic, "--partitions", "1",
            "--config", "cleanup.policy=compact")
    # the Kafka clients below connect to the PLAINTEXT listener, as User:ANONYMOUS
    allow(d, "User:ANONYMOUS", ("All",), "--topic", "*", "--group", "*")
    allow(d, "User:alice", ("Describe", "Read"), "--topic", "shared", "--group", GROUP)
    allow(d, "User:bob", ("Create",), "--topic", "bob-", "--resource-pattern-type", "prefixed")
    with module_serve(d, **SECURED) as s:
        p = Producer({"bootstrap.servers": s.bootstrap})
        p.produce("shared", key=b"k", value=b"from the far future", timestamp=LONG_MAX)
        for i in range(5):
            p.produce("secret", key=b"k%d" % i, value=b"v")
        assert p.flush(10) == 0
        for group in (GROUP, MARKUP_GROUP):
            c = Consumer({"bootstrap.servers": s.bootstrap, "group.id": group, "enable.auto.commit": False})
            c.commit(offsets=[TopicPartition("shared", 0, 0), TopicPartition("secret", 0, 2)], asynchronous=False)
            c.close()
        yield s


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


@dataclass
class Answer:
    status: int
    headers: object
    text: str


class Browser:
    """A cookie jar and urllib: what a browser sends, without following redirects."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar), NoRedirect)

    def open(self, path: str, form: dict | None = None, raw: bytes | None = None) -> Answer:
        data = raw if raw is not None else None if form is None else urllib.parse.urlencode(form).encode()
        try:
            with self.opener.open(urllib.request.Request(self.base + path, data=data), timeout=30) as r:
                return Answer(r.status, r.headers, r.read().decode())
        except urllib.error.HTTPError as e:
            return Answer(e.code, e.headers, e.read().decode(errors="replace"))

    def csrf(self, path: str = "/login") -> str:
        return re.search(r'"X-CSRF-Token": "([^"]+)"', self.open(path).text).group(1)

    def post(self, path: str, form: dict | None = None) -> Answer:
        return self.open(path, {**(form or {}), "csrf": self.csrf("/" if path != "/login" else "/login")})

    def log_in(self, user: str, next_: str = "/") -> Answer:
        token = self.csrf("/login")
        return self.open("/login", {"username": user, "password": USERS[user], "next": next_, "csrf": token})

    @property
    def cookie(self) -> str | None:
        return next((c.value for c in self.jar if c.name == "compactlog_console"), None)


def logged_in(secured, user: str) -> Browser:
    b = Browser(secured.console_url)
    assert b.log_in(user).status == 303
    return b


# redirects ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("target", ["/\\example.invalid/", "/\t/example.invalid/", "/\\/example.invalid",
                                    "//example.invalid", "https://example.invalid/", "/x\r\nSet-Cookie: a=b"])
def test_login_never_redirects_off_site(secured, target):
    """Browsers read '\\' as '/' and drop tabs: /\\host is //host, another site."""
    answer = Browser(secured.console_url).log_in("admin", target)
    assert answer.status == 303 and answer.headers["Location"] == "/"


def test_login_goes_back_to_a_page_of_the_console(secured):
    answer = Browser(secured.console_url).log_in("admin", "/groups?x=1")
    assert answer.status == 303 and answer.headers["Location"] == "/groups?x=1"


# sessions -----------------------------------------------------------------------------------------

def test_login_gets_a_new_session_and_logout_ends_it(secured):
    b = Browser(secured.console_url)
    b.open("/login")
    planted = b.cookie
    answer = b.log_in("admin")
    cookie = answer.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    logged = b.cookie
    assert logged and logged != planted  # fixation: the cookie before the login is worth nothing after
    assert b.open("/").status == 200
    stolen = Browser(secured.console_url)
    stolen.jar.set_cookie(next(c for c in b.jar if c.name == "compactlog_console"))
    assert stolen.open("/").status == 200  # the same cookie is the same login...
    assert b.post("/logout").status == 303
    assert b.cookie != logged
    answer = stolen.open("/")  # ...until the logout: then it is nobody's
    assert answer.status == 303 and answer.headers["Location"].startswith("/login")


def test_login_itself_needs_the_token(secured):
    """Login CSRF: a cross-site form cannot log a browser in as the attacker."""
    b = Browser(secured.console_url)
    answer = b.open("/login", {"username": "admin", "password": USERS["admin"], "next": "/"})
    assert answer.status == 403 and b.open("/").status == 303


def test_a_flood_of_cookie_less_requests_stores_nothing_and_logs_nobody_out():
    from compactlog.console import auth

    sessions = auth.Sessions()
    user = sessions.new("admin")
    for _ in range(auth.MAX_SESSIONS + 100):
        anonymous = sessions.new()
    assert len(sessions) == 1 and sessions.get(user.token).user == "admin"
    again = sessions.get(anonymous.token)  # an anonymous cookie keeps its CSRF token, from the key alone
    assert again.user is None and again.csrf == anonymous.csrf and again.csrf != user.csrf
    assert sessions.get("not a token") is None and sessions.get("x" * 10_000) is None


def test_an_idle_session_expires(monkeypatch):
    from compactlog.console import auth

    sessions = auth.Sessions()
    user = sessions.new("admin")
    later = time.monotonic() + auth.IDLE_SECONDS + 1
    monkeypatch.setattr(auth.time, "monotonic", lambda: later)
    assert sessions.get(user.token).user is None and len(sessions) == 0


def test_cookie_less_floods_over_http_leave_a_login_working(secured):
    b = logged_in(secured, "alice")
    for _ in range(200):
        urllib.request.urlopen(secured.console_url + "/login", timeout=10).read()
    assert b.open("/").status == 200


# hostile input -------------------------------------------------------------------------------------

HOSTILE_GETS = [
    "/topics/shared", "/topics/shared/messages", "/topics/shared/messages?format=json",
    "/topics/shared/messages/key?key=k",
    "/topics/shared/messages?timestamp=99999999999999999999999",
    "/topics/shared/messages?start=timestamp&timestamp=9999-12-31T23:59:59-14:00",
    "/topics/shared/messages?start=timestamp&timestamp=0001-01-01T00:00:00%2B14:00",
    "/topics/shared/messages?timestamp=-99999999999999999999999",
    "/topics/shared/messages?limit=1000000000", "/topics/shared/messages?limit=-1",
    "/topics/shared/messages?partition=-1", "/topics/shared/messages?partition=99999999999999999999",
    "/topics/shared/messages?offset=99999999999999999999999", "/topics/shared/messages?offset=" + "9" * 5000,
    "/topics/shared/messages?format=%3Cx%3E", "/topics/shared/messages/key?key=zz&key_format=hex",
    "/topics/shared/messages/key?key=" + "k" * 7000, "/topics/..%2F..%2Fetc/messages", "/topics/%00",
    f"/groups/{GROUP}?reset=%C2%B2", f"/groups/{GROUP}?reset=" + "9" * 5000,
    f"/groups/{GROUP}/reset?to=offset&offset=" + "9" * 5000,
    f"/groups/{GROUP}/reset?to=datetime&datetime=0001-01-01T00:00:00%2B14:00",
    f"/groups/{GROUP}/reset?to=datetime&datetime=9999-12-31T23:59:59-14:00",
    "/jobs/99999999999999999999999", "/cleaner", "/cleaner/live",
]


def test_hostile_input_gets_a_page_never_a_500(secured):
    admin = logged_in(secured, "admin")
    for path in HOSTILE_GETS:
        answer = admin.open(path)
        assert answer.status < 500 and "Traceback" not in answer.text, (path[:80], answer.status)
    # a record stamped 2^63-1 ms by its producer: shown as a number, the pages still draw
    assert "past year 9999" in admin.open("/topics/shared/messages").text
    assert "past year 9999" in admin.open("/topics/shared").text
    assert admin.open("/?" + "a" * 100_000).status in (400, 414, 431)
    big = admin.post("/topics", {"name": "x" * 100_000})
    assert big.status == 413
    for form in ({"sample_mb": "1e308", "min_mbps": "1"}, {"sample_mb": "nan", "min_mbps": "1"},
                 {"sample_mb": "1", "min_mbps": "inf"}):
        assert admin.post("/topics/shared/compression", form).status == 400
    assert admin.post("/topics/shared/config", {"name": "x\r\nSet-Cookie: a=b", "action": "delete"}).status == 400
    assert admin.open("/").status == 200  # and the console still answers


# markup, static files, CSRF, jobs -----------------------------------------------------------------

def test_group_ids_with_markup_are_text_and_their_links_are_quoted(secured):
    admin = logged_in(secured, "admin")
    for path in ("/", "/groups"):
        text = admin.open(path).text
        assert "<svg onload" not in text and "&#34;&gt;&lt;svg onload=alert(1)&gt;" in text
        assert 'href="/groups/%22%3E%3Csvg%20onload%3Dalert%281%29%3E"' in text
    page = admin.open("/groups/" + urllib.parse.quote(MARKUP_GROUP, safe=""))
    assert page.status == 200 and "<svg onload" not in page.text


@pytest.mark.parametrize("path", ["/static/../app.py", "/static/%2e%2e/app.py", "/static/..%2fapp.py",
                                  "/static/%2e%2e%2fapp.py", "/static/..%5capp.py", "/static/%2e%2e%5capp.py",
                                  "/static/", "/static/../templates/base.html", "/static//etc/passwd"])
def test_static_files_stay_in_their_directory(secured, path):
    import socket

    host, port = urllib.parse.urlsplit(secured.console_url).netloc.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:  # the path exactly as written
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        raw = b""
        while chunk := s.recv(65536):
            raw += chunk
    status = int(raw.split(b" ", 2)[1])
    assert status in (403, 404) and b"class Console" not in raw and b"{% block" not in raw and b"root:" not in raw


def test_every_post_needs_the_token_and_no_get_changes_anything(secured):
    from compactlog.console.app import PAGES

    posts = [(r.path, r.method) for page in PAGES for r in page.routes if r.method not in ("GET", "HEAD")]
    assert posts and all(method == "POST" for _, method in posts)
    admin = logged_in(secured, "admin")
    for path, _ in posts:
        concrete = re.sub(r"\{topic\}", "shared", re.sub(r"\{group\}", GROUP, path))
        for form in ({}, {"csrf": "guess"}):
            answer = admin.open(concrete, form)
            assert answer.status == 403 and "security token" in answer.text, concrete
    assert admin.open("/logout").status == 405  # no GET logs out (an <img src> could)
    assert admin.open("/").status == 200


def test_jobs_need_their_acl_and_belong_to_who_started_them(secured):
    admin, alice = logged_in(secured, "admin"), logged_in(secured, "alice")
    started = admin.post("/cleaner/run")
    assert started.status == 303
    job = started.headers["Location"]
    assert admin.open(job).status == 200
    assert alice.open(job).status == 404 and alice.open(job + "/status").status == 404
    for path, form in (("/cleaner/run", {}), ("/cleaner/compact/shared", {}),
                       ("/topics/shared/compression", {"sample_mb": "1", "min_mbps": "1"})):
        answer = alice.post(path, form)
        assert answer.status == 403 and "User:alice is not authorized" in answer.text, path


# the ACLs behind what pages show --------------------------------------------------------------------

def test_a_group_shows_only_the_topics_the_viewer_may_describe(secured):
    alice, admin = logged_in(secured, "alice"), logged_in(secured, "admin")
    path = "/groups/" + GROUP
    full = admin.open(path).text
    assert "secret" in full and "shared" in full
    page = alice.open(path)
    assert page.status == 200 and "shared" in page.text and "secret" not in page.text
    listed = alice.open("/groups").text
    assert re.search(r'data-col="partitions">1<', listed)  # the committed partitions she may describe
    overview = alice.open("/").text
    assert "secret" not in overview
    assert re.search(r'data-col="lag">1<', overview)  # shared's lag only (secret's is 3)


def test_configs_and_the_data_directory_need_describe_configs(secured):
    alice, admin = logged_in(secured, "alice"), logged_in(secured, "admin")
    overview = alice.open("/").text
    assert ">compact<" not in overview and "Data directory" not in overview
    full = admin.open("/").text
    assert ">compact<" in full and "Data directory" in full
    compression = alice.open("/topics/shared/compression").text
    assert 'data-testid="compression-type"' not in compression
    assert 'data-testid="compression-type"' in admin.open("/topics/shared/compression").text


# creating topics -----------------------------------------------------------------------------------

def test_create_topic_follows_create_topics_acls(secured):
    """CREATE on the cluster, or on the topic's name (here a prefixed ACL), as CreateTopics asks."""
    bob, alice = logged_in(secured, "bob"), logged_in(secured, "alice")
    assert "/topics/new" in bob.open("/").text and bob.open("/topics/new").status == 200
    assert bob.post("/topics", {"name": "bob-topic", "partitions": "1"}).status == 303
    refused = bob.post("/topics", {"name": "other-topic", "partitions": "1"})
    assert refused.status == 403 and "User:bob is not authorized to CREATE topic other-topic" in refused.text
    assert "/topics/new" not in alice.open("/").text and alice.open("/topics/new").status == 403
    assert alice.post("/topics", {"name": "bob-alice", "partitions": "1"}).status == 403
