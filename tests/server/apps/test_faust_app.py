"""A faust (faust-streaming) application with a table (tests/server/apps/faust_counter.py: a count per
key, kept in RocksDB and backed by a changelog topic the broker compacts) against a real
``compactlog serve``.

At-least-once: the app counts every input, is stopped, loses its local state, restores the table from
the compacted changelog and goes on counting where it was. faust runs in its own venv under build/
(apps_support.py): it pins its own aiokafka and click.
"""

from __future__ import annotations

import json

import pytest
from apps_support import AppProcess, app_python, latest_by_key, restore_after_wiping_state
from groups_support import create_topic

pytest.importorskip("confluent_kafka")

# faust's RocksDB store runs on rocksdict (faust-streaming has no extra for it)
REQUIREMENTS = ("faust-streaming==0.15.3", "rocksdict==0.3.29")


@pytest.fixture(scope="module")
def faust() -> str:
    return app_python(*REQUIREMENTS)


def changelog_name(app_id: str) -> str:
    """faust's name for the changelog topic of the app's table ``counts``."""
    return f"{app_id}-counts-changelog"


def changelog_counts(records) -> dict[str, int]:
    """The counts a restore from the changelog ends with: the table's keys raw, its values JSON."""
    return {key.decode(): json.loads(value) for key, value in latest_by_key(records).items() if value is not None}


def counter(faust: str, server, tmp_path, app_id: str, source: str, sink: str, guarantee: str,
            delay: float = 0.0, commit_every: int = 5) -> AppProcess:
    return AppProcess(faust, "faust_counter.py",
                      [server.bootstrap, source, sink, app_id, str(tmp_path / "state"), guarantee, str(delay),
                       str(commit_every)],
                      tmp_path / f"{app_id}.log")


def test_at_least_once_counts_and_restores_from_the_compacted_changelog(faust, app_server, tmp_path):
    source, sink, app_id = "alo-words", "alo-counts", "alo-counter"
    create_topic(app_server.bootstrap, source, 2)
    create_topic(app_server.bootstrap, sink, 2)
    app = counter(faust, app_server, tmp_path, app_id, source, sink, "at_least_once")
    restore_after_wiping_state(app_server, app, tmp_path / "state", source, sink, changelog_name(app_id),
                               changelog_counts)
