"""The Messages pages in a real browser: records a Kafka client produced, browsed and looked up by key."""

from __future__ import annotations

import json
import re
import time
import zlib
from pathlib import Path

import numpy as np
import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from console_support import shot
from playwright.sync_api import expect

import compactlog
from compactlog.console.formats import (
    as_hex,
    as_json,
    as_text,
    parse_key,
    parse_timestamp,
)
from compactlog.key_lookup import COMPACTED, LIVE, find_latest, rows_with_key
from compactlog.console.pages.messages import MAX_LIMIT, parse_browse
from compactlog.records import kernels

T0 = 1_700_000_000_000  # the first record's timestamp; record i is T0 + i seconds
SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(2)>"
BINARY = b"\x89PNG\r\n\x1a\n\x00\xff\xfe"
# (key, value, headers) of partition 0 of topic 'events', offsets 0.. in order
RECORDS = [
    (b"user-1", json.dumps({"name": "Ada", "tags": ["x", "y"], "n": 1}).encode(), [("source", b"web")]),
    (b"user-2", BINARY, []),
    (b"user-1", SCRIPT.encode(), [("trace", b"abc-123"), ("raw", b"\xff\x00")]),
    (b"user-3", IMG.encode(), []),
    (b"user-2", None, []),  # a tombstone
    (None, b"no key here", []),
    (b"user-1", b"not json {", []),
    (b"big", b"x" * 10_000, []),
]


