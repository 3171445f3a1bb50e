"""Who may use the console: logins with the broker's SASL users, ACLs behind every page and form, CSRF.

The data directory has SASL users, so the console asks for a login; ``admin`` is a super user and
``alice`` may only DESCRIBE and READ the topic ``shared``. Everything runs against one real ``serve``
process and real chromium.
"""

from __future__ import annotations

import re
import urllib.error
import urllib.request

import pytest
from console_support import SECURED, allow, module_serve, shot, users_data_dir
from playwright.sync_api import expect

USERS = {"admin": "admin-secret", "alice": "alice-secret"}


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    d = users_data_dir(tmp_path_factory, "console-security", USERS)
    allow(d, "User:alice", ("Describe", "Read"), "--topic", "shared")
    with module_serve(d, **SECURED) as s:
        yield s


def log_in(pg, user: str, password: str | None = None, start: str | None = "/login") -> None:
    """Fill the login form, on ``start`` (None: the page the browser is on)."""
    if start is not None:
        pg.goto(start)
    pg.get_by_label("Username").fill(user)
    pg.get_by_label("Password").fill(USERS[user] if password is None else password)
    pg.get_by_role("button", name="Log in").click()


def csrf_token(pg) -> str:
    import json

    return json.loads(pg.locator("body").get_attribute("hx-headers"))["X-CSRF-Token"]


def test_an_unauthenticated_browser_sees_only_the_login(secured, new_page):
    pg = new_page(secured.console_url)
    pg.goto("/")
    expect(pg).to_have_url(re.compile(r"/login\?next=(/|%2F)$"))
    expect(pg.get_by_role("heading", name="Log in")).to_be_visible()
    shot(pg, "login")
    for path in ("/topics/shared", "/groups", "/cleaner", "/jobs/1"):
        pg.goto(path)
        expect(pg.get_by_role("heading", name="Log in")).to_be_visible()
    # a form posted without a session: refused before any handler sees it
    answer = pg.request.post(f"{secured.console_url}/topics", form={"name": "sneaky", "csrf": "x"}, max_redirects=0)
    assert answer.status in (401, 403)
    # a client that is not a browser gets the redirect too, and no data
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.build_opener(NoRedirect).open(f"{secured.console_url}/")
    assert refused.value.code == 303 and refused.value.headers["Location"].startswith("/login")


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def test_a_wrong_password_is_refused_and_the_right_one_logs_in(secured, new_page):
    pg = new_page(secured.console_url)
    log_in(pg, "admin", "not-the-password")
    expect(pg.get_by_role("alert")).to_have_text("Authentication failed: Invalid username or password")
    expect(pg.get_by_role("heading", name="Log in")).to_be_visible()
    shot(pg, "login_failed")
    log_in(pg, "admin")
    expect(pg.get_by_role("heading", name="Overview")).to_be_visible()
    expect(pg.locator(".principal")).to_have_text("User:admin")
    pg.get_by_role("button", name="Log out").click()
    expect(pg.get_by_role("heading", name="Log in")).to_be_visible()
    pg.goto("/")
    expect(pg.get_by_role("heading", name="Log in")).to_be_visible()


def test_login_goes_back_to_the_page_asked_for_but_never_off_site(secured, new_page):
    pg = new_page(secured.console_url)
    log_in(pg, "admin", start="/cleaner")  # the redirect's login form carries next=/cleaner
    expect(pg).to_have_url(f"{secured.console_url}/cleaner")
    pg2 = new_page(secured.console_url)
    log_in(pg2, "admin", start="/login?next=//example.invalid/")
    expect(pg2).to_have_url(f"{secured.console_url}/")


def test_a_post_without_the_session_token_is_refused(secured, new_page):
    pg = new_page(secured.console_url)
    log_in(pg, "admin")
    expect(pg.locator(".principal")).to_have_text("User:admin")
    forged = pg.request.post(f"{secured.console_url}/logout", form={}, max_redirects=0)
    assert forged.status == 403 and "security token" in forged.text()
    wrong = pg.request.post(f"{secured.console_url}/logout", form={"csrf": "guess"}, max_redirects=0)
    assert wrong.status == 403
    pg.reload()
    expect(pg.locator(".principal")).to_have_text("User:admin")  # still logged in: nothing happened
    done = pg.request.post(f"{secured.console_url}/logout", form={"csrf": csrf_token(pg)}, max_redirects=0)
    assert done.status == 303


def test_a_read_only_user_sees_no_forms_and_a_forged_one_is_refused(secured, new_page):
    admin = new_page(secured.console_url)
    log_in(admin, "admin")
    expect(admin.get_by_role("link", name="Create topic")).to_be_visible()
    admin.goto("/topics/new")
    admin.get_by_label("Name", exact=True).fill("shared")
    admin.get_by_role("button", name="Create topic").click()
    expect(admin.get_by_role("heading", name="shared")).to_be_visible()

    pg = new_page(secured.console_url)
    log_in(pg, "alice")
    expect(pg.locator(".principal")).to_have_text("User:alice")
    expect(pg.locator("#topics tr[data-topic='shared']")).to_be_visible()
    expect(pg.get_by_role("link", name="Create topic")).to_have_count(0)
    pg.goto("/topics/shared")
    expect(pg.get_by_role("heading", name="shared")).to_be_visible()
    # the only form a read-only user is shown is the one that logs her out
    expect(pg.locator("main form[method=post]")).to_have_count(0)
    shot(pg, "topic_read_only")
    for path, form in (("/topics", {"name": "alices-own", "partitions": "1"}),
                       ("/topics/shared/config", {"name": "retention.ms", "value": "1"}),
                       ("/topics/shared/delete", {"confirm": "shared"})):
        answer = pg.request.post(secured.console_url + path, form={**form, "csrf": csrf_token(pg)}, max_redirects=0)
        assert answer.status == 403 and "User:alice is not authorized" in answer.text(), (path, answer.status)
    admin.goto("/")
    expect(admin.locator("#topics tr[data-topic='shared']")).to_be_visible()
    expect(admin.locator("#topics tr[data-topic='alices-own']")).to_have_count(0)
