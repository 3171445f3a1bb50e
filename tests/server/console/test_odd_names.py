"""The console in chromium with the names and figures that broke it: group ids that a path cannot hold
as they are (``..``, ``.``, ``a/b``, ``%41``, ``?q#h``, a leading ``~``, non-ASCII, 300 characters), a
249-character topic, records below the log start after DeleteRecords, the cleaner's chart before
anything was cleaned, the advisor chart's labels, the favicon.

One real ``compactlog serve`` for the module; its topics are made through the embedded API before it
starts and its groups commit offsets through librdkafka, as Kafka clients would.
"""

from __future__ import annotations

import itertools

import pytest
from confluent_kafka import Consumer, TopicPartition
from console_support import module_serve, shot
from playwright.sync_api import expect

import compactlog

LONG_GROUP = "g" * 150 + "-" + "h" * 149
ODD_GROUPS = ["..", ".", "a/b", "%41", "?q#h", "~tilde", "grüße-组", LONG_GROUP]
LONG_TOPIC = "t" * 120 + "." + "u" * 128  # 249 characters, Kafka's longest
ORDERS, TRIMMED = "orders", "trimmed"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    d = tmp_path_factory.mktemp("odd-names") / "data"
    with compactlog.open(str(d)) as cl:
        cl.create_topic(ORDERS, 3)
        for p in range(3):
            cl.produce_batch(ORDERS, [(b"k%d" % i, b"order") for i in range(4)], partition=p)
        cl.create_topic(LONG_TOPIC, 1)
        cl.produce_batch(LONG_TOPIC, [(b"k", b"v")], partition=0)
        cl.create_topic(TRIMMED, 2)
        cl.produce_batch(TRIMMED, [(None, b"only")], partition=0)  # then deleted: consumers see none
        cl.delete_records(TRIMMED, 0, 1)
        cl.produce_batch(TRIMMED, [(None, b"r%d" % i) for i in range(5)], partition=1)  # one batch...
        cl.delete_records(TRIMMED, 1, 2)  # ...whose first two records are below the new log start
    with module_serve(d, **{"http.listeners": "http://127.0.0.1:0"}) as s:
        for group in ODD_GROUPS:
            c = Consumer({"bootstrap.servers": s.bootstrap, "group.id": group, "enable.auto.commit": False})
            c.commit(offsets=[TopicPartition(ORDERS, 0, 1), TopicPartition(LONG_TOPIC, 0, 0)], asynchronous=False)
            c.close()
        yield s


@pytest.fixture
def page(server, new_page):
    return new_page(server.console_url)


