"""Take the web console's screenshots for docs/console.md: ``python docs/screenshots.py [--out docs/images]``.

Starts ``compactlog serve --http`` on a new data directory on 127.0.0.1, fills it the way a user would
(three topics through librdkafka, a consumer group that stays, one that left, the cleaner and a
Pulsar-style compaction run from the console's buttons, the advisor, a committed and an open transaction,
and a hanging one written before the server starts), and saves one picture per page with headless
chromium (Debian's, as the tests use). Run it again after a page changes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from playwright.sync_api import expect, sync_playwright

FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-sync",
         "--disable-background-networking", "--disable-component-update", "--disable-dev-shm-usage"]


def start(data: Path) -> tuple[subprocess.Popen, str, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "compactlog", "serve", "--data-dir", str(data), "--http", "127.0.0.1:0",
         "--override", "listeners=PLAINTEXT://127.0.0.1:0", "--override", "group.initial.rebalance.delay.ms=0",
         "--override", "log.cleaner.backoff.ms=3600000"],  # the console's button runs the cleaner, for the picture
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    bootstrap = console = None
    while bootstrap is None or console is None:
        line = proc.stdout.readline().decode()
        if not line:
            raise SystemExit(f"compactlog serve exited with {proc.wait()}")
        if m := re.search(r"listening on \w+://(\S+)", line):
            bootstrap = m.group(1)
        if m := re.search(r"web console at (\S+?)/?$", line.strip()):
            console = m.group(1)
    return proc, bootstrap, console


def prices(bootstrap: str, first: int, n: int) -> Producer:
    """Price updates of 60 products, flushed every 30 so the batches (and segments) stay small."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(first, first + n):
        sku = f"p{i % 60}"
        p.produce("latest-product-price", key=sku.encode(),
                  value=json.dumps({"sku": sku, "price": round(9.99 + (i % 17) * 0.5, 2), "currency": "EUR"}).encode(),
                  headers=[("source", b"pricing-service")])
        if i % 30 == 29:
            assert p.flush(30) == 0
    assert p.flush(30) == 0
    return p


def hanging(data: Path) -> None:
    """Topic ``payments`` with a transaction left open an hour ago by a producer no coordinator knows: the
    Transactions page flags it hanging."""
    import time

    import compactlog
    from compactlog.records.batch import BatchInfo, build_batch

    ts = int(time.time() * 1000) - 3_600_000
    with compactlog.open(data) as cl:
        cl.create_topic("payments", partitions=1)
        part = cl.partition("payments", 0)
        part.append(build_batch([b"pay-1"], [b'{"amount": 12}'], [ts]))
        info = BatchInfo(producer_id=4711, producer_epoch=0, base_sequence=0, is_transactional=True)
        part.append(build_batch([b"pay-2"], [b'{"amount": 40}'], [ts], info=info))


def transactions(bootstrap: str) -> Producer:
    """A committed transaction of ``checkout-1`` and an open one of ``checkout-2`` (returned: kept open)."""
    done = Producer({"bootstrap.servers": bootstrap, "transactional.id": "checkout-1"})
    done.init_transactions(30)
    done.begin_transaction()
    done.produce("orders", key=b"order-tx-1", value=b'{"order": "tx-1"}', partition=0)
    done.commit_transaction(30)
    open_ = Producer({"bootstrap.servers": bootstrap, "transactional.id": "checkout-2",
                      "transaction.timeout.ms": 600_000})
    open_.init_transactions(30)
    open_.begin_transaction()
    open_.produce("orders", key=b"order-tx-2", value=b'{"order": "tx-2"}', partition=1)
    assert open_.flush(30) == 0
    return open_


