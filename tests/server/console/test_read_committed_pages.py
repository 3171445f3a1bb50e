"""The console with transactions: the message browser's isolation selector, and the last stable offset
beside the high watermark on the topic page, in a real browser.

The data directory is built through the embedded API (``txn_support``: committed, aborted and open
transactions interleaved), then served; the open transaction is committed over the wire in the last test.
"""

from __future__ import annotations

import re

import pytest
import txn_support as tx  # (tests/, on the path with its conftest)
import wire
from playwright.sync_api import expect

from compactlog.console.pages.messages import BrowseQuery, parse_browse


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    d = tmp_path_factory.mktemp("rc-console") / "data"
    return d, tx.build(d)


@pytest.fixture(scope="module")
def server(built):
    with wire.serving(built[0], {"listeners": "PLAINTEXT://127.0.0.1:0", "group.initial.rebalance.delay.ms": "0",
                                 "http.listeners": "http://127.0.0.1:0"}) as s:
        yield s


def values_shown(page) -> list[bytes]:
    return [v.encode() for v in page.locator("#messages td[data-col=value] pre").all_inner_texts()]


def test_the_isolation_field_is_read_and_a_wrong_one_is_named():
    q, errors, _ = parse_browse({"isolation": "read_committed"})
    assert (q.isolation, errors) == ("read_committed", [])
    assert parse_browse({})[0].isolation == BrowseQuery().isolation == "read_uncommitted"
    q, errors, _ = parse_browse({"isolation": "<b>dirty</b>"})
    assert q.isolation == "read_uncommitted"
    assert errors == ["Unknown isolation level '<b>dirty</b>': choose read_uncommitted or read_committed."]


def test_browse_by_isolation_level_and_the_lso_on_the_pages(server, built, new_page):
    _, b = built
    page = new_page(server.console_url)
    page.goto(f"/topics/{tx.TOPIC}/messages?partition=0&offset=0&limit=100")
    expect(page.locator("select[name=isolation]")).to_have_value("read_uncommitted")
    expect(page.locator("#messages tbody tr")).to_have_count(len(tx.ALL))
    assert values_shown(page) == tx.ALL  # aborted and open transactions' records too, never a marker
    expect(page.locator("#last-stable")).to_have_text(str(b.lso))

    page.select_option("select[name=isolation]", "read_committed")
    page.click("#browse-form button[type=submit]")
    expect(page).to_have_url(re.compile(r"isolation=read_committed"))
    expect(page.locator("#messages tbody tr")).to_have_count(len(tx.COMMITTED_BEFORE))
    assert values_shown(page) == tx.COMMITTED_BEFORE
    expect(page.locator("#at-lso")).to_be_visible()
    expect(page.locator("select[name=isolation]")).to_have_value("read_committed")

    # from the LSO on, nothing committed yet: said so, naming the LSO
    page.goto(f"/topics/{tx.TOPIC}/messages?partition=0&offset={b.lso}&isolation=read_committed")
    expect(page.locator("#no-records")).to_contain_text(f"last stable offset, {b.lso}")

    page.goto(f"/topics/{tx.TOPIC}")
    row = page.locator("#partition-table tbody[data-partition='0']")
    expect(row.locator("[data-col=last-stable]")).to_have_text(str(b.lso))
    expect(row.locator("[data-col=log-end]")).to_have_text(str(b.end))

    r = page.goto(f"/topics/{tx.TOPIC}/messages?partition=0&isolation=dirty")
    assert r.status == 400
    expect(page.locator(".error")).to_contain_text("Unknown isolation level")


def test_after_the_commit_read_committed_browsing_reads_on(server, built, new_page):
    _, b = built
    mod = wire.module_of("write_txn_markers", 1, "request")
    req = mod.WriteTxnMarkersRequest(markers=(mod.WritableTxnMarker(
        producer_id=tx.O, producer_epoch=tx.EPOCH, transaction_result=True, coordinator_epoch=tx.COORDINATOR_EPOCH,
        topics=(mod.WritableTxnMarkerTopic(name=tx.TOPIC, partition_indexes=(0,)),)),))
    with wire.RawClient.to(server, timeout=30) as c:
        c.call(req)
    page = new_page(server.console_url)
    page.goto(f"/topics/{tx.TOPIC}/messages?partition=0&offset=0&limit=100&isolation=read_committed")
    expect(page.locator("#messages tbody tr")).to_have_count(len(tx.COMMITTED_AFTER))
    assert values_shown(page) == tx.COMMITTED_AFTER
    expect(page.locator("#last-stable")).to_have_text(str(b.end + 1))
    page.goto(f"/topics/{tx.TOPIC}")
    expect(page.locator("#partition-table tbody[data-partition='0'] [data-col=last-stable]")).to_have_text(str(b.end + 1))


def test_the_page_links_keep_the_isolation_level(server, built, new_page):
    page = new_page(server.console_url)
    page.goto(f"/topics/{tx.TOPIC}/messages?partition=0&offset=0&limit=2&isolation=read_committed")
    expect(page.locator("#next-page")).to_have_attribute("href", re.compile(r"isolation=read_committed"))
    page.click("#next-page")
    expect(page.locator("#messages tbody tr")).to_have_count(2)
    assert values_shown(page) == tx.COMMITTED_AFTER[2:4]