def consumed(bootstrap: str, topic: str, partitions: int) -> int:
    """How many records a Kafka consumer reads from the beginning of every partition."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "counter", "enable.partition.eof": True,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, -2) for p in range(partitions)])  # -2: the beginning
    count, at_end = 0, set()
    try:
        while len(at_end) < partitions:
            m = c.poll(10)
            assert m is not None, "the consumer got nothing for 10 s"
            if m.error():
                assert m.error().code() == -191, m.error()  # _PARTITION_EOF
                at_end.add(m.partition())
            else:
                count += 1
    finally:
        c.close()
    return count


def fits(page) -> None:
    """Nothing wider than the window: no horizontal scrolling."""
    width = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert width[0] <= width[1], f"the page is {width[0]} px wide in a {width[1]} px window"


def test_every_odd_group_id_links_to_its_own_page(server, page):
    page.goto("/groups")
    rows = page.locator("#groups tbody tr")
    expect(rows).to_have_count(len(ODD_GROUPS))
    ids = [rows.nth(i).get_attribute("data-group") for i in range(len(ODD_GROUPS))]
    assert sorted(ids) == sorted(ODD_GROUPS)
    for where in ("/groups", "/"):
        for group in ODD_GROUPS:
            page.goto(where)
            row = page.locator("#groups tbody tr").nth(ids.index(group) if where == "/groups" else
                                                      sorted(ODD_GROUPS).index(group))
            assert row.get_attribute("data-group") == group
            row.locator("a").click()
            expect(page.get_by_test_id("crumb-group")).to_have_text(group)  # the breadcrumb ends in the name
            expect(page.locator("h1 .group-name")).to_have_text(group)
            expect(page.get_by_test_id("state")).to_have_text("Empty")
            expect(page.locator(f"#partitions tr[data-tp='{ORDERS}-0'] [data-col=committed]")).to_have_text("1")
    # the page's own links (its live part, the reset form) keep the name too
    page.goto("/groups")
    page.locator("#groups tbody tr").nth(ids.index("..")).locator("a").click()
    with page.expect_response(lambda r: r.url.endswith("/live")) as live:  # htmx asks every 3 s
        pass
    assert live.value.status == 200 and "Consumer group '..' has no active members." in live.value.text()
    page.locator("#reset-link").click()
    expect(page.locator("h1 .group-name")).to_have_text("..")
    page.locator("input[name=to][value=earliest]").check()
    page.get_by_role("button", name="Dry run").click()
    expect(page.locator("#plan tbody tr")).to_have_count(2)
    page.locator(".crumbs a.name").click()
    expect(page.get_by_test_id("crumb-group")).to_have_text("..")


def test_long_names_wrap_and_tables_stay_in_the_window(server, page):
    for path in ("/", "/groups"):
        page.goto(path)
        fits(page)
        row = page.locator(f"#groups tr[data-group='{LONG_GROUP}']")
        name = row.locator("td.name")
        assert name.get_attribute("title") == LONG_GROUP
        box = name.bounding_box()
        assert box["height"] > 40, "a 300-character id wraps onto several lines"
        for col in ("lag",) if path == "/" else ("lag", "members"):
            cell = row.locator(f"[data-col={col}]").bounding_box()
            assert cell["x"] + cell["width"] <= 1360, (path, col, cell)
        shot(page, f"odd-names{path.replace('/', '-')}")
    page.goto("/groups/" + LONG_GROUP)
    fits(page)
    shot(page, "odd-names-long-group")
    expect(page.get_by_test_id("crumb-group")).to_have_text(LONG_GROUP)
    page.goto("/")
    page.locator(f"#topics tr[data-topic='{LONG_TOPIC}'] a").click()
    expect(page.get_by_test_id("topic-name")).to_have_text(LONG_TOPIC)
    fits(page)


def test_record_counts_are_what_consumers_see(server, page):
    seen = consumed(server.bootstrap, TRIMMED, 2)
    assert seen == 3
    page.goto("/")
    expect(page.locator(f"#topics tr[data-topic='{TRIMMED}'] [data-col=records]")).to_have_text(str(seen))
    expect(page.locator(f"#topics tr[data-topic='{ORDERS}'] [data-col=records]")).to_have_text("12")
    page.goto(f"/topics/{TRIMMED}")
    records = page.locator("#partition-table [data-col=records]")
    expect(records).to_have_text(["0", "3"])


def test_favicon_is_served_and_linked(server, page):
    page.goto("/")
    href = page.locator("link[rel=icon]").get_attribute("href")
    for path in ("/favicon.ico", href):
        answer = page.request.get(path)
        assert answer.status == 200 and answer.headers["content-type"] == "image/vnd.microsoft.icon"
        assert answer.body()[:4] == b"\0\0\1\0"  # an ICO file


def test_bytes_cleaned_chart_says_nothing_was_cleaned(server, page):
    page.goto("/cleaner")
    chart = page.locator("svg.bytes-cleaned")
    expect(chart).to_contain_text("Nothing cleaned yet")
    expect(chart.locator("text.tick")).to_have_count(0)


def test_every_name_has_one_segment_and_each_segment_one_name():
    from urllib.parse import unquote

    from compactlog.console.paths import name, segment

    names = ODD_GROUPS + [LONG_TOPIC, "~", "~~", "~..", "...", "a%2Fb", "%7E", "", " "]
    for n in names:
        seg = segment(n)
        assert seg not in (".", "..") and "/" not in seg and "?" not in seg and "#" not in seg
        assert unquote(seg) == seg or "%" in seg  # what the server decodes before the handler reads it
        assert name(unquote(seg)) == n, (n, seg)
    assert len({segment(n) for n in names}) == len(names)
    assert segment("orders") == "orders" and segment("..") == "~.." and segment("~x") == "~~x"


def test_bytes_cleaned_axis_has_distinct_whole_unit_ticks():
    """One byte cleaned between two looks used to read "0 B, 0 B, 0 B, 1 B, 1 B" (ticks at 0.25 B)."""
    import re

    from compactlog.console.pages.cleaner import Sample, cleaner_charts

    def ticks(cleaned: list[int]) -> list[str]:
        samples = [Sample(1000 * (i + 1), {}, total, total) for i, total in enumerate(itertools.accumulate(cleaned))]
        svg = str(cleaner_charts(samples, lambda t: True)[1])
        return re.findall(r'text-anchor="end" class="tick">([^<]*)<', svg)

    for cleaned in ([0, 1], [0, 1, 0, 1], [0, 3], [0, 7, 2], [0, 999], [0, 1234, 5], [0, 10**9 + 7]):
        labels = ticks(cleaned)
        assert len(labels) >= 2 and len(set(labels)) == len(labels), (cleaned, labels)
        assert all(re.fullmatch(r"[\d,]+ B|[\d,]+\.\d [KMGT]B", t) for t in labels), labels
    assert ticks([0, 1]) == ["0 B", "1 B"]
    assert ticks([0, 0, 0]) == []  # "Nothing cleaned yet" instead of an axis


def test_the_advisor_samples_every_partition_and_counts_in_words():
    """A sample smaller than a window per partition used to read one partition only ("1 batches" for a
    three-partition topic)."""
    from compactlog.advisor import sample_places
    from compactlog.console.render import plural

    places = sample_places([(0, 0, 10), (1, 0, 10), (2, 0, 4), (2, 4, 30)], 64 * 1024)
    assert {p for p, _, _ in places} == {0, 1, 2}
    assert sample_places([], 1 << 20) == []
    assert [plural(n, "batch", "batches") for n in (0, 1, 3, 1234)] == ["0 batches", "1 batch", "3 batches",
                                                                         "1,234 batches"]


def test_advisor_chart_labels_never_overlap(server, page):
    """Trials that land on nearly the same spot (gzip's levels, zstd's) are labelled apart: the label
    boxes chromium draws are measured."""
    from compactlog.advisor import TRIALS, Advice, Trial, recommend
    from compactlog.console.pages.compression import advice_chart
    from compactlog.records.codecs import Codec

    trials = []
    for i, (codec, level) in enumerate(TRIALS):  # ratios and speeds a few per cent apart, per codec
        base = {Codec.GZIP: (3.1, 30.0), Codec.ZSTD: (3.0, 300.0), Codec.LZ4: (2.2, 600.0),
                Codec.SNAPPY: (2.0, 650.0)}.get(codec, (1.0, 2000.0))
        ratio, speed = base[0] + 0.01 * (i % 3), base[1] * (1 + 0.02 * (i % 4))
        trials.append(Trial(codec, level, 3, 1_000_000, int(1_000_000 / ratio), 1 / speed, 0.001))
    advice = Advice(trials, 1_000_000, 10_000_000, recommend(trials, 50.0), 50.0)
    svg = advice_chart("orders", advice)
    page.goto("/")  # the console's origin and stylesheets
    page.set_content(f'<html><head><link rel="stylesheet" href="/static/console.css">'
                     f'<link rel="stylesheet" href="/static/cleaner.css"></head><body>{svg}</body></html>')
    page.wait_for_load_state("networkidle")
    selector = "svg.advice text.point-label, svg.advice circle.dot, svg.advice text.threshold-label"
    boxes = page.evaluate("""s => [...document.querySelectorAll(s)].map(e => { const b = e.getBBox();
        return [e.tagName, e.textContent, b.x, b.y, b.x + b.width, b.y + b.height]; })""", selector)
    labels = [b for b in boxes if b[0] == "text"]
    assert len([b for b in labels if b[1].startswith(("gzip", "zstd"))]) >= 4
    for a, b in itertools.combinations(boxes, 2):
        if a[0] == b[0] == "circle":
            continue  # dots may touch; their labels may not
        overlap = a[2] < b[4] and b[2] < a[4] and a[3] < b[5] and b[3] < a[5]
        assert not overlap, (a, b)
    width, height = page.evaluate("[document.querySelector('svg.advice').width.baseVal.value,"
                                  " document.querySelector('svg.advice').height.baseVal.value]")
    assert all(0 <= b[2] and b[4] <= width and 0 <= b[3] and b[5] <= height for b in labels)
    shot(page, "advice-chart-labels")
