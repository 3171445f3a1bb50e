"""A real ``compactlog serve`` process on 127.0.0.1 and a free port, for tests with real Kafka clients.

``ServeProcess`` starts ``python -m compactlog serve`` on a data directory with ``listeners`` on port 0,
reads the port from the line the server prints once it accepts connections, and stops the process with
SIGTERM (``stop``) or SIGKILL (``kill``). ``restart`` starts it again on the same directory and the
same port, so clients that remember the address reconnect.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

LISTENING = re.compile(r"listening on (\w+)://([^:]+):(\d+)")
CONSOLE = re.compile(r"web console at (https?://\S+?)/?$")
START_TIMEOUT = 60.0


class ServeProcess:
    def __init__(self, data_dir: Path, overrides: dict[str, str] | None = None, log_path: Path | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.overrides = {"listeners": "PLAINTEXT://127.0.0.1:0", "group.initial.rebalance.delay.ms": "0",
                          **(overrides or {})}
        self.log_path = log_path or self.data_dir.parent / f"{self.data_dir.name}-serve.log"
        self.proc: subprocess.Popen | None = None
        self.ports: dict[str, int] = {}
        self.console_url: str | None = None  # the web console's address, with http.listeners

    @property
    def port(self) -> int:
        return next(iter(self.ports.values()))

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "ServeProcess":
        args = [sys.executable, "-m", "compactlog", "serve", "--data-dir", str(self.data_dir)]
        for k, v in self.overrides.items():
            args += ["--override", f"{k}={v}"]
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self._log,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self._pending = b""
        deadline = time.monotonic() + START_TIMEOUT
        wanted = len([x for x in self.overrides["listeners"].split(",") if x.strip()])
        self.ports = {}
        while len(self.ports) < wanted:
            m = LISTENING.search(self._line(deadline))
            if m:
                self.ports[m.group(1)] = int(m.group(3))
        if self.overrides.get("http.listeners"):
            while self.console_url is None:
                m = CONSOLE.search(self._line(deadline).strip())
                if m:
                    self.console_url = m.group(1)
        return self

    def _line(self, deadline: float) -> str:
        """The next line the server prints, waiting no later than ``deadline`` (a server stuck while
        starting fails the test, naming where its log stands, instead of holding the run)."""
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._pending:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                self.kill()
                raise RuntimeError(f"compactlog serve did not start in {START_TIMEOUT:.0f} s; log: "
                                   f"{self.log_path.read_text(errors='replace')[-3000:]}")
            chunk = os.read(fd, 4096)
            if not chunk:
                raise RuntimeError(f"compactlog serve exited with {self.proc.wait()}; log: "
                                   f"{self.log_path.read_text(errors='replace')[-3000:]}")
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        return line.decode()

    def _pin_ports(self) -> None:
        """After the first start, restart on the same ports (clients keep the address)."""
        listeners = []
        for entry in self.overrides["listeners"].split(","):
            name = entry.split("://")[0].strip()
            if name.upper() in self.ports:
                listeners.append(f"{name}://127.0.0.1:{self.ports[name.upper()]}")
            else:
                listeners.append(entry)
        self.overrides["listeners"] = ",".join(listeners)
        if self.console_url:  # the browser keeps its address too
            self.overrides["http.listeners"] = self.console_url
            self.console_url = None

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM and wait: a clean shutdown."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            self._log.close()

    def kill(self) -> None:
        """SIGKILL: the process dies between any two instructions."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
            self._log.close()

    def restart(self, kill: bool = False) -> "ServeProcess":
        self.kill() if kill else self.stop()
        self._pin_ports()
        return self.start()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")


@pytest.fixture
def serve_factory(tmp_path):
    started: list[ServeProcess] = []

    def factory(data_dir: Path | None = None, **overrides: str) -> ServeProcess:
        d = data_dir or tmp_path / f"data{len(started)}"
        s = ServeProcess(d, {k.replace("_", "."): v for k, v in overrides.items()})
        started.append(s)
        return s.start()

    yield factory
    for s in started:
        s.kill()


@pytest.fixture
def server(serve_factory) -> ServeProcess:
    """One server on a fresh data directory."""
    return serve_factory()
