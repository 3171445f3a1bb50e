"""Long actions (Pulsar-style compaction, a cleaner round, the compression advisor) as jobs with progress.

A form that starts one answers at once with the job's page; the page asks for the job's status every
second (htmx) until it is done, so no request waits on the action and no page times out. Jobs run one
at a time on their own thread, apart from the threads that read pages, so a long compaction never
makes the console slow to browse, and the broker's threads are never theirs.

When the server stops, a running job is told to stop (:class:`JobCancelled` from its next progress
call) and waited for, before the broker closes its logs: a compaction left running would go on
writing into a data directory that is already marked cleanly shut down and unlocked.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)
KEEP = 50  # finished jobs remembered for their pages
STOPPED = "stopped: the server shut down"


class JobCancelled(BaseException):
    """The server is stopping: raised from a job's progress calls so its action ends where it is.

    A BaseException, as asyncio's CancelledError is: the cleaner and the compaction service count any
    Exception as the partition's failure (uncleanable until restart), and a shutdown is not one; their
    ``except BaseException`` / ``finally`` clean-ups (unpublished side logs, ``.cleaned`` files) still run."""


@dataclass
class Job:
    """One action: what it is, how far it has got, and what it gave."""

    id: int
    title: str
    template: str  # renders ``result`` once done (a template under templates/)
    owner: str  # the principal who started it; only they (and who may ALTER the cluster) see it
    state: str = "queued"  # queued, running, done, failed
    fraction: float | None = None  # 0..1 when the action can tell, None when it cannot
    message: str = ""
    result: Any = None
    error: str | None = None
    started: float = field(default_factory=time.time)
    finished: float | None = None
    context: dict = field(default_factory=dict)  # what the result template needs beside the result
    _cancel: threading.Event = field(default_factory=threading.Event, repr=False)

    def progress(self, message: str, fraction: float | None = None) -> None:
        """Called from the job's thread as it goes; raises :class:`JobCancelled` once the server stops."""
        self.check()
        self.message = message
        if fraction is not None:
            self.fraction = max(0.0, min(1.0, fraction))

    def check(self) -> None:
        """Raise :class:`JobCancelled` if the server is stopping (cheap: call it as often as you like)."""
        if self._cancel.is_set():
            raise JobCancelled(STOPPED)

    def cancel(self) -> None:
        self._cancel.set()

    @property
    def done(self) -> bool:
        return self.state in ("done", "failed")

    @property
    def seconds(self) -> float:
        return (self.finished or time.time()) - self.started


class Jobs:
    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._jobs: OrderedDict[int, Job] = OrderedDict()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="console-job")
        self._futures: set[asyncio.Future] = set()

    def get(self, job_id: int) -> Job | None:
        return self._jobs.get(job_id)

    def recent(self) -> list[Job]:
        return list(reversed(self._jobs.values()))

    def start(self, title: str, template: str, owner: str, action: Callable[[Job], Any], **context) -> Job:
        """Queue ``action(job)``; its return value becomes ``job.result``, an exception the job's error."""
        job = Job(next(self._ids), title, template, owner, context=context)
        self._jobs[job.id] = job
        for old in [j for j in self._jobs.values() if j.done][: max(0, len(self._jobs) - KEEP)]:
            del self._jobs[old.id]

        def run() -> None:
            job.state = "running"
            job.started = time.time()
            try:
                job.result = action(job)
                job.state = "done"
                job.fraction = 1.0
            except JobCancelled:
                log.info("console job %r stopped: the server shuts down", title)
                job.error = STOPPED
                job.state = "failed"
            except Exception as exc:
                log.warning("console job %r failed: %s", title, exc, exc_info=not _expected(exc))
                job.error = str(exc) or type(exc).__name__
                job.state = "failed"
            finally:
                job.finished = time.time()

        future = asyncio.get_running_loop().run_in_executor(self._pool, run)
        self._futures.add(future)
        future.add_done_callback(self._futures.discard)
        return job

    async def stop(self, timeout: float) -> None:
        """Tell every job to stop, drop the queued ones and wait (at most ``timeout`` s) for the running
        one to give up, so that nothing writes once the broker closes its logs."""
        for job in self._jobs.values():
            job.cancel()
            if job.state == "queued":
                job.state, job.error, job.finished = "failed", STOPPED, time.time()
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._futures:
            _, pending = await asyncio.wait(set(self._futures), timeout=timeout)
            if pending:
                log.warning("a console job did not stop within %.0f s of the shutdown", timeout)


def _expected(exc: BaseException) -> bool:
    from ..errors import CompactLogError

    return isinstance(exc, CompactLogError)
