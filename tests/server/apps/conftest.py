"""Fixtures for the stream-processing applications' tests: one ``compactlog serve`` per module, with small
segments and an eager log cleaner, so the applications' changelog topics are really compacted while
they run (a restore then reads a cleaned log, as it would on a long-lived cluster)."""

from __future__ import annotations

import pytest
import wire
from apps_support import INSTALL_SECONDS

# Small segments roll often and the cleaner looks every 200 ms at any log with a little dirt.
SERVER_SETTINGS = {
    "listeners": "PLAINTEXT://127.0.0.1:0",
    "group.initial.rebalance.delay.ms": "0",
    "log.segment.bytes": "2048",
    "log.cleaner.backoff.ms": "200",
    "log.cleaner.min.cleanable.ratio": "0.01",
}


@pytest.fixture(scope="module")
def app_server(tmp_path_factory):
    """A server for the module (its ``data_dir`` readable by ``read_topic``); tests may SIGKILL and
    restart it (``restart(kill=True)``: same directory, same port)."""
    d = tmp_path_factory.mktemp("apps")
    with wire.serving(d / "data", dict(SERVER_SETTINGS)) as s:
        yield s


def pytest_terminal_summary(terminalreporter) -> None:
    """Say how long each application venv took to make (once per machine; reused after)."""
    for requirement, seconds in sorted(INSTALL_SECONDS.items()):
        what = "reused" if seconds == 0.0 else f"created in {seconds:.1f} s"
        terminalreporter.write_line(f"application venv for {requirement}: {what}")