def produce(bootstrap: str, topic: str, records, partition: int | None = None, first_ts: int | None = None) -> None:
    """Records in order, acknowledged; keyed records go where Java's default partitioner puts them."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "partitioner": "murmur2_random"})
    for i, (key, value, headers) in enumerate(records):
        extra = {} if partition is None else {"partition": partition}
        if first_ts is not None:
            extra["timestamp"] = first_ts + i * 1000
        p.produce(topic, key=key, value=value, headers=headers or None, **extra)
        p.flush(30)  # one at a time: offsets follow the list
    assert p.flush(30) == 0


def create(bootstrap: str, topic: str, partitions: int = 1, config: dict | None = None) -> AdminClient:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, config=config or {})])[topic].result(30)
    return admin


def value_cell(page, offset: int):
    return page.locator(f"#messages tr[data-offset='{offset}'] td[data-col=value]")


def offsets_shown(page) -> list[int]:
    return [int(x) for x in page.locator("#messages td[data-col=offset]").all_inner_texts()]


# the pure rules ---------------------------------------------------------------------------------------

def test_formats_bound_what_they_show():
    shown = as_text(b"ok \xff!\r\n\t\x00\x1a")
    assert shown.text == "ok \ufffd!\r\n\t\x00\x1a"
    assert shown.pieces == [("ok \ufffd!", False), ("\\r", True), ("\n\t", False), ("\\0", True), ("\\x1a", True)]
    cut = as_text("é".encode() * 3, limit=5)  # the third character is cut: left out, not mangled
    assert (cut.text, cut.size, cut.truncated) == ("éé", 6, True)
    assert as_json(b'{"a":[1,2]}').text == '{\n  "a": [\n    1,\n    2\n  ]\n}'
    bad = as_json(b"{nope")
    assert bad.text == "{nope" and bad.note.startswith("not JSON")
    assert as_hex(b"AB\x00").text == "00000000  " + f"{'41 42 00':<23}" + "  " + " " * 23 + "  |AB.|"
    assert as_hex(bytes(100), limit=32).truncated
    assert parse_timestamp("1700000000000") == T0
    assert parse_timestamp("2023-11-14T22:13:20Z") == T0 == parse_timestamp("2023-11-14T22:13:20")
    with pytest.raises(ValueError, match="neither milliseconds"):
        parse_timestamp("yesterday")
    assert parse_key("6b 65 79", "hex") == b"key"


def test_browse_query_rules():
    q, errors, notes = parse_browse({"partition": "2", "timestamp": "1700000000000", "limit": "9999"})
    assert (q.partition, q.start, q.timestamp, q.limit, errors) == (2, "timestamp", T0, MAX_LIMIT, [])
    assert notes == [f"A page shows at most {MAX_LIMIT} records."]
    _, errors, _ = parse_browse({"offset": "3", "timestamp": "1"})
    assert errors == ["Give an offset or a timestamp to start from, not both."]
    q, errors, _ = parse_browse({"start": "timestamp", "offset": "3", "timestamp": "1"})  # the form's radio
    assert (q.start, q.offset, q.timestamp, errors) == ("timestamp", None, 1, [])
    assert parse_browse({"offset": "x", "format": "xml"})[1] == [
        "The offset must be a whole number, got 'x'.", "Unknown format 'xml': choose one of text, json, hex."]


def test_keys_are_matched_by_columns():
    keys = [b"k1", None, b"k10", b"k1", b"", b"j1"]
    data = kernels.encode_records(keys, [b"v"] * len(keys), [0] * len(keys), 0, None, None)
    cols = np.empty((len(keys), kernels.NCOLS), dtype=np.int64)
    kernels.scan_records(data, len(keys), cols)
    assert rows_with_key(data, cols, b"k1").tolist() == [0, 3]
    assert rows_with_key(data, cols, b"").tolist() == [4]
    assert rows_with_key(data, cols, b"k2").tolist() == []


def test_lookup_reads_the_tail_then_the_compacted_copy_within_its_bound(tmp_path):
    with compactlog.open(tmp_path / "data") as cl:
        cl.create_topic("t", 1)
        cl.produce("t", b"old", key=b"needle")
        for i in range(40):  # 40 batches of 500 other keys after it
            cl.produce_batch("t", [(f"k{j}".encode(), b"v" * 100) for j in range(500)], partition=0)
        found = find_latest(cl, "t", b"needle")
        assert (found.record.offset, found.record.value, found.source, found.state) == (0, b"old", LIVE, None)
        bounded = find_latest(cl, "t", b"needle", scan_bytes=200_000)  # a fraction of the log
        assert bounded.record is None and not bounded.complete and bounded.searched_from > 0
        assert bounded.scanned_bytes <= 200_000

        cl.compact_topic("t")
        cl.produce("t", None, key=b"k7")  # a tombstone after the horizon
        found = find_latest(cl, "t", b"needle")
        assert (found.record.value, found.source, found.state.horizon) == (b"old", COMPACTED, 20_001)
        assert found.scanned_bytes < found.state.bytes_after + 1000  # the side log and the tail, not the 2 MB log
        assert find_latest(cl, "t", b"k7").deleted
        missing = find_latest(cl, "t", b"nobody")
        assert missing.record is None and missing.complete


def keys_placed_apart(partitions: int, n: int = 1) -> list[bytes]:
    """Keys that Kafka's default partitioner (murmur2) and librdkafka's (CRC-32) put in different partitions."""
    keys = (f"sku-{i}".encode() for i in range(10_000))
    return [k for k in keys if kernels.partition_for_keys([k], partitions)[0] != zlib.crc32(k) % partitions][:n]


def test_lookup_searches_every_partition_murmur2_first_then_crc32(tmp_path):
    """A key is looked for where Java's producer puts it, then where librdkafka's default puts it, then
    anywhere: a key kcat produced is no longer reported missing."""
    crc_key, elsewhere = keys_placed_apart(4, 2)
    with compactlog.open(tmp_path / "data") as cl:
        cl.create_topic("t", 4)
        cl.produce("t", b"by kcat", key=crc_key, partition=zlib.crc32(crc_key) % 4)
        odd = next(p for p in range(4) if p not in (cl.partition_for("t", elsewhere), zlib.crc32(elsewhere) % 4))
        cl.produce("t", b"by hand", key=elsewhere, partition=odd)
        cl.produce("t", b"by java", key=b"plain")
        found = find_latest(cl, "t", crc_key)
        assert (found.partition, found.record.value, found.partitions_searched) == (zlib.crc32(crc_key) % 4, b"by kcat", 2)
        found = find_latest(cl, "t", elsewhere)
        assert (found.partition, found.record.value) == (odd, b"by hand") and found.partitions_searched > 2
        found = find_latest(cl, "t", b"plain")
        assert (found.partition, found.partitions_searched) == (cl.partition_for("t", b"plain"), 1)
        missing = find_latest(cl, "t", b"nobody")
        assert missing.record is None and missing.complete and missing.partitions_searched == 4


@pytest.mark.parametrize("strategy, winner", [
    ("offset", b"e"),  # Kafka's rule: the last record
    ("timestamp", b"d"),  # the highest timestamp, 5000, held by b and d: the later offset wins
    ("header:version", b"b"),  # the highest version header; a record without it ranks below every one with it
])
def test_lookup_follows_the_topics_compaction_strategy(tmp_path, strategy, winner):
    """The record the lookup calls latest is the one the topic's compaction.strategy keeps, before
    cleaning and after it (the cleaner keeps exactly that record of the key)."""
    records = [(b"a", 2000, 1), (b"b", 5000, 9), (b"c", 1000, 3), (b"d", 5000, 7), (b"e", 4000, None)]
    with compactlog.open(tmp_path / "data") as cl:
        cl.create_topic("t", 1, {"compaction.strategy": strategy, "cleanup.policy": "compact", "segment.bytes": "200",
                                 "min.cleanable.dirty.ratio": "0.01"})
        for value, ts, version in records:
            headers = None if version is None else [("version", str(version).encode())]
            cl.produce("t", value, key=b"k", timestamp=ts, headers=headers)
            cl.produce("t", b"filler", key=b"other", timestamp=ts)
        found = find_latest(cl, "t", b"k")
        assert (found.record.value, found.strategy, found.complete) == (winner, strategy, True)
        cl.clean("t")
        kept = [r.value for r in cl.consume("t", from_beginning=True) if r.key == b"k"]
        assert winner in kept and len(kept) < len(records)  # cleaned: the winner and the active segment's stay
        assert find_latest(cl, "t", b"k").record.value == winner


# browsing ---------------------------------------------------------------------------------------------

def test_browse_shows_records_as_text_json_and_hex_and_runs_no_markup(console_server, page):
    create(console_server.bootstrap, "events", 2)
    produce(console_server.bootstrap, "events", RECORDS, partition=0, first_ts=T0)
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))

    page.goto("/topics/events/messages?partition=0&offset=0")
    expect(page.locator("#messages tbody tr")).to_have_count(len(RECORDS))
    assert offsets_shown(page) == list(range(len(RECORDS)))
    keys = page.locator("#messages td[data-col=key]")
    expect(keys.nth(0)).to_have_text("user-1")
    expect(keys.nth(5)).to_have_text("null")
    expect(value_cell(page, 0)).to_have_text(RECORDS[0][1].decode())
    expect(value_cell(page, 2)).to_have_text(SCRIPT)  # the literal text, not an element
    expect(value_cell(page, 3)).to_have_text(IMG)
    expect(value_cell(page, 4).locator(".badge.null")).to_be_visible()
    expect(value_cell(page, 4).locator(".badge.tombstone")).to_be_visible()
    expect(value_cell(page, 1).locator("pre")).to_have_text("\ufffdPNG\\r\n\\x1a\n\\0\ufffd\ufffd")
    expect(value_cell(page, 1).locator(".ctl")).to_have_count(3)  # the escapes, set apart from text
    expect(value_cell(page, 7)).to_contain_text("the whole value is 10,000 bytes")
    assert len(value_cell(page, 7).locator("pre").inner_text()) == 4096
    headers = page.locator("#messages tr[data-offset='2'] td[data-col=headers]")
    expect(headers).to_contain_text("trace")
    expect(headers).to_contain_text("abc-123")
    expect(headers).to_contain_text("raw")
    expect(page.locator("#messages tr[data-offset='0'] td[data-col=timestamp]")).to_contain_text(
        "2023-11-14 22:13:20.000 UTC")
    expect(page.locator("#messages tr[data-offset='0'] td[data-col=timestamp]")).to_contain_text("CreateTime")
    assert page.locator("main script, main img").count() == 0
    shot(page, "messages")

    page.select_option("select[name=format]", "json")
    page.click("#browse-form button[type=submit]")
    expect(page).to_have_url(re.compile(r"format=json"))
    expect(value_cell(page, 0).locator("pre")).to_have_text(
        json.dumps({"name": "Ada", "tags": ["x", "y"], "n": 1}, indent=2))
    expect(value_cell(page, 6)).to_contain_text("not JSON (Expecting value at line 1 column 1): shown as text")
    expect(value_cell(page, 2)).to_contain_text(SCRIPT)
    shot(page, "messages_json")

    page.goto("/topics/events/messages?partition=0&offset=0&format=hex")
    expect(value_cell(page, 1)).to_contain_text("00000000  89 50 4e 47 0d 0a 1a 0a  00 ff fe")
    expect(page.locator("#messages tr[data-offset='2'] td[data-col=headers]")).to_contain_text("ff 00")

    # from a timestamp (ISO, as the form takes it), a page of three, then the next page
    page.goto("/topics/events/messages")
    page.check("input[name=start][value=timestamp]")
    page.fill("input[name=timestamp]", "2023-11-14T22:13:23Z")  # T0 + 3 s: offset 3
    page.fill("input[name=limit]", "3")
    page.click("#browse-form button[type=submit]")
    expect(page.locator("#messages tbody tr")).to_have_count(3)
    assert offsets_shown(page) == [3, 4, 5]
    page.click("#next-page")
    expect(page.locator("#messages tbody tr")).to_have_count(2)
    assert offsets_shown(page) == [6, 7]
    expect(page.locator(".pager")).to_contain_text("The end of the log.")
    page.goto(f"/topics/events/messages?partition=0&timestamp={T0 + 6000}")
    assert offsets_shown(page)[0] == 6
    page.goto(f"/topics/events/messages?partition=0&timestamp={T0 + 60_000}")
    expect(page.locator("#no-records")).to_contain_text("has a timestamp at or after")

    page.goto("/topics/events/messages?partition=0&offset=999")
    expect(page.locator("#read-error")).to_have_text("offset 999 is out of range for events-0 (0..8)")
    page.goto("/topics/events/messages?partition=5")
    expect(page.locator("#read-error")).to_have_text("Partition 5 of topic 'events' does not exist (the topic has 2).")
    response = page.goto("/topics/nope/messages")
    assert response.status == 404
    expect(page.locator("p.error")).to_have_text("Topic 'nope' does not exist.")
    assert dialogs == []


# key lookup -------------------------------------------------------------------------------------------

def wait_for_horizon(data_dir: Path, topic: str, partition: int, horizon: int, timeout: float = 20) -> None:
    """Until the background compaction has published a view up to ``horizon`` (its state file says so)."""
    state = data_dir / f"{topic}-{partition}" / "compaction-state"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if state.exists() and json.loads(state.read_text())["horizon"] >= horizon:
            return
        time.sleep(0.05)
    raise AssertionError(f"no compaction of {topic}-{partition} up to {horizon} within {timeout} s")


def look_up(page, topic: str, key: str, fmt: str = "text") -> None:
    page.goto(f"/topics/{topic}/messages/key")
    page.fill("input[name=key]", key)
    page.select_option("select[name=format]", fmt)
    page.click("#key-form button[type=submit]")


def test_key_lookup_on_the_live_log(console_server, page):
    create(console_server.bootstrap, "prices", 3)
    updates = [(b"p3", json.dumps({"price": v}).encode(), [("rev", str(v).encode())]) for v in (10, 11, 12, 13)]
    produce(console_server.bootstrap, "prices", [*updates, (b"p5", b"7", []), (b"p5", None, [])])

    look_up(page, "prices", "p3", "json")
    expect(page.locator("#outcome")).to_contain_text("Latest value, at offset 3")
    expect(value_cell(page, 3).locator("pre")).to_have_text('{\n  "price": 13\n}')
    expect(page.locator("#messages td[data-col=headers]")).to_contain_text("13")
    expect(page.locator("#no-compaction")).to_contain_text("the live log was read")
    shot(page, "messages_key")

    look_up(page, "prices", "p5")
    expect(page.locator("#outcome")).to_contain_text("Deleted: the key's latest record, at offset")
    look_up(page, "prices", "nobody")
    expect(page.locator("#outcome")).to_have_text("Not found: no record has this key.")
    page.goto("/topics/prices/messages/key?key=70+33&key_format=hex")  # p3 as hex digits
    expect(page.locator("#outcome")).to_contain_text("Latest value, at offset 3")
    page.goto("/topics/prices/messages/key?key=zz&key_format=hex")
    expect(page.locator("p.error")).to_contain_text("is not hex")


def test_key_lookup_through_the_compacted_view(serve_factory, new_page):
    """A key compacted into the side log is still found once DeleteRecords removed it from the live log;
    a key updated after the horizon comes from the live tail."""
    server = serve_factory(**{"http.listeners": "http://127.0.0.1:0", "log.compaction.monitor.interval.ms": "100"})
    admin = create(server.bootstrap, "orders", 1, {"compaction.threshold.bytes": "1"})
    produce(server.bootstrap, "orders", [(b"o1", b"placed", []), (b"o2", b"placed", []), (b"o1", b"paid", [])])
    wait_for_horizon(server.data_dir, "orders", 0, 3)
    off = ConfigResource("topic", "orders", incremental_configs=[
        ConfigEntry("compaction.threshold.bytes", "0", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([off])[off].result(30)  # no more runs: the next record stays in the tail
    produce(server.bootstrap, "orders", [(b"o1", b"shipped", [])])  # offset 3: after the horizon
    admin.delete_records([TopicPartition("orders", 0, 3)])[TopicPartition("orders", 0, 3)].result(30)

    page = new_page(server.console_url)
    look_up(page, "orders", "o2")
    expect(page.locator("#outcome")).to_contain_text("Latest value, at offset 1")
    expect(page.locator("[data-testid=source]")).to_have_text("compacted view")
    expect(page.locator("[data-testid=view]")).to_contain_text("compacted copy below offset 3")
    expect(value_cell(page, 1)).to_have_text("placed")
    expect(page.locator("#lookup")).to_contain_text("removed this offset from the live log (it starts at 3)")
    shot(page, "messages_key_compacted")
    look_up(page, "orders", "o1")
    expect(page.locator("#outcome")).to_contain_text("Latest value, at offset 3")
    expect(page.locator("[data-testid=source]")).to_have_text("live log")
    expect(value_cell(page, 3)).to_have_text("shipped")
    # the live log itself no longer has offset 1
    page.goto("/topics/orders/messages?partition=0&offset=1")
    expect(page.locator("#read-error")).to_contain_text("out of range")


def test_key_lookup_finds_keys_of_either_default_partitioner_by_the_topics_strategy(serve_factory, new_page):
    """Keys produced by librdkafka's default partitioner (CRC-32, as kcat produces) and by murmur2, on
    four-partition topics compacted by offset and by timestamp: each key's three records arrive newest
    timestamp first, then one more after the compaction's horizon. By offset the last record is latest;
    by timestamp the compacted copy's record still outranks the later one in the live tail."""
    server = serve_factory(**{"http.listeners": "http://127.0.0.1:0", "log.compaction.monitor.interval.ms": "100"})
    [key] = keys_placed_apart(4)
    crc_partition, murmur_partition = zlib.crc32(key) % 4, kernels.partition_for_keys([key], 4)[0]
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    ts = {b"newest": T0 + 3000, b"middle": T0 + 2000, b"oldest": T0 + 1000, b"after": T0 + 2500}
    page = new_page(server.console_url)
    for strategy in ("offset", "timestamp"):
        for partitioner in ("consistent_random", "murmur2_random"):
            topic = f"by-{strategy}-{partitioner.split('_')[0]}"
            admin.create_topics([NewTopic(topic, 4, config={"compaction.strategy": strategy,
                                                            "compaction.threshold.bytes": "1"})])[topic].result(30)
            conf = {"bootstrap.servers": server.bootstrap, "linger.ms": 0}
            if partitioner == "murmur2_random":
                conf["partitioner"] = partitioner  # else librdkafka's default, consistent_random
            producer = Producer(conf)
            partition = crc_partition if partitioner == "consistent_random" else murmur_partition
            for value in (b"newest", b"middle", b"oldest"):
                producer.produce(topic, key=key, value=value, timestamp=ts[value])
                producer.flush(30)
            wait_for_horizon(server.data_dir, topic, partition, 3)
            off = ConfigResource("topic", topic, incremental_configs=[
                ConfigEntry("compaction.threshold.bytes", "0", incremental_operation=AlterConfigOpType.SET)])
            admin.incremental_alter_configs([off])[off].result(30)  # no more runs: the next record stays in the tail
            producer.produce(topic, key=key, value=b"after", timestamp=ts[b"after"])
            assert producer.flush(30) == 0

            look_up(page, topic, key.decode())
            expect(page.locator("[data-testid=partition]")).to_contain_text(str(partition))
            expect(page.locator("[data-testid=strategy]")).to_have_text(strategy)
            if strategy == "offset":
                expect(page.locator("#outcome")).to_contain_text("Latest value, at offset 3")
                expect(page.locator("[data-testid=source]")).to_have_text("live log")
                expect(value_cell(page, 3)).to_have_text("after")
            else:
                expect(page.locator("#outcome")).to_contain_text("Latest value, at offset 0")
                expect(page.locator("[data-testid=source]")).to_have_text("compacted view")
                expect(value_cell(page, 0)).to_have_text("newest")


