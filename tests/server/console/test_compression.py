"""The compression page in a real browser: the advisor as a job, its table, chart and recommendation, and
the one-click apply seen by a Kafka AdminClient."""

from __future__ import annotations

import json
import random
import re

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from console_support import shot
from playwright.sync_api import expect

import compactlog
from compactlog.records.codecs import Codec
from compactlog.advisor import (
    TRIALS,
    Trial,
    advise_local,
    recommend,
    topic_settings,
)


def produce_json(bootstrap: str, topic: str, n: int = 3000) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 2, config={"compression.type": "producer"})])[topic].result(30)
    rng = random.Random(7)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "compression.type": "lz4"})
    for _ in range(n):
        value = {"sku": f"product-{rng.randrange(500):06d}", "price": rng.randrange(10**4), "currency": "EUR",
                 "warehouse": rng.choice(["north", "south", "east"])}
        p.produce(topic, key=f"p{rng.randrange(500)}".encode(), value=json.dumps(value).encode())
    assert p.flush(30) == 0


def described(bootstrap: str, topic: str) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return {k: v.value for k, v in admin.describe_configs([res])[res].result(30).items()}


def test_advise_then_apply_the_recommendation(console_server, page):
    produce_json(console_server.bootstrap, "orders")
    page.goto("/topics/orders/compression")
    expect(page.get_by_test_id("compression-type")).to_have_text("producer")
    page.fill("input[name=sample_mb]", "0.5")
    page.fill("input[name=min_mbps]", "5")
    page.click("#run-advisor")
    expect(page).to_have_url(re.compile(r"/jobs/\d+$"))
    expect(page.locator("#job progress, #job[data-state=done]").first).to_be_attached()
    expect(page.locator("#job")).to_have_attribute("data-state", "done")
    expect(page.locator("#trials tbody tr")).to_have_count(len(TRIALS))
    expect(page.locator("#trials tr.chosen")).to_have_count(1)
    expect(page.locator("svg.advice circle.marked")).to_have_count(1)
    expect(page.locator("svg.advice circle.dot")).to_have_count(len(TRIALS) - 1)  # uncompressed is the ratio-1 line
    codec = page.locator("#recommendation .config").get_attribute("data-codec")
    assert codec in ("gzip", "zstd", "lz4", "snappy"), codec
    shot(page, "compression_job")

    page.click("#apply-advice")
    expect(page).to_have_url(re.compile(r"/topics/orders/compression\?applied$"))
    expect(page.locator("#applied")).to_be_visible()
    expect(page.get_by_test_id("compression-type")).to_have_text(codec)
    assert described(console_server.bootstrap, "orders")["compression.type"] == codec
    expect(page.locator("#recommendation")).to_be_visible()  # the latest advice stays on the topic's page
    shot(page, "compression")


def test_a_bad_sample_size_is_refused_in_the_page(console_server, page):
    produce_json(console_server.bootstrap, "small", 10)
    page.goto("/topics/small/compression")
    page.locator("input[name=sample_mb]").evaluate("e => e.removeAttribute('min')")
    page.fill("input[name=sample_mb]", "0")
    page.click("#run-advisor")
    expect(page.locator(".error")).to_have_text("The sample size (MB) must be between 0.0656 and 64, got '0'.")


def test_an_empty_topic_gets_no_advice(console_server, page):
    admin = AdminClient({"bootstrap.servers": console_server.bootstrap})
    admin.create_topics([NewTopic("empty", 1)])["empty"].result(30)
    page.goto("/topics/empty/compression")
    page.click("#run-advisor")
    expect(page.locator("#job")).to_have_attribute("data-state", "done")
    expect(page.locator("#no-advice")).to_be_visible()


def test_topic_settings_use_topic_names_and_only_non_default_levels():
    def t(codec, level):
        return Trial(codec, level, 1, 1, 1, 1.0, 1.0)

    assert topic_settings(t(Codec.NONE, None)) == {"compression.type": "uncompressed"}
    assert topic_settings(t(Codec.ZSTD, 3)) == {"compression.type": "zstd"}
    assert topic_settings(t(Codec.ZSTD, 19)) == {"compression.type": "zstd", "compression.zstd.level": "19"}
    assert topic_settings(t(Codec.SNAPPY, None)) == {"compression.type": "snappy"}


def test_the_local_advisor_reports_each_trial_and_recommends_by_the_shared_rule(tmp_path):
    with compactlog.open(tmp_path / "d") as cl:
        cl.create_topic("t", 2, {"segment.bytes": "20000"})
        cl.produce_batch("t", [(b"k%d" % (i % 50), b'{"n": %d, "unit": "EUR"}' % i) for i in range(3000)], compression="lz4")
        seen = []
        advice = advise_local(cl, "t", 1 << 16, 10.0, progress=lambda m, f: seen.append(f))
    assert [(t.codec, t.level) for t in advice.trials] == list(TRIALS)
    assert len({t.records_bytes for t in advice.trials}) == 1
    assert advice.choice is recommend(advice.trials, 10.0)
    assert seen == sorted(seen) and seen[-1] == 1.0 and len(seen) == len(TRIALS) + 2


def test_recompress_rewrites_the_stored_segments_and_keeps_every_record(console_server, page):
    """lz4 batches from the producer, rewritten with gzip from the page: every record is read back the same
    through a Kafka consumer, the closed segments now hold gzip batches, and the page says how much smaller."""
    from confluent_kafka import Consumer, TopicPartition

    admin = AdminClient({"bootstrap.servers": console_server.bootstrap})
    admin.create_topics([NewTopic("history", 1, config={"segment.bytes": "4096"})])["history"].result(30)
    p = Producer({"bootstrap.servers": console_server.bootstrap, "linger.ms": 0, "compression.type": "lz4"})
    for i in range(600):
        p.produce("history", key=f"k{i % 50}".encode(), value=json.dumps({"i": i, "pad": "abc" * 20}).encode())
        if i % 20 == 19:
            assert p.flush(30) == 0
    assert p.flush(30) == 0

    def read_all() -> list[tuple[int, bytes, bytes]]:
        c = Consumer({"bootstrap.servers": console_server.bootstrap, "group.id": "reader", "enable.auto.commit": False})
        c.assign([TopicPartition("history", 0, 0)])
        out = []
        while len(out) < 600:
            m = c.poll(10)
            assert m is not None and m.error() is None
            out.append((m.offset(), m.key(), m.value()))
        c.close()
        return out

    before = read_all()
    page.goto("/topics/history/compression")
    page.locator("select[name=codec]").select_option("gzip")
    page.fill("input[name=level]", "42")
    page.click("#recompress")
    expect(page.get_by_role("alert")).to_contain_text("gzip")  # Kafka's range message, nothing rewritten
    page.locator("select[name=codec]").select_option("gzip")
    page.fill("input[name=level]", "9")
    page.click("#recompress")
    expect(page.locator("#job")).to_have_attribute("data-state", "done")
    expect(page.locator("#recompress-result")).to_contain_text("rewritten with gzip (level 9)")
    shot(page, "compression_recompress_job")
    assert read_all() == before
    assert closed_segment_codecs(console_server.data_dir) == {"gzip"}


def closed_segment_codecs(data_dir) -> set[str]:
    """The codecs of the closed segments' batches, read from the files (the server owns the directory)."""
    from compactlog.storage.snapshot import PartitionSnapshot

    with PartitionSnapshot.open(str(data_dir), "history", 0) as snap:
        n = len(snap.bases)
        return {Codec(b.codec).name.lower() for i in range(n - 1) for _, b in snap.segment(i).batches()}
