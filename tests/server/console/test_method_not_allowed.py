"""A form's address typed into the browser (GET /topics, where the create form posts) answers the console's
own error page with 405 and the Allow header, not aiohttp's bare "405: Method Not Allowed" text; an unknown
address thousands of characters long is named by its head in the 404 page."""

from __future__ import annotations

import urllib.error
import urllib.request


def test_a_get_of_a_forms_address_is_a_page(console_server):
    try:
        urllib.request.urlopen(console_server.console_url + "/topics", timeout=30)
        raise AssertionError("GET /topics was answered 2xx")
    except urllib.error.HTTPError as exc:
        status, headers, body = exc.code, exc.headers, exc.read().decode()
    assert status == 405 and headers["Allow"] == "POST"
    assert headers["Content-Type"].startswith("text/html")
    assert "/topics takes POST, not GET" in body and "<h1>Method not allowed</h1>" in body


def test_a_long_unknown_address_is_named_by_its_head(console_server):
    """A 5,000-character path was repeated whole in the 404 page; it is shown as every other typed value."""
    path = "/jobs/" + "9" * 5000
    try:
        urllib.request.urlopen(console_server.console_url + path, timeout=30)
        raise AssertionError("answered 2xx")
    except urllib.error.HTTPError as exc:
        status, body = exc.code, exc.read().decode()
    assert status == 404
    assert f"There is no page at {path[:50]}... (5006 characters)." in body and "9" * 60 not in body
