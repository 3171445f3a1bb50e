"""A progress bar for Spark jobs, fed by the status tracker (our sessions run without Spark's UI).

Spark's own console bar needs a terminal and the UI's listener; this polls
``SparkContext.statusTracker()`` from a daemon thread and shows tasks done / total of the running
stages with rich, on stderr; off a terminal it stays quiet (logs get the job's own summary lines).
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

POLL_SECONDS = 0.25


def stage_totals(tracker) -> tuple[int, int, int]:
    """(tasks done, tasks in all, stages running) over the active stages."""
    done = total = running = 0
    for sid in tracker.getActiveStageIds():
        info = tracker.getStageInfo(sid)
        if info is None:
            continue
        running += 1
        done += info.numCompletedTasks
        total += info.numTasks
    return done, total, running


@contextmanager
def spark_progress(spark, label: str, enabled: bool | None = None) -> Iterator[None]:
    """Show the progress of the Spark jobs run inside the block."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    if enabled is None:
        enabled = console.is_terminal
    if not enabled:
        yield
        return
    tracker = spark.sparkContext.statusTracker()
    stop = threading.Event()
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as bar:
        task = bar.add_task(label, total=None)

        def poll() -> None:
            while not stop.wait(POLL_SECONDS):
                done, total, running = stage_totals(tracker)
                bar.update(task, completed=done, total=total or None,
                           description=f"{label}: {running} stage{'s' if running != 1 else ''} running, tasks")

        t = threading.Thread(target=poll, name="spark-progress", daemon=True)
        t.start()
        try:
            yield
        finally:
            stop.set()
            t.join()

