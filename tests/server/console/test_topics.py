"""Topic pages in a real browser: what the forms do is what Kafka clients and ``compactlog configs`` see."""

from __future__ import annotations

import re
import subprocess
import sys
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from console_support import shot
from playwright.sync_api import expect

WAIT_S = 20  # how long the cleaner may take to clean a freshly written compacted topic


def admin(server) -> AdminClient:
    return AdminClient({"bootstrap.servers": server.bootstrap})


def create(server, topic: NewTopic) -> None:
    client = admin(server)
    client.create_topics([topic])[topic.topic].result(30)


def partition_count(server, topic: str) -> int | None:
    md = admin(server).list_topics(timeout=10)
    t = md.topics.get(topic)
    return None if t is None or t.error is not None else len(t.partitions)


def wire_configs(server, topic: str) -> dict[str, str]:
    client = admin(server)  # kept alive until the answer is in
    fs = client.describe_configs([ConfigResource("topic", topic)])
    return {name: entry.value for name, entry in next(iter(fs.values())).result(10).items()}


def described(server, topic: str) -> str:
    """``compactlog configs --describe`` against the running broker, as a user would type it."""
    out = subprocess.run([sys.executable, "-m", "compactlog", "configs", "--bootstrap-server", server.bootstrap,
                          "--describe", "--topic", topic], capture_output=True, text=True, timeout=30, check=True)
    return out.stdout


def produce_keyed(server, topic: str, n: int, keys: int, start: int = 0) -> None:
    p = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    for i in range(start, start + n):
        p.produce(topic, key=f"key-{i % keys}".encode(), value=f"value {i} ".encode() * 3, partition=0)
    assert p.flush(30) == 0


def reload_until(pg, url: str, selector: str, timeout: float = WAIT_S) -> None:
    """Load ``url`` again until ``selector`` is on it (the cleaner works in its own time)."""
    deadline = time.monotonic() + timeout
    while True:
        pg.goto(url)
        if pg.locator(selector).count():
            return
        assert time.monotonic() < deadline, f"{selector} never appeared on {url}"
        pg.wait_for_timeout(300)


def test_create_topic_in_the_form_and_see_it_through_a_client(console_server, page):
    page.goto("/")
    page.get_by_role("link", name="Create topic").click()
    expect(page).to_have_url(re.compile(r"/topics/new$"))
    form = page.locator("#create-topic")

    form.locator("input[name=name]").fill("bad name!")
    form.locator("input[name=partitions]").fill("2")
    form.get_by_role("button", name="Create topic").click()
    expect(page.locator("#create-error")).to_have_text(
        "Topic name \"bad name!\" is illegal, it contains a character other than ASCII alphanumerics, "
        "'.', '_' and '-'")

    form.locator("input[name=name]").fill("orders")
    form.locator("textarea[name=configs]").fill("cleanup.policy=compact\nno.such.config=1")
    with page.expect_response(lambda r: r.request.method == "POST") as answer:
        form.get_by_role("button", name="Create topic").click()
    assert answer.value.status == 400
    expect(page.locator("#create-error")).to_have_text("Unknown topic config name: no.such.config")
    assert partition_count(console_server, "orders") is None  # nothing created

    form.locator("input[name=partitions]").fill("3")
    form.locator("textarea[name=configs]").fill("cleanup.policy=compact\n\nmin.cleanable.dirty.ratio=0.2\n"
                                                "segment.bytes=4096")
    shot(page, "topic_new")
    form.get_by_role("button", name="Create topic").click()
    expect(page).to_have_url(re.compile(r"/topics/orders$"))
    expect(page.get_by_test_id("partition-count")).to_have_text("3")

    assert partition_count(console_server, "orders") == 3
    configs = wire_configs(console_server, "orders")
    assert (configs["cleanup.policy"], configs["min.cleanable.dirty.ratio"], configs["segment.bytes"]) == \
        ("compact", "0.2", "4096")
    row = page.locator("#configs-table tr[data-config='cleanup.policy']")
    expect(row.locator("[data-col=value]")).to_have_text("compact")
    expect(row.locator("[data-col=default]")).to_have_text("delete")
    expect(row.locator("[data-col=source]")).to_have_text("DYNAMIC_TOPIC_CONFIG")

    page.goto("/topics/new")
    page.locator("#create-topic input[name=name]").fill("orders")
    page.locator("#create-topic").get_by_role("button", name="Create topic").click()
    expect(page.locator("#create-error")).to_have_text("Topic 'orders' already exists.")


