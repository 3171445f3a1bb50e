"""The lines a child process prints, each waited for with a deadline.

A plain ``for line in proc.stdout`` blocks for as long as the child says nothing, so a test waiting for
a word that never comes would hang instead of failing; a ``select`` on the pipe misses lines already
taken into the reader's buffer. A thread reads the lines into a queue instead."""

from __future__ import annotations

import queue
import subprocess
import threading
import time
from typing import Callable


class ChildLines:
    def __init__(self, proc: subprocess.Popen, about: Callable[[], str] = lambda: "") -> None:
        """``about`` adds to a failure's message (the child's log, say)."""
        self.proc, self.about = proc, about
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put((line.decode() if isinstance(line, bytes) else line).strip())
        self.lines.put(None)

    def next_line(self, deadline: float) -> str:
        """The child's next line; fails when it exits or says nothing before ``deadline`` (monotonic)."""
        try:
            line = self.lines.get(timeout=max(deadline - time.monotonic(), 0))
        except queue.Empty:
            raise AssertionError(f"the child said nothing in time{self.about()}") from None
        assert line is not None, f"the child exited with {self.proc.wait()}{self.about()}"
        return line

    def wait_for(self, word: str, timeout: float) -> None:
        """Read lines until one starts with ``word``, within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not self.next_line(deadline).startswith(word):
            pass

    def close(self, timeout: float) -> None:
        """After the child ended: the reader thread joined, the pipe closed."""
        self.reader.join(timeout)
        self.proc.stdout.close()
