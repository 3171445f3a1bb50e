"""Consumer group pages in a real browser against a real ``compactlog serve`` and real librdkafka consumers:
lag as the client itself sees it, the overview's total, and resetting offsets as kafka-consumer-groups does."""

from __future__ import annotations

import re
import struct

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from console_support import shot
from groups_support import read
from playwright.sync_api import expect

import compactlog
from compactlog.console.pages.groups import (
    ResetSpec,
    decode_assignment,
    new_offset,
    parse_datetime,
    plan_reset,
)

TOPIC, GROUP, PARTITIONS, PER_PARTITION = "orders", "billing", 3, 10
SESSION_MS = 6000


def consumer(bootstrap: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 300,
                     "max.poll.interval.ms": 300_000, "client.id": "billing-app"})


def setup_topic(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept while its future runs
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for partition in range(PARTITIONS):
        for i in range(PER_PARTITION):
            p.produce(TOPIC, key=f"k{i}".encode(), value=f"order {partition}/{i}".encode(), partition=partition)
    assert p.flush(30) == 0


def client_lags(c: Consumer) -> dict[int, str]:
    """The lag each partition shows on the page, worked out from the client's own view: its committed
    offsets and the high watermarks it is told ('-' where nothing is committed)."""
    tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    out = {}
    for tp in c.committed(tps, timeout=10):
        _, high = c.get_watermark_offsets(TopicPartition(TOPIC, tp.partition), timeout=10, cached=False)
        out[tp.partition] = "-" if tp.offset < 0 else f"{high - tp.offset:,}"
    return out


def test_lag_matches_the_client_and_offsets_reset_as_kafka_does(console_server, page, new_page):
    bootstrap = console_server.bootstrap
    setup_topic(bootstrap)
    c = consumer(bootstrap)
    c.subscribe([TOPIC])
    read(c, 15)
    c.commit(asynchronous=False)
    lags = client_lags(c)
    committed_lags = [int(v.replace(",", "")) for v in lags.values() if v != "-"]
    assert committed_lags and sum(committed_lags) > 0

    # the group page: a Stable group, its member with its partitions, lag per partition as the client sees it
    page.goto(f"/groups/{GROUP}")
    expect(page.get_by_test_id("state")).to_have_text("Stable")
    member = page.locator("#members tbody tr")
    expect(member).to_have_count(1)
    expect(member.locator("[data-col=assignment]")).to_have_text(re.compile(rf"{TOPIC}\s*:\s*0, 1, 2"))
    expect(member).to_contain_text("billing-app")
    expect(member).to_contain_text("/127.0.0.1")
    for partition, lag in lags.items():
        row = page.locator(f"#partitions tr[data-tp='{TOPIC}-{partition}']")
        expect(row.locator("[data-col=lag]")).to_have_text(lag)
        expect(row.locator("[data-col=end]")).to_have_text(str(PER_PARTITION))
        expect(row).to_contain_text("billing-app")
    expect(page.get_by_test_id("total-lag")).to_have_text(f"{sum(committed_lags):,}")
    shot(page, "group")

    # the list and the overview add the same lags up
    page.goto("/groups")
    row = page.locator(f"#groups tr[data-group='{GROUP}']")
    expect(row.locator("[data-col=lag]")).to_have_text(f"{sum(committed_lags):,}")
    expect(row.locator("[data-col=members]")).to_have_text("1")
    expect(row).to_contain_text("consumer / range")
    shot(page, "groups")
    page.goto("/")
    expect(page.locator(f"#groups tr[data-group='{GROUP}'] [data-col=lag]")).to_have_text(f"{sum(committed_lags):,}")

    # a reset while the member is there is refused, with Kafka's words
    page.goto(f"/groups/{GROUP}/reset")
    page.get_by_role("button", name="Dry run").click()
    expect(page.locator("#reset-error")).to_have_text(
        f"Assignments can only be reset if the group '{GROUP}' is inactive, but the current state is Stable.")
    expect(page.locator("#execute")).to_have_count(0)
    shot(page, "group_reset_refused")

    # once the consumer is gone (the open page sees it go: it polls), dry run, then execute
    page.goto(f"/groups/{GROUP}")
    expect(page.get_by_test_id("state")).to_have_text("Stable")
    c.close()
    expect(page.get_by_test_id("state")).to_have_text("Empty")
    expect(page.locator("#no-members")).to_be_visible()
    page.locator("#reset-link").click()
    page.locator("input[name=to][value=earliest]").check()
    page.get_by_role("button", name="Dry run").click()
    plan = page.locator("#plan tbody tr")
    expect(plan).to_have_count(len(committed_lags))
    for i in range(len(committed_lags)):
        expect(plan.nth(i).locator("[data-col=new]")).to_have_text("0")
    shot(page, "group_reset")
    # a second tab plans the same reset, to press Execute after a consumer came back
    late = new_page(console_server.console_url)
    late.goto(page.url)
    expect(late.locator("#execute")).to_be_visible()

    page.locator("#execute").click()
    expect(page.locator("p.ok")).to_contain_text(f"Offsets of {len(committed_lags)} partition")
    for partition, lag in lags.items():
        if lag != "-":
            expect(page.locator(f"#partitions tr[data-tp='{TOPIC}-{partition}'] [data-col=committed]")).to_have_text("0")

    # over the wire: a new member of the group starts from offset 0
    c2 = consumer(bootstrap)
    try:
        committed = c2.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10)
        assert {tp.partition: tp.offset for tp in committed if tp.offset >= 0} == \
            {p: 0 for p, lag in lags.items() if lag != "-"}
        c2.subscribe([TOPIC])
        got = read(c2, PARTITIONS * PER_PARTITION)
        first = {}
        for m in got:
            first.setdefault(m.partition(), m.offset())
        assert first == {p: 0 for p in range(PARTITIONS)}
        # the tab planned while the group was Empty; now it has a member again, and Execute is refused
        late.locator("#execute").click()
        expect(late.locator("#reset-error")).to_have_text(re.compile(
            rf"Assignments can only be reset if the group '{GROUP}' is inactive, but the current state is "
            r"(Stable|PreparingRebalance|CompletingRebalance)\."))
    finally:
        c2.close()