def test_config_form_and_segment_strip(console_server, page):
    s = console_server
    create(s, NewTopic("prices", 1, config={
        "cleanup.policy": "compact", "segment.bytes": "1024", "min.cleanable.dirty.ratio": "0.01"}))
    produce_keyed(s, "prices", 300, keys=12)
    reload_until(page, "/topics/prices", "rect[data-kind=clean]")  # the cleaner ran

    # the update form: a good value, through the same call as configs --alter
    form = page.locator("#update-config")
    form.locator("select[name=name]").select_option("min.cleanable.dirty.ratio")
    form.locator("input[name=value]").fill("0.99")
    form.get_by_role("button", name="Set").click()
    expect(page.locator("#config-ok")).to_have_text("min.cleanable.dirty.ratio is now 0.99 (DYNAMIC_TOPIC_CONFIG).")
    expect(page.locator("#configs-table tr[data-config='min.cleanable.dirty.ratio'] [data-col=value]")).to_have_text("0.99")
    assert re.search(r"^\s*min\.cleanable\.dirty\.ratio=0\.99 ", described(s, "prices"), re.MULTILINE)

    # a bad value: Kafka's message in the page, nothing changed over the wire
    for name, value, message in [
        ("min.cleanable.dirty.ratio", "2",
         "Invalid value 2.0 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"),
        ("cleanup.policy", "bogus",
         "Invalid value bogus for configuration cleanup.policy: String must be one of: compact, delete"),
    ]:
        form.locator("select[name=name]").select_option(name)
        form.locator("input[name=value]").fill(value)
        with page.expect_response(lambda r: r.request.method == "POST") as answer:
            form.get_by_role("button", name="Set").click()
        assert answer.value.status == 400
        expect(page.locator("#config-error")).to_have_text(message)
        expect(form.locator("input[name=value]")).to_have_value(value)  # what was typed stays to be fixed
    shot(page, "topic_config_error")
    configs = wire_configs(s, "prices")
    assert (configs["min.cleanable.dirty.ratio"], configs["cleanup.policy"]) == ("0.99", "compact")

    # a dirty head over the clean tail, drawn block by block
    produce_keyed(s, "prices", 60, keys=12, start=300)
    page.goto("/topics/prices")
    strip = page.locator("tbody[data-partition='0'] svg.segments")
    kinds = [strip.locator("rect").nth(i).get_attribute("data-kind") for i in range(strip.locator("rect").count())]
    assert kinds[-1] == "active" and "clean" in kinds and "dirty" in kinds, kinds
    assert kinds.index("dirty") > max(i for i, k in enumerate(kinds) if k == "clean")
    bases = [int(strip.locator("rect").nth(i).get_attribute("data-base")) for i in range(len(kinds))]
    assert bases == sorted(bases) and bases[0] == 0
    title = strip.locator("rect").first.locator("title").text_content()
    assert re.search(r"offsets 0\.\.\d+", title) and "codec" in title and "records" in title
    end = page.locator("tbody[data-partition='0'] [data-col=log-end]")
    expect(end).to_have_text("360")
    expect(page.locator("tbody[data-partition='0'] [data-col=first-dirty]")).not_to_have_text("-")
    for link in ("messages", "compression"):
        expect(page.locator(f"#link-{link}")).to_have_attribute("href", f"/topics/prices/{link}")
    shot(page, "topic")

    # removing the override: back to the default, as --delete-config does
    form = page.locator("#update-config")
    form.locator("select[name=name]").select_option("min.cleanable.dirty.ratio")
    form.get_by_role("button", name="Remove override").click()
    expect(page.locator("#config-ok")).to_have_text("min.cleanable.dirty.ratio is now 0.5 (DEFAULT_CONFIG).")
    assert "min.cleanable.dirty.ratio" not in described(s, "prices")


