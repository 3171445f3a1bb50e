"""A faust (faust-streaming) application with a table (tests/server/apps/faust_counter.py: a count per
key, kept in RocksDB and backed by a changelog topic the broker compacts) against a real
``compactlog serve``.

At-least-once: the app counts every input, is stopped, loses its local state, restores the table from
the compacted changelog and goes on counting where it was. Exactly-once (``processing_guarantee=
"exactly_once"``: a transactional producer per input partition, whose transactions hold the table's
changelog writes and the consumed offsets): the server is SIGKILLed and restarted under the running
app, which reconnects and goes on; then the app is stopped, loses its local state and restores from the
changelog; the changelog read read_committed holds the exact counts, and every output carries the
right count. faust puts what an agent sends to other topics outside its transactions, so the output
may repeat an input's effect. The app itself is not SIGKILLed here: faust 0.15 cannot count exactly
across that (it commits a table write without the offset of the event that made it when a commit
falls inside the agent's step, and after the restart's recovery it drops events fetched while its
flow is suspended), whatever the broker does. For that last reason each run's inputs are produced
once the worker says it is ready.

faust runs in its own venv under build/ (apps_support.py): it pins its own aiokafka and click.
"""

from __future__ import annotations

import json

import pytest
from apps_support import AppProcess, app_python, exactly_once_through_kills, latest_by_key, restore_after_wiping_state
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


def worker_ready(app: AppProcess) -> bool:
    """Whether the app's current run has logged faust's worker as ready (recovered, seeked, flowing)."""
    return app.log_tail(10**7).count("[^Worker]: Ready") >= app.runs


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
                               changelog_counts, ready=worker_ready)


def test_exactly_once_table_through_a_server_kill_and_a_restore(faust, app_server, tmp_path):
    source, sink, app_id = "eos-words", "eos-counts", "eos-counter"
    create_topic(app_server.bootstrap, source, 2)
    create_topic(app_server.bootstrap, sink, 2)
    app = counter(faust, app_server, tmp_path, app_id, source, sink, "exactly_once", delay=0.02)
    exactly_once_through_kills(app_server, app, tmp_path / "state", source, sink, changelog_name(app_id),
                               changelog_counts, output_in_transactions=False, kill_app=False,
                               ready=worker_ready)
