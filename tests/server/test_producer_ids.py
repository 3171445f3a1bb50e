"""Producer ids are never handed out twice: not after a restart, and not from a damaged block file."""

from __future__ import annotations

import pytest

from compactlog.errors import KafkaStorageError
from compactlog.server.producer_ids import BLOCK, ProducerIdManager
from compactlog.storage import files


def test_a_restart_starts_after_every_id_that_may_have_been_given(tmp_path):
    first = ProducerIdManager(tmp_path)
    assert [first.allocate() for _ in range(3)] == [0, 1, 2]
    assert ProducerIdManager(tmp_path).allocate() == BLOCK  # the whole block counts as given


@pytest.mark.parametrize("text", ["10x0\n", "", "-5\n"])
def test_a_damaged_block_file_is_refused_rather_than_reused_from_zero(tmp_path, text):
    """Starting again at 0 would give a new producer the id of an old one, and its first batch would be
    taken for a retry of the old one's and dropped."""
    (tmp_path / files.PRODUCER_ID_BLOCK).write_text(text)
    with pytest.raises(KafkaStorageError, match="producer-id-block"):
        ProducerIdManager(tmp_path)
