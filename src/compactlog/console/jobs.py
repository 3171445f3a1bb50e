"""Long actions (Pulsar-style compaction, a cleaner round, the compression advisor) as jobs with progress.

A form that starts one answers at once with the job's page; the page asks for the job's status every
second (htmx) until it is done, so no request waits on the action and no page times out. Jobs run one
at a time on their own thread, apart from the threads that read pages, so a long compaction never
makes the console slow to browse, and the broker's threads are never theirs.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)
KEEP = 50  # finished jobs remembered for their pages


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

    def progress(self, message: str, fraction: float | None = None) -> None:
        """Called from the job's thread as it goes."""
        self.message = message
        if fraction is not None:
            self.fraction = max(0.0, min(1.0, fraction))

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
            except Exception as exc:
                log.warning("console job %r failed: %s", title, exc, exc_info=not _expected(exc))
                job.error = str(exc) or type(exc).__name__
                job.state = "failed"
            finally:
                job.finished = time.time()

        asyncio.get_running_loop().run_in_executor(self._pool, run)
        return job

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _expected(exc: BaseException) -> bool:
    from ..errors import CompactLogError

    return isinstance(exc, CompactLogError)
