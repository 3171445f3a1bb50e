"""The overview page in a real browser: topics and groups as Kafka clients see them."""

from __future__ import annotations

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from console_support import shot
from playwright.sync_api import expect


def test_overview_lists_topics_made_by_a_kafka_client(console_server, page):
    admin = AdminClient({"bootstrap.servers": console_server.bootstrap})
    futures = admin.create_topics([NewTopic("prices", 3, config={"cleanup.policy": "compact", "compression.type": "zstd"})])
    futures["prices"].result(30)
    p = Producer({"bootstrap.servers": console_server.bootstrap, "linger.ms": 0})
    for i in range(30):
        p.produce("prices", key=f"k{i % 5}".encode(), value=f"v{i}".encode())
    assert p.flush(30) == 0

    page.goto("/")
    row = page.locator("#topics tr[data-topic='prices']")
    expect(row).to_be_visible()
    cells = row.locator("td")
    expect(cells.nth(1)).to_have_text("3")
    expect(row.locator("[data-col=records]")).to_have_text("30")
    expect(cells.nth(4)).to_have_text("compact")
    expect(cells.nth(5)).to_have_text("zstd")
    expect(page.locator("dl.facts")).to_contain_text(f"PLAINTEXT://127.0.0.1:{console_server.port}")
    shot(page, "overview")


def test_pages_carry_a_content_security_policy_and_no_outside_resources(console_server, page):
    requests = []
    page.on("request", lambda r: requests.append(r.url))
    response = page.goto("/")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    page.wait_for_load_state("networkidle")
    assert requests and all(u.startswith(console_server.console_url) for u in requests), requests
