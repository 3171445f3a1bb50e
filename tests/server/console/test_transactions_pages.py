"""Transactions in the console, in chromium against a real ``compactlog serve --http``: the Transactions
page lists the coordinator's transactional ids with their states and every partition's open
transactions, a hanging one flagged; the topic page shows a partition's last stable offset and its open
transactions. The hanging transaction is made as ``tests/cli/test_transactions_wire.py`` makes one: a
transactional batch of a producer id no coordinator handed out, appended through the embedded API
before the server starts, stamped an hour ago. Once ``compactlog transactions abort`` ends it, the flag
and the row are gone and the last stable offset reaches the log end."""

from __future__ import annotations

import time

import pytest
from click.testing import CliRunner
from console_support import module_serve, shot
from playwright.sync_api import expect
import wire

import compactlog
from compactlog.cli import main
from compactlog.records.batch import BatchInfo, build_batch

HUNG_PID = 7001
HOUR_AGO = int(time.time() * 1000) - 3_600_000


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    data = tmp_path_factory.mktemp("txn-pages") / "data"
    with compactlog.open(data) as cl:
        cl.create_topic("hung", partitions=1)
        part = cl.partition("hung", 0)
        part.append(build_batch([b"k"], [b"plain-before"], [HOUR_AGO]))
        info = BatchInfo(producer_id=HUNG_PID, producer_epoch=0, base_sequence=0, is_transactional=True)
        part.append(build_batch([b"k"], [b"hanging"], [HOUR_AGO], info=info))
        part.append(build_batch([b"k"], [b"plain-after"], [HOUR_AGO]))
    with module_serve(data, **{"http.listeners": "http://127.0.0.1:0", "transaction.state.log.num.partitions": "1",
                               "offsets.topic.num.partitions": "1"}) as s:
        live = wire.committed_and_open_transaction(s.bootstrap)
        s.live_producer = live  # open for the whole module
        yield s


def test_transactions_page_lists_ids_and_flags_the_hanging(served, new_page):
    page = new_page(served.console_url)
    page.goto("/")
    page.get_by_role("link", name="Transactions").click()
    expect(page.get_by_role("heading", name="Transactions", exact=True)).to_be_visible()
    ids = page.locator("#transactional-ids")
    expect(ids.locator('tr[data-transactional-id="live"] [data-col="state"]')).to_have_text("Ongoing")
    expect(ids.locator('tr[data-transactional-id="live"] [data-col="partitions"]')).to_have_text("live-0")
    expect(ids.locator('tr[data-transactional-id="done"] [data-col="state"]')).to_have_text("CompleteCommit")
    expect(page.locator("#hanging-alert")).to_contain_text("1 transaction is open longer than")
    hung = page.locator('#open-transactions tr[data-partition="hung-0"]')
    expect(hung).to_have_class("hanging")
    expect(hung.locator('[data-col="first-offset"]')).to_have_text("1")
    expect(hung.locator('[data-col="held-by"]')).to_have_text("hanging")
    expect(hung.locator('[data-col="age"]')).to_contain_text("1 h")
    live = page.locator('#open-transactions tr[data-partition="live-0"]')
    expect(live.locator('[data-col="held-by"]')).to_have_text("live")
    expect(live.locator('[data-col="first-offset"]')).to_have_text("2")  # done's data at 0, its COMMIT at 1
    shot(page, "transactions-page")


def test_topic_page_shows_the_lso_and_open_transactions(served, new_page):
    page = new_page(served.console_url)
    page.goto("/topics/hung")
    expect(page.locator('tbody[data-partition="0"] [data-col="last-stable"]')).to_have_text("1")
    row = page.locator('#open-transactions tr[data-partition="hung-0"]')
    expect(row.locator('[data-col="producer-id"]')).to_have_text(str(HUNG_PID))
    expect(row.locator('[data-col="epoch"]')).to_have_text("0")
    expect(row.locator('[data-col="held-by"] .badge.hanging')).to_be_visible()
    shot(page, "topic-open-transactions")
    page.goto("/topics/live")
    expect(page.locator('#open-transactions tr[data-partition="live-0"] [data-col="held-by"]')).to_have_text("live")
    expect(page.locator('tbody[data-partition="0"] [data-col="last-stable"]')).to_have_text("2")


def test_after_an_abort_nothing_hangs(served, new_page):
    res = CliRunner().invoke(main, ["transactions", "--bootstrap-server", served.bootstrap, "abort", "--topic", "hung",
                                    "--partition", "0", "--start-offset", "1"])
    assert res.exit_code == 0, res.output
    page = new_page(served.console_url)
    page.goto("/transactions")
    expect(page.locator("#no-hanging")).to_be_visible()
    expect(page.locator('#open-transactions tr[data-partition="hung-0"]')).to_have_count(0)
    page.goto("/topics/hung")
    expect(page.locator("#no-open-transactions")).to_be_visible()
    expect(page.locator('tbody[data-partition="0"] [data-col="last-stable"]')).to_have_text("4")  # the marker at 3
