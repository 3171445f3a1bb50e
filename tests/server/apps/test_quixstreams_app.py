"""A stateful quixstreams application (tests/server/apps/quix_counter.py: a count per key in its RocksDB
store, backed by a changelog topic the broker compacts) against a real ``compactlog serve``.

At-least-once: the app counts every input, is stopped, loses its local state, restores it from the
compacted changelog and goes on counting where it was. Exactly-once (each checkpoint one transaction:
output, changelog and consumed offsets): the app is SIGKILLed midway and restarted, the server is
SIGKILLed and restarted under it, the app loses its local state and restores from the changelog; a
read_committed reader then sees each input's effect in the output exactly once, with the right count,
and the changelog's exact counts. quixstreams runs in its own venv under build/ (apps_support.py): it
pins a confluent-kafka older than the one the project tests with.
"""

from __future__ import annotations

import json

import pytest
from apps_support import AppProcess, app_python, exactly_once_through_kills, latest_by_key, restore_after_wiping_state
from groups_support import create_topic

pytest.importorskip("confluent_kafka")

REQUIREMENT = "quixstreams==3.28.1"


@pytest.fixture(scope="module")
def quix() -> str:
    return app_python(REQUIREMENT)


def changelog_name(group: str, source: str) -> str:
    """quixstreams' name for the changelog topic of a dataframe's default store."""
    return f"changelog__{group}--{source}--default"


def changelog_counts(records) -> dict[str, int]:
    """The counts a restore from the changelog ends with: quixstreams' state keys are the JSON message
    key and the JSON state key joined by '|', its values JSON."""
    out = {}
    for key, value in latest_by_key(records).items():
        message_key, _, state_key = key.partition(b"|")
        assert state_key == b'"count"', key
        if value is not None:
            out[json.loads(message_key)] = json.loads(value)
    return out


def counter(quix: str, server, tmp_path, group: str, source: str, sink: str, guarantee: str,
            delay: float = 0.0, commit_every: int = 5) -> AppProcess:
    return AppProcess(quix, "quix_counter.py",
                      [server.bootstrap, source, sink, group, str(tmp_path / "state"), guarantee, str(delay),
                       str(commit_every)],
                      tmp_path / f"{group}.log")


def test_at_least_once_counts_and_restores_from_the_compacted_changelog(quix, app_server, tmp_path):
    source, sink, group = "alo-words", "alo-counts", "alo-counter"
    create_topic(app_server.bootstrap, source, 2)
    create_topic(app_server.bootstrap, sink, 2)
    app = counter(quix, app_server, tmp_path, group, source, sink, "at-least-once")
    restore_after_wiping_state(app_server, app, tmp_path / "state", source, sink, changelog_name(group, source),
                               changelog_counts)


def test_exactly_once_through_kills_of_the_app_and_the_server(quix, app_server, tmp_path):
    source, sink, group = "eos-words", "eos-counts", "eos-counter"
    create_topic(app_server.bootstrap, source, 2)
    create_topic(app_server.bootstrap, sink, 2)
    app = counter(quix, app_server, tmp_path, group, source, sink, "exactly-once", delay=0.02)
    exactly_once_through_kills(app_server, app, tmp_path / "state", source, sink, changelog_name(group, source),
                               changelog_counts)