def assignment(version: int, topics: list[tuple[str, list[int]]], user_data: bytes | None = None) -> bytes:
    """A ConsumerProtocolAssignment as Kafka's clients write it."""
    out = struct.pack(">hi", version, len(topics))
    for topic, parts in topics:
        name = topic.encode()
        out += struct.pack(">h", len(name)) + name + struct.pack(f">i{len(parts)}i", len(parts), *parts)
    return out + (struct.pack(">i", -1) if user_data is None else struct.pack(">i", len(user_data)) + user_data)


def test_consumer_assignments_decode_and_anything_else_is_not_one():
    raw = assignment(3, [("orders", [0, 2]), ("prices", [1])], b"sticky")
    assert decode_assignment(raw) == (("orders", 0), ("orders", 2), ("prices", 1))
    assert decode_assignment(assignment(0, [])) == ()
    assert decode_assignment(b"") == ()
    assert decode_assignment(raw[:-3]) is None  # truncated user data
    assert decode_assignment(b"\x00\x00\x7f\xff\xff\xff") is None  # a count far beyond the bytes
    assert decode_assignment(b"\xff\xff\x00\x00\x00\x00") is None  # a negative version
    assert decode_assignment(b"connect-assignment") is None


def test_reset_targets_follow_kafkas_rules():
    assert new_offset("earliest", None, 5, 20, None) == 5
    assert new_offset("latest", None, 5, 20, None) == 20
    assert new_offset("offset", 2, 5, 20, None) == 5
    assert new_offset("offset", 99, 5, 20, None) == 20
    assert new_offset("offset", 7, 5, 20, None) == 7
    assert new_offset("datetime", 0, 5, 20, 12) == 12
    assert new_offset("datetime", 0, 5, 20, None) == 20


