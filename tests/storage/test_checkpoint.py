"""Checkpoint files are Kafka's text format and are replaced atomically."""

from __future__ import annotations

import pytest

from compactlog.errors import KafkaStorageError
from compactlog.storage.checkpoint import OffsetCheckpointFile, parse_checkpoint


def test_round_trip_in_kafka_format(tmp_path):
    f = OffsetCheckpointFile(tmp_path / "cleaner-offset-checkpoint")
    f.write({("prices", 0): 42, ("orders", 3): 7})
    assert (tmp_path / "cleaner-offset-checkpoint").read_text() == "0\n2\norders 3 7\nprices 0 42\n"
    assert f.read() == {("prices", 0): 42, ("orders", 3): 7}
    assert not (tmp_path / "cleaner-offset-checkpoint.tmp").exists()


def test_kafka_written_file_with_any_whitespace_parses():
    assert parse_checkpoint("0\n2\nfoo-bar 0  5\n__consumer_offsets\t12 99\n") == {("foo-bar", 0): 5, ("__consumer_offsets", 12): 99}


def test_missing_or_empty_file_is_empty(tmp_path):
    assert OffsetCheckpointFile(tmp_path / "nope").read() == {}
    assert parse_checkpoint("") == {}


@pytest.mark.parametrize("text, message", [
    ("1\n0\n", "Unrecognized version"),
    ("0\n2\nt 0 1\n", "Expected 2 entries"),
    ("0\n1\nt 0\n", "Malformed line"),
    ("0\n1\nt x 1\n", "Malformed line"),
])
def test_malformed_files_are_rejected_with_a_reason(text, message):
    with pytest.raises(KafkaStorageError, match=message):
        parse_checkpoint(text)
