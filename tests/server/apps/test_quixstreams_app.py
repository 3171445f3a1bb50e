"""A stateful quixstreams application (tests/server/apps/quix_counter.py: a count per key in its RocksDB
store, backed by a changelog topic the broker compacts) against a real ``compactlog serve``.

At-least-once: the app counts every input, is stopped, loses its local state, restores it from the
compacted changelog and goes on counting where it was. quixstreams runs in its own venv under build/
(apps_support.py): it pins a confluent-kafka older than the one the project tests with.
"""

from __future__ import annotations

import json
import shutil

import pytest
from apps_support import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    AppProcess,
    app_python,
    check_exactly_once,
    cleaned_offsets,
    final_counts,
    latest_by_key,
    produce_inputs,
    read_topic,
    wait_until,
)
from groups_support import create_topic

pytest.importorskip("confluent_kafka")

REQUIREMENT = "quixstreams==3.28.1"
RUN_TIMEOUT = 40.0  # what one phase of a run may take before the test gives up on it


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


def outputs_seen(server, sink: str, isolation: str) -> int:
    return len(read_topic(server.data_dir, sink, isolation))


def test_at_least_once_counts_and_restores_from_the_compacted_changelog(quix, app_server, tmp_path):
    server = app_server
    source, sink, group = "alo-words", "alo-counts", "alo-counter"
    changelog = changelog_name(group, source)
    create_topic(server.bootstrap, source, 2)
    create_topic(server.bootstrap, sink, 2)
    first = range(0, 150)
    produce_inputs(server.bootstrap, source, first)
    app = counter(quix, server, tmp_path, group, source, sink, "at-least-once").start()
    try:
        wait_until(lambda: outputs_seen(server, sink, READ_UNCOMMITTED) >= len(first), RUN_TIMEOUT,
                   f"{len(first)} outputs", app)
        assert app.stop() == 0, app.log_tail()
        check_exactly_once(read_topic(server.data_dir, sink), first)
        # the changelog was made by quixstreams as a compacted topic, and the broker's cleaner compacts it
        assert server_config(server, changelog).get("cleanup.policy") == "compact"
        wait_until(lambda: any(cleaned_offsets(server.data_dir, changelog).values()), RUN_TIMEOUT,
                   f"the log cleaner compacted {changelog}")
        assert changelog_counts(read_topic(server.data_dir, changelog)) == final_counts(first)

        # local state gone: the next run restores it from the changelog and counts on from there
        shutil.rmtree(tmp_path / "state")
        everything = range(0, 200)
        produce_inputs(server.bootstrap, source, range(150, 200))
        app.start()
        wait_until(lambda: outputs_seen(server, sink, READ_UNCOMMITTED) >= len(everything), RUN_TIMEOUT,
                   f"{len(everything)} outputs", app)
        assert app.stop() == 0, app.log_tail()
        check_exactly_once(read_topic(server.data_dir, sink), everything)
        assert changelog_counts(read_topic(server.data_dir, changelog)) == final_counts(everything)
    finally:
        app.kill()


def server_config(server, topic: str) -> dict[str, str]:
    """A topic's config overrides as the broker keeps them."""
    from compactlog.reading import topic_metadata

    return topic_metadata(server.data_dir)[topic]["config"]
