"""Kafka's names: segment files and topic names (no name can escape the data directory)."""

from __future__ import annotations

import pytest

from compactlog.errors import InvalidTopicError
from compactlog.storage import files


def test_segment_names_are_twenty_digit_base_offsets(tmp_path):
    assert files.segment_file(tmp_path, 42, ".log").name == "00000000000000000042.log"
    assert files.segment_file(tmp_path, 0, ".index", ".cleaned").name == "00000000000000000000.index.cleaned"
    assert files.base_offset_of("00000000000000001234.timeindex.swap") == 1234


@pytest.mark.parametrize("name", ["a", "A-b_c.d", "x" * 249, "__consumer_offsets", "..."])
def test_legal_topic_names(name):
    files.validate_topic_name(name)


@pytest.mark.parametrize("name, message", [
    ("", "can't be empty"),
    (".", "cannot be"),
    ("..", "cannot be"),
    ("x" * 250, "longer than 249"),
    ("a/b", "illegal"),
    ("../etc", "illegal"),
    ("a b", "illegal"),
    ("prix€", "illegal"),
])
def test_illegal_topic_names(name, message):
    with pytest.raises(InvalidTopicError, match=message):
        files.validate_topic_name(name)


def test_partition_dir_names():
    assert files.parse_partition_dir("latest-product-price-12") == ("latest-product-price", 12)
    assert files.parse_partition_dir("__topics") is None
    assert files.parse_partition_dir("t-0.abc-delete") is None