def test_reading_messages_needs_read_on_the_topic(tmp_path, new_page):
    """``bob`` may DESCRIBE the topic but not READ it: both pages refuse him, with who and what."""
    from click.testing import CliRunner
    from console_support import module_serve

    from compactlog.cli import main

    d = tmp_path / "data"
    d.mkdir()
    for args in (["configs", "--data-dir", str(d), "--alter", "--entity-type", "users", "--entity-name", "bob",
                  "--add-config", "SCRAM-SHA-256=[password=bob-secret]"],
                 ["topics", "--data-dir", str(d), "--create", "--topic", "secret", "--partitions", "1"],
                 ["acls", "--data-dir", str(d), "--add", "--allow-principal", "User:bob", "--operation", "Describe",
                  "--topic", "secret"]):
        result = CliRunner().invoke(main, args, catch_exceptions=False)
        assert result.exit_code == 0, result.output
    with module_serve(d, **{"http.listeners": "http://127.0.0.1:0"}) as s:
        page = new_page(s.console_url)
        page.goto("/login?next=/topics/secret/messages")
        page.get_by_label("Username").fill("bob")
        page.get_by_label("Password").fill("bob-secret")
        page.get_by_role("button", name="Log in").click()
        expect(page.locator("p.error")).to_have_text("User:bob is not authorized to READ topic secret")
        response = page.goto("/topics/secret/messages/key?key=k")
        assert response.status == 403