def test_a_reset_plan_reads_the_log_start_end_and_timestamps(tmp_path):
    with compactlog.open(tmp_path / "data") as cl:
        cl.create_topic("t", 2)
        for i in range(10):
            cl.produce("t", f"v{i}".encode(), b"k", partition=0, timestamp=1_000 * (i + 1))
        cl.manager.get_log("t", 0).log_start_offset = 2  # as DeleteRecords leaves it
        committed = {("t", 0): 7, ("t", 1): 0}

        def plan(topic, to, value=None):
            return {(p.topic, p.partition): p.new for p in plan_reset(cl, ResetSpec(topic, to, value), committed)}

        assert plan(None, "earliest") == {("t", 0): 2, ("t", 1): 0}
        assert plan("t", "latest") == {("t", 0): 10, ("t", 1): 0}
        assert plan("t", "offset", 1) == {("t", 0): 2, ("t", 1): 0}
        assert plan("t", "datetime", 4_500) == {("t", 0): 4, ("t", 1): 0}
        assert plan("t", "datetime", 99_000) == {("t", 0): 10, ("t", 1): 0}
    assert parse_datetime("1970-01-01T00:00:04.500") == 4_500
    assert parse_datetime("1970-01-01T01:00:04.500+01:00") == 4_500


def test_a_viewer_sees_only_the_groups_it_may_describe_and_cannot_reset(serve_factory, new_page, tmp_path):
    from click.testing import CliRunner
    from confluent_kafka import ConsumerGroupTopicPartitions

    from compactlog.cli import main

    d = tmp_path / "acl-data"
    d.mkdir()

    def cli(*args: str) -> None:
        result = CliRunner().invoke(main, list(args), catch_exceptions=False)
        assert result.exit_code == 0, result.output

    cli("configs", "--data-dir", str(d), "--alter", "--entity-type", "users", "--entity-name", "viewer",
        "--add-config", "SCRAM-SHA-256=[password=viewer-secret]")
    cli("acls", "--data-dir", str(d), "--add", "--allow-principal", "User:viewer", "--operation", "Describe",
        "--group", GROUP, "--topic", TOPIC)
    # the Kafka listener is PLAINTEXT: its clients are User:ANONYMOUS, a super user here
    server = serve_factory(data_dir=d, **{"http.listeners": "http://127.0.0.1:0",
                                          "super.users": "User:ANONYMOUS"})
    setup_topic(server.bootstrap)
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    for group in (GROUP, "hidden"):
        asked = ConsumerGroupTopicPartitions(group, [TopicPartition(TOPIC, 0, 4)])
        admin.alter_consumer_group_offsets([asked])[group].result(30)

    pg = new_page(server.console_url)
    pg.goto("/groups")
    pg.get_by_label("Username").fill("viewer")
    pg.get_by_label("Password").fill("viewer-secret")
    pg.get_by_role("button", name="Log in").click()
    expect(pg.locator(f"#groups tr[data-group='{GROUP}']")).to_be_visible()
    expect(pg.locator("#groups tr[data-group='hidden']")).to_have_count(0)
    pg.goto(f"/groups/{GROUP}")
    expect(pg.locator(f"#partitions tr[data-tp='{TOPIC}-0'] [data-col=lag]")).to_have_text("6")
    expect(pg.locator("#reset-link")).to_have_count(0)  # no READ on the group: no form
    assert pg.goto("/groups/hidden").status == 403
    assert pg.goto(f"/groups/{GROUP}/reset").status == 403
    csrf = pg.evaluate("document.body.getAttribute('hx-headers')")
    token = re.search(r'"X-CSRF-Token": "([^"]+)"', csrf).group(1)
    answer = pg.request.post(f"/groups/{GROUP}/reset", form={"csrf": token, "to": "earliest", "topic": ""})
    assert answer.status == 403 and "not authorized to READ group billing" in answer.text()
