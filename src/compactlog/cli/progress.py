"""A progress line for long local jobs (``clean``, ``compact-topic``), fed by their I/O observers.

The cleaner and the compactor report every chunk they read as (log, phase, bytes); this shows the log
and phase being worked on, the bytes read so far and the rate, with rich on stderr. Off a terminal it
stays quiet: the commands print their summary tables at the end either way.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    from ..cleaner.cleaner import IoObserver


@contextmanager
def io_progress(label: str, enabled: bool | None = None, console=None) -> Iterator[IoObserver]:
    """Yields the observer to hand to ``CompactLog.clean`` or ``compact_topic``."""
    from rich.console import Console
    from rich.progress import DownloadColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn, TransferSpeedColumn

    console = console or Console(stderr=True)
    if enabled is None:
        enabled = console.is_terminal
    if not enabled:
        yield lambda _log, _phase, _n: None
        return
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), DownloadColumn(), TransferSpeedColumn(),
                  TimeElapsedColumn(), console=console, transient=True) as bar:
        task = bar.add_task(label, total=None)

        def observe(log: str, phase: str, n: int) -> None:
            bar.update(task, advance=n, description=f"{label}: {phase} {log}")

        yield observe
