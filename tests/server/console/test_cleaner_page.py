"""The cleaner page in a real browser: duplicates produced by a Kafka client, the cleaner run from the
page, Kafka's stats of the round, the dirty ratio falling, Pulsar-style compaction, the charts."""

from __future__ import annotations

import re

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from console_support import shot
from markupsafe import Markup
from playwright.sync_api import expect

from compactlog.console import charts
from compactlog.console.pages.cleaner import (
    Sample,
    bytes_cleaned_series,
    dirty_ratio_series,
)

SMALL_SEGMENTS = {"cleanup.policy": "compact", "segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.01",
                  "segment.ms": "100", "compression.type": "uncompressed"}


def produce_duplicates(bootstrap: str, topic: str, keys: int = 5, rounds: int = 60) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, config=SMALL_SEGMENTS)])[topic].result(30)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "compression.type": "none"})
    for i in range(rounds * keys):
        p.produce(topic, key=f"key-{i % keys}".encode(), value=f"value {i} of a key that changes often".encode())
        if i % 20 == 19:
            p.flush(30)
    assert p.flush(30) == 0


def segment_counts(row) -> tuple[int, int, int]:
    clean, dirty, total = (int(x) for x in re.findall(r"\d+", row.locator("[data-col=segments]").inner_text()))
    return clean, dirty, total


def test_run_the_cleaner_and_compaction_from_the_page(serve_factory, new_page):
    # the threads look once at start and then sleep: the page's button does the cleaning
    server = serve_factory(**{"http.listeners": "http://127.0.0.1:0", "log.cleaner.backoff.ms": "600000"})
    produce_duplicates(server.bootstrap, "prices")
    page = new_page(server.console_url)

    page.goto("/cleaner")
    expect(page.locator("#threads tr[data-thread='kafka-log-cleaner-thread-0']")).to_have_attribute("data-state", "idle")
    row = page.locator("#partitions tr[data-topic='prices'][data-partition='0']")
    expect(row).to_be_visible()
    ratio_before = float(row.locator("[data-col=dirty-ratio]").inner_text().rstrip("%"))
    clean_before, dirty_before, _ = segment_counts(row)
    assert ratio_before > 50 and dirty_before >= 5 and clean_before == 0, (ratio_before, dirty_before, clean_before)
    expect(page.locator("#runs tr[data-topic='prices']")).to_have_count(0)
    expect(page.locator("#compaction tr[data-topic='prices']")).to_have_attribute("data-status", "NOT_RUN")

    strip_before = None
    if page.goto("/topics/prices").ok and page.locator("svg.segments").count():  # the topic page, once it exists
        strip_before = page.locator("svg.segments rect[data-kind=dirty]").count()
        assert strip_before > 0
    page.goto("/cleaner")

    # the sampler's look at the dirty topic and the page's own make the chart's first line
    expect(page.locator("svg.dirty-ratio polyline")).to_have_count(1, timeout=20_000)
    page.click("#run-cleaner")
    expect(page).to_have_url(re.compile(r"/jobs/\d+$"))
    expect(page.locator("#job")).to_have_attribute("data-state", "done")
    report = page.locator("#report-runs tr[data-topic='prices']")
    expect(report).to_have_count(1)
    assert int(report.get_attribute("data-read")) > int(report.get_attribute("data-written")) > 0
    shot(page, "cleaner_job")

    page.goto("/cleaner")
    run = page.locator("#runs tr[data-topic='prices']").first
    expect(run).to_be_visible()
    assert int(run.get_attribute("data-read")) > int(run.get_attribute("data-written"))
    expect(run.locator("[data-col=reduction]")).not_to_have_text("0.0%")
    row = page.locator("#partitions tr[data-topic='prices'][data-partition='0']")
    ratio_after = float(row.locator("[data-col=dirty-ratio]").inner_text().rstrip("%"))
    clean_after, dirty_after, _ = segment_counts(row)
    assert ratio_after < ratio_before and clean_after > 0 and dirty_after < dirty_before, (ratio_after, clean_after)
    if strip_before is not None:
        page.goto("/topics/prices")
        expect(page.locator("svg.segments rect[data-kind=clean]")).not_to_have_count(0)
        page.goto("/cleaner")

    # the charts: the live part refreshes itself, and a line needs two looks
    line = page.locator("svg.dirty-ratio polyline").first
    expect(line).to_be_attached(timeout=20_000)
    assert len(line.get_attribute("points").split()) >= 2
    expect(page.locator("svg.bytes-cleaned polyline")).to_have_count(2, timeout=20_000)
    shot(page, "cleaner")

    page.locator("#compaction button.compact[data-topic='prices']").click()
    expect(page).to_have_url(re.compile(r"/jobs/\d+$"))
    expect(page.locator("#job")).to_have_attribute("data-state", "done")
    done = page.locator("#compaction-outcome tr[data-partition='0']")
    expect(done).to_have_attribute("data-status", "SUCCESS")
    expect(done.locator("[data-col=horizon]")).to_have_text(re.compile(r"^[\d,]+$"))
    shot(page, "compaction_job")
    page.goto("/cleaner")
    status = page.locator("#compaction tr[data-topic='prices']")
    expect(status).to_have_attribute("data-status", "SUCCESS")
    expect(status.locator("[data-col=horizon]")).to_have_text("300")


def test_an_unknown_topic_cannot_be_compacted(console_server, page):
    page.goto("/cleaner")
    response = page.request.post("/cleaner/compact/nope", form={"csrf": page.locator("input[name=csrf]").first.input_value()})
    assert response.status == 404 and "does not exist" in response.text()


def test_charts_escape_labels_and_draw_points():
    svg = charts.line_chart([charts.Series("<b>x</b>", [(0, 1), (10, 2)])], title="a & b")
    assert isinstance(svg, Markup) and "<b>" not in svg and "&lt;b&gt;x&lt;/b&gt;" in svg and "a &amp; b" in svg
    assert re.search(r'<polyline [^>]*points="[\d.]+,[\d.]+ [\d.]+,[\d.]+"', svg)
    assert "No samples yet" in charts.line_chart([], title="t")
    dots = charts.scatter_chart([charts.Point(10, 2, "<i>", "g", True), charts.Point(100, 3, "b", "g")],
                                title="s", log_x=True, vline=(50, "min"))
    assert "<i>" not in dots and dots.count('class="marked"') == 1
    assert charts.nice_ticks(0, 100) == [0, 20, 40, 60, 80, 100]
    assert charts.log_ticks(3, 300) == [5, 10, 20, 50, 100, 200]


def test_series_from_samples():
    samples = [Sample(1000, {"a": 0.5, "b": 0.1}, 0, 0), Sample(6000, {"a": 0.2}, 1000, 400)]
    lines = dirty_ratio_series(samples, lambda t: t != "b")
    assert [(s.label, list(s.points)) for s in lines] == [("a", [(1.0, 50.0), (6.0, 20.0)])]
    read, written = bytes_cleaned_series(samples)
    assert list(read.points) == [(6.0, 1000.0)] and list(written.points) == [(6.0, 400.0)]
