"""The compression advisor: every codec measured on a real sample, a rule-based choice, a chart."""

from __future__ import annotations

import json
import random

import pytest

import compactlog
from compactlog.records.codecs import Codec
from compactlog.advisor import TRIALS, Trial, recommend, sample_places
from compactlog.spark.advise import advise, write_chart


def trial(codec, level, stored, seconds) -> Trial:
    return Trial(codec, level, 10, 10_000_000, stored, seconds, 0.01)


def test_the_smallest_codec_fast_enough_wins_and_ties_go_to_the_faster():
    trials = [trial(Codec.NONE, None, 10_000_000, 0.001), trial(Codec.ZSTD, 19, 1_000_000, 10.0),
              trial(Codec.ZSTD, 3, 1_500_000, 0.1), trial(Codec.GZIP, 6, 1_500_000, 0.15), trial(Codec.LZ4, 9, 3_000_000, 0.02)]
    assert recommend(trials, 50).name == "zstd 3"  # zstd 19 is smaller but compresses at 1 MB/s
    assert recommend(trials, 0).name == "zstd 19"
    assert recommend(trials, 10**9).name == "none"  # nothing is fast enough: the fastest


def test_sample_places_spread_over_segments_by_size():
    segs = [(0, 0, 100), (0, 100, 200), (1, 0, 200)]
    places = sample_places(segs, 4 << 20)
    assert places == [(0, 0, 50), (0, 100, 150), (1, 0, 50), (1, 0, 150)]
    assert sample_places([], 1 << 20) == []


@pytest.fixture(scope="module")
def topic(tmp_path_factory):
    root = tmp_path_factory.mktemp("advise") / "d"
    rng = random.Random(3)
    with compactlog.open(root) as cl:
        cl.create_topic("prices", 2, {"segment.bytes": "200000"})
        cl.create_topic("empty", 1)
        rows = [(b"p%d" % rng.randrange(3000), json.dumps({"sku": "product-%06d" % rng.randrange(3000), "price": rng.randrange(10**4),
                                                             "currency": "EUR", "warehouse": rng.choice(["north", "south"])}).encode())
                for _ in range(20000)]
        cl.produce_batch("prices", rows, compression="lz4")
    return root


def test_advice_on_a_real_topic_measures_every_codec_and_touches_nothing(spark, topic, tmp_path):
    before = {p: p.read_bytes() for p in topic.rglob("*.log")}
    with compactlog.open(topic) as cl:
        advice = advise(spark, cl, "prices", sample_bytes=1 << 20, progress=lambda _m: None)
    assert [(t.codec, t.level) for t in advice.trials] == list(TRIALS)
    assert len({t.records_bytes for t in advice.trials}) == 1, "every trial saw the same sample"
    by = {t.name: t for t in advice.trials}
    assert by["zstd 3"].stored_bytes < by["none"].stored_bytes / 2 and by["gzip 6"].ratio > 2
    assert advice.choice is recommend(advice.trials, 50.0)
    assert advice.current_sample_bytes < by["none"].stored_bytes  # it is stored lz4-compressed now
    assert advice.choice.codec is not Codec.LZ4 and advice.saving_fraction > 0.1  # lz4 now; a denser codec is fast enough
    assert advice.projected_saving_bytes == int(advice.topic_bytes * advice.saving_fraction)
    assert {p: p.read_bytes() for p in topic.rglob("*.log")} == before
    chart = tmp_path / "advice.png"
    write_chart(advice, str(chart), "prices")
    data = chart.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_an_empty_topic_gets_no_advice(spark, topic):
    with compactlog.open(topic) as cl:
        assert advise(spark, cl, "empty", progress=lambda _m: None) is None


def test_cli_names_an_unknown_topic(topic):
    from click.testing import CliRunner

    from compactlog.cli.main import main

    res = CliRunner().invoke(main, ["spark", "advise", "--data-dir", str(topic), "--topic", "nope"])
    assert res.exit_code == 1 and "nope" in res.output