def fill(bootstrap: str) -> threading.Event:
    """Topics, records and groups; returns the event that stops the consumer left running."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [
        NewTopic("latest-product-price", 3, config={"cleanup.policy": "compact", "segment.bytes": "2048",
                                                    "min.cleanable.dirty.ratio": "0.1", "compression.type": "zstd"}),
        NewTopic("orders", 2, config={"compression.type": "lz4", "retention.ms": "604800000"}),
        NewTopic("user-profiles", 1, config={"cleanup.policy": "compact,delete", "segment.bytes": "16384"}),
    ]
    for f in admin.create_topics(topics).values():
        f.result(30)
    p = prices(bootstrap, 0, 3000)
    for i in range(2000):
        p.produce("orders", key=f"order-{i}".encode(),
                  value=json.dumps({"order": i, "customer": f"c{i % 97}", "total": i % 300}).encode())
    for i in range(400):
        p.produce("user-profiles", key=f"user-{i % 40}".encode(), value=f"profile v{i // 40} of user-{i % 40}".encode())
    p.produce("latest-product-price", key=b"p7", value=None)  # a tombstone
    assert p.flush(60) == 0

    def consume(group: str, n: int, close: bool) -> Consumer:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                      "enable.auto.commit": False, "client.id": f"{group}-app"})
        c.subscribe(["orders"])
        got = 0
        while got < n:
            m = c.poll(1)
            if m is not None and m.error() is None:
                got += 1
        c.commit(asynchronous=False)
        if close:
            c.close()
        return c

    consume("audit", 700, close=True)
    billing = consume("billing", 1200, close=False)
    stop = threading.Event()

    def keep_alive() -> None:
        while not stop.is_set():
            billing.poll(0.2)
        billing.close()

    stop.thread = threading.Thread(target=keep_alive, daemon=True)
    stop.thread.start()
    return stop


def shoot(console: str, bootstrap: str, out: Path) -> None:
    chromium = os.environ.get("COMPACTLOG_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=FLAGS)
        ctx = browser.new_context(base_url=console, viewport={"width": 1360, "height": 860})
        ctx.set_default_timeout(60_000)
        pg = ctx.new_page()

        def save(name: str) -> None:
            pg.screenshot(path=str(out / f"console-{name}.png"), full_page=True)
            print("saved", out / f"console-{name}.png")

        pg.goto("/cleaner")
        pg.click("#run-cleaner")
        expect(pg.locator("#job")).to_have_attribute("data-state", "done")
        save("cleaner-job")
        pg.goto("/cleaner")
        pg.locator("button.compact[data-topic='latest-product-price']").click()
        expect(pg.locator("#job")).to_have_attribute("data-state", "done")
        prices(bootstrap, 3000, 900)  # a dirty head above the cleaned tail, for the strip
        pg.goto("/")
        save("overview")
        pg.goto("/topics/latest-product-price")
        save("topic")
        pg.locator("select[name=name]").select_option("min.cleanable.dirty.ratio")
        pg.locator("input[name=value]").fill("1.5")
        pg.get_by_role("button", name="Set", exact=True).click()
        expect(pg.locator(".error").first).to_be_visible()
        save("topic-config-error")
        pg.goto("/topics/new")
        pg.get_by_label("Name", exact=True).fill("shipments")
        pg.locator("input[name=partitions]").fill("6")
        pg.locator("textarea[name=configs]").fill("cleanup.policy=compact\nmin.compaction.lag.ms=60000")
        save("topic-new")
        pg.goto("/topics/latest-product-price/messages?partition=0&offset=0&limit=20&format=text")
        save("messages")
        pg.goto("/topics/orders/messages?partition=1&offset=990&limit=8&format=json")
        save("messages-json")
        pg.goto("/topics/latest-product-price/messages/key?key=p12&key_format=text&format=json")
        save("messages-key")
        pg.goto("/groups")
        save("groups")
        pg.goto("/groups/billing")
        save("group")
        pg.goto("/groups/audit/reset?topic=&to=earliest")
        save("group-reset")
        pg.goto("/transactions")
        save("transactions")
        pg.goto("/topics/latest-product-price/compression")
        pg.locator("input[name=sample_mb]").fill("1")
        pg.click("#run-advisor")
        expect(pg.locator("#job")).to_have_attribute("data-state", "done")
        pg.goto("/topics/latest-product-price/compression")
        save("compression")
        pg.goto("/cleaner")
        save("cleaner")
        browser.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(Path(__file__).parent / "images"))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        hanging(Path(tmp) / "data")
        proc, bootstrap, console = start(Path(tmp) / "data")
        try:
            stop = fill(bootstrap)
            stop.open_transaction = transactions(bootstrap)
            shoot(console, bootstrap, out)
            stop.set()
            stop.thread.join(30)
        finally:
            proc.terminate()
            proc.wait(60)


if __name__ == "__main__":
    main()