def test_add_partitions_then_delete_with_confirmation(console_server, page):
    s = console_server
    create(s, NewTopic("events", 1))
    page.goto("/topics/events")
    form = page.locator("#add-partitions")
    form.locator("input[name=count]").fill("4")
    form.get_by_role("button", name="Add partitions").click()
    expect(page.locator("#partitions-ok")).to_have_text("The topic has 4 partitions now.")
    expect(page.locator("#partition-table tbody")).to_have_count(4)
    assert partition_count(s, "events") == 4

    page.locator("#add-partitions input[name=count]").evaluate("e => e.removeAttribute('min')")
    page.locator("#add-partitions input[name=count]").fill("2")
    page.locator("#add-partitions").get_by_role("button", name="Add partitions").click()
    expect(page.locator("#partitions-error")).to_have_text(
        "Topic 'events' has 4 partitions; partitions can only be added, so the new count must be more than 4, not 2.")
    assert partition_count(s, "events") == 4

    page.locator("#delete-topic").click()
    expect(page).to_have_url(re.compile(r"/topics/events/delete$"))
    confirm = page.locator("#delete-topic-form")
    confirm.locator("input[name=confirm]").fill("event")
    confirm.get_by_role("button", name="Delete topic").click()
    expect(page.locator("#delete-error")).to_have_text("Type the topic's name, events, to delete it.")
    assert partition_count(s, "events") == 4
    shot(page, "topic_delete")

    confirm.locator("input[name=confirm]").fill("events")
    confirm.get_by_role("button", name="Delete topic").click()
    expect(page).to_have_url(re.compile(r"/$"))
    expect(page.locator("#topics tr[data-topic='events']")).to_have_count(0)
    assert partition_count(s, "events") is None
    response = page.goto("/topics/events")
    assert response.status == 404


def compactlog(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "compactlog", *args], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr


def test_a_reader_sees_no_forms_and_a_forged_post_is_refused(tmp_path, serve_factory, new_page):
    d = tmp_path / "acl-data"
    d.mkdir()
    compactlog("configs", "--data-dir", str(d), "--alter", "--entity-type", "users", "--entity-name", "reader",
               "--add-config", "SCRAM-SHA-256=[password=reader-secret]")
    compactlog("topics", "--data-dir", str(d), "--create", "--topic", "readonly", "--partitions", "1")
    compactlog("acls", "--data-dir", str(d), "--add", "--allow-principal", "User:reader", "--operation", "Read",
               "--topic", "readonly")
    s = serve_factory(d, **{"http.listeners": "http://127.0.0.1:0", "super.users": "User:admin"})
    pg = new_page(s.console_url)
    pg.goto("/topics/readonly")
    pg.locator("input[name=username]").fill("reader")
    pg.locator("input[name=password]").fill("reader-secret")
    pg.get_by_role("button", name=re.compile("log in", re.IGNORECASE)).click()
    expect(pg).to_have_url(re.compile(r"/topics/readonly$"))
    expect(pg.get_by_test_id("partition-count")).to_have_text("1")
    for form in ("#update-config", "#add-partitions", "#delete-topic", "#configs-table"):
        expect(pg.locator(form)).to_have_count(0)

    token = re.search(r'"X-CSRF-Token": "([^"]+)"', pg.locator("body").get_attribute("hx-headers")).group(1)
    forged = pg.request.post("/topics/readonly/config",
                             form={"csrf": token, "name": "retention.ms", "value": "1", "action": "set"})
    assert forged.status == 403 and "not authorized to ALTER_CONFIGS topic readonly" in forged.text()
    assert pg.request.post("/topics", form={"csrf": token, "name": "other"}).status == 403
    assert pg.request.post("/topics/readonly/delete", form={"csrf": token, "confirm": "readonly"}).status == 403
    assert pg.goto("/topics/new").status == 403
    assert pg.goto("/topics/readonly/delete").status == 403
