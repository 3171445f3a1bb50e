"""A real ``compactlog serve --http`` process on 127.0.0.1 and Debian's chromium, headless, driven by Playwright.

The browser is the one the README's test command installs (``apt-get install chromium``); Playwright's
own browser download is never used. Each test gets a fresh browser context (no cookies). ``shot``
saves a screenshot of the page under ``test-artifacts/console/`` for people to look at; a failing
test leaves one too.
"""

from __future__ import annotations

import os
import shutil

import pytest
from console_support import shot

TIMEOUT_MS = 20_000  # what a step may wait for the page (auto-waiting; never a fixed sleep)
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-sync",
                  "--disable-background-networking", "--disable-component-update", "--disable-dev-shm-usage"]


def chromium_path() -> str:
    found = os.environ.get("COMPACTLOG_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.fail("chromium is not installed: the README's test command installs it (apt-get install -y chromium)")
    return found


@pytest.fixture(scope="module")
def browser():
    """One chromium per test module. Not per session: Playwright's sync API keeps an event loop running
    in the main thread while it is open, and later modules' ``asyncio.run`` (aiokafka) would refuse to run."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium_path(), headless=True, args=CHROMIUM_FLAGS)
        yield b
        b.close()


@pytest.fixture
def console_server(serve_factory):
    """A broker with its console on a free loopback port; the cleaner looks often, so tests wait little."""
    return serve_factory(**{"http.listeners": "http://127.0.0.1:0", "log.cleaner.backoff.ms": "200"})


@pytest.fixture
def new_page(browser, request):
    """``new_page(base_url)``: a page in a fresh context (its own cookies)."""
    contexts = []

    def make(base_url: str):
        ctx = browser.new_context(base_url=base_url, viewport={"width": 1360, "height": 900})
        ctx.set_default_timeout(TIMEOUT_MS)
        contexts.append(ctx)
        return ctx.new_page()

    yield make
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    for i, ctx in enumerate(contexts):
        if failed:
            for j, pg in enumerate(ctx.pages):
                shot(pg, f"FAILED-{request.node.name}-{i}-{j}")
        ctx.close()


@pytest.fixture
def page(console_server, new_page):
    """A page on the console of ``console_server``."""
    return new_page(console_server.console_url)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    rep = yield
    if rep.when == "call":
        item.rep_call = rep
    return rep
