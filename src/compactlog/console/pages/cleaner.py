"""The cleaner: its threads, Kafka's metrics and stats of the last rounds, uncleanable partitions, the
dirty ratio and bytes cleaned over time, and Pulsar-style compaction with a button per topic.

Everything shown comes through the embedded API: ``compactlog.cleaning`` (the cleaner's status and its
view of each partition, compaction status, estimates of a run) and ``CompactLog``.

The charts need a history the cleaner does not keep, so a sampler (a console service) looks every
:data:`SAMPLE_SECONDS` on the console's threads and keeps the last :data:`SAMPLES` looks. A look costs
no segment read: the dirty ratio comes from segment sizes and the cleaner's checkpoint
(``cleaning.dirty_ratios``, the figure the inventory shows), and bytes cleaned from the cleaner's totals.

"Run cleaner now" is ``CompactLog.clean`` on a job thread while the cleaner threads keep running; they
cannot collide: every round first claims its partition in the cleaner's state table, under its lock,
and a claimed partition is skipped by every other claimant. A partition a cleaner thread is cleaning
at that moment is therefore left to the thread, and its round shows in the runs table.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import deque
from dataclasses import dataclass, field

from aiohttp import web

from ... import cleaning
from ...cleaning import CleanResult, CompactionStatus, ThreadState
from ...errors import CompactLogError
from ...topics import is_internal
from .. import charts, inventory
from ..handlers import console, page, path_name, require, start_job, viewer
from ..jobs import Job
from ..render import size
from ..runtime import Console

routes = web.RouteTableDef()
log = logging.getLogger(__name__)

SAMPLE_SECONDS = 5.0  # between two looks of the sampler
SAMPLES = 720  # looks kept: an hour at 5 s
TOPICS_PER_SAMPLE = 50  # the dirtiest compacted topics a look keeps (bounds memory with many topics)
CHART_LINES = 6  # topic lines drawn at most; beyond, the dirtiest five and the maximum of all
PARTITION_ROWS = 200  # compacted partitions listed, dirtiest first


# the sampler -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Sample:
    """One look: per compacted topic its highest partition dirty ratio, and the cleaner's byte totals."""

    ms: int
    ratios: dict[str, float]
    bytes_read: int  # read by cleaning rounds since the broker started
    bytes_written: int


def take_sample(cl) -> Sample:
    """Dirty ratios from segment sizes and checkpoints only (no segment is read); on a console thread."""
    now = cl.time.milliseconds()
    ratios: dict[str, float] = {}
    for (topic, _), r in cleaning.dirty_ratios(cl).items():
        ratios[topic] = max(ratios.get(topic, 0.0), r)
    if len(ratios) > TOPICS_PER_SAMPLE:
        ratios = dict(sorted(ratios.items(), key=lambda kv: -kv[1])[:TOPICS_PER_SAMPLE])
    status = cleaning.cleaner_status(cl)
    return Sample(now, ratios, status.bytes_read_total, status.bytes_written_total)


@dataclass
class Sampler:
    """Takes a :class:`Sample` every :data:`SAMPLE_SECONDS` while the console runs."""

    console: Console
    samples: deque = field(default_factory=lambda: deque(maxlen=SAMPLES))
    _task: asyncio.Task | None = None

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="cleaner-sampler")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    async def _loop(self) -> None:
        while True:
            try:
                self.samples.append(await self.console.run(take_sample, self.console.cl))
            except asyncio.CancelledError:
                raise
            except Exception:  # a failed look leaves a gap, the next one tries again
                log.exception("the cleaner page's sampler failed")
            await asyncio.sleep(SAMPLE_SECONDS)


def setup(c: Console) -> None:
    c.services.append(Sampler(c))


def sampler(c: Console) -> Sampler:
    """The console's sampler (among its services, so it lives and stops with the console)."""
    return next(s for s in c.services if isinstance(s, Sampler))


# charts (pure) -------------------------------------------------------------------------------------

def clock(seconds: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(seconds))


def dirty_ratio_series(samples: list[Sample], visible) -> list[charts.Series]:
    """One line per topic when few, else the dirtiest five (by their last look) and the maximum of all."""
    topics: dict[str, list[tuple[float, float]]] = {}
    for s in samples:
        for t, r in s.ratios.items():
            if visible(t):
                topics.setdefault(t, []).append((s.ms / 1000, 100 * r))
    if len(topics) <= CHART_LINES:
        return [charts.Series(t, pts) for t, pts in sorted(topics.items())]
    last = {t: pts[-1][1] for t, pts in topics.items()}
    top = sorted(topics, key=lambda t: -last[t])[: CHART_LINES - 1]
    highest = [(s.ms / 1000, 100 * max((r for t, r in s.ratios.items() if visible(t)), default=0.0)) for s in samples]
    return [charts.Series("max of all topics", highest)] + [charts.Series(t, topics[t]) for t in sorted(top)]


def bytes_cleaned_series(samples: list[Sample]) -> list[charts.Series]:
    """Bytes read and written by cleaning rounds between consecutive looks."""
    read, written = [], []
    for a, b in itertools.pairwise(samples):
        if b.bytes_read < a.bytes_read:  # totals restarted
            continue
        read.append((b.ms / 1000, float(b.bytes_read - a.bytes_read)))
        written.append((b.ms / 1000, float(b.bytes_written - a.bytes_written)))
    return [charts.Series("read", read), charts.Series("written", written)]


def cleaner_charts(samples: list[Sample], visible) -> tuple:
    ratio = charts.line_chart(dirty_ratio_series(samples, visible), title="Dirty ratio (highest partition per topic)",
                              x_format=clock, y_format=lambda v: f"{v:g}%", y_max=100.0, x_label="time (UTC)",
                              x_ticks=charts.time_ticks, css_class="dirty-ratio")
    cleaned = charts.line_chart(bytes_cleaned_series(samples), title=f"Bytes cleaned between looks ({SAMPLE_SECONDS:g} s apart)",
                                x_format=clock, y_format=size, x_label="time (UTC)", x_ticks=charts.time_ticks,
                                y_ticks=charts.whole_ticks, css_class="bytes-cleaned",
                                empty="Two looks are needed", all_zero="Nothing cleaned yet")
    return ratio, cleaned


# what the page shows ------------------------------------------------------------------------------

@dataclass(frozen=True)
class CleanerView:
    enabled: bool
    metrics: dict[str, float]
    threads: list[ThreadState]
    runs: list[CleanResult]  # newest first
    uncleanable: list[tuple[str, int, str]]
    partitions: list[inventory.PartitionFacts]  # of compacted topics, dirtiest first
    compaction: list[tuple[str, list[CompactionStatus]]]
    min_ratios: dict[str, float]  # min.cleanable.dirty.ratio of each compacted topic
    now: Sample
    empty_partitions: int = 0  # compacted partitions holding no bytes (most of __consumer_offsets), not listed


def read_view(cl, full: bool = True) -> CleanerView:
    """Everything the page shows, in one go on a console thread. ``full``: also the partitions (their
    active segments are read) and the compaction states; the part that refreshes itself does without."""
    partitions: list[inventory.PartitionFacts] = []
    compaction = []
    min_ratios = {}
    for name in cl.list_topics() if full else []:
        try:
            config = cl.topic_config(name)
            if config.compact:
                partitions += inventory.topic_facts(cl, name, with_segments=True).partitions
                min_ratios[name] = config.min_cleanable_dirty_ratio
            if not is_internal(name):  # the broker's own topics are not for compact-topic
                compaction.append((name, cl.compaction_status(name)))
        except (CompactLogError, OSError):  # deleted while we looked
            continue
    partitions.sort(key=lambda p: (-(p.dirty_ratio or 0.0), p.topic, p.partition))
    listed = [p for p in partitions if p.size or p.cleaner_state != cleaning.NONE]
    c = cleaning.cleaner_status(cl)
    return CleanerView(c.enabled, c.metrics, c.threads, c.runs, c.uncleanable, listed[:PARTITION_ROWS], compaction,
                       min_ratios, take_sample(cl), len(partitions) - len(listed))


@routes.get("/cleaner")
async def cleaner_page(request: web.Request) -> web.Response:
    require(request, "DESCRIBE")
    return await _render(request, "cleaner.html", full=True)


@routes.get("/cleaner/live")
async def cleaner_live(request: web.Request) -> web.Response:
    """The part of the page that refreshes itself (htmx, every few seconds)."""
    require(request, "DESCRIBE")
    return await _render(request, "cleaner_live.html", full=False)


async def _render(request: web.Request, template: str, full: bool) -> web.Response:
    c = console(request)
    v = viewer(request)

    def visible(topic: str) -> bool:
        return v.can("DESCRIBE", "TOPIC", topic)

    samples = list(sampler(c).samples)  # copied here, where the sampler appends

    def read() -> tuple:  # the charts too are drawn off the event loop: an hour of looks is thousands of points
        view = read_view(c.cl, full)
        return view, *cleaner_charts(samples + [view.now], visible)

    view, ratio_chart, bytes_chart = await c.run(read)
    return page(request, template, view=view, ratio_chart=ratio_chart, bytes_chart=bytes_chart,
                runs=[r for r in view.runs if visible(r.topic)],
                uncleanable=[u for u in view.uncleanable if visible(u[0])],
                partitions=[p for p in view.partitions if visible(p.topic)],
                compaction=[(t, s) for t, s in view.compaction if visible(t)],
                sample_seconds=SAMPLE_SECONDS, now_ms=view.now.ms)


# jobs ---------------------------------------------------------------------------------------------

class ByteProgress:
    """Turns ``on_io(log, phase, bytes)`` calls into a job's progress against an estimated total."""

    def __init__(self, job: Job, total: int, what: str) -> None:
        self.job, self.total, self.what, self.done = job, max(total, 1), what, 0
        self._last = 0.0

    def __call__(self, name: str, phase: str, n: int) -> None:
        self.job.check()  # a stopping server ends the run here (every chunk: the run may be long)
        self.done += n
        now = time.monotonic()
        if now - self._last >= 0.2:  # a message per chunk would be wasted work
            self._last = now
            self.job.progress(f"{self.what}: {phase} {name}, {size(self.done)} read of about {size(self.total)}",
                              min(0.99, self.done / self.total))


def run_cleaner(cl, job: Job):
    job.progress("estimating what is dirty")
    progress = ByteProgress(job, cleaning.clean_estimate(cl, None), "cleaning")
    report = cl.clean(None, on_io=progress)
    job.progress(f"{len(report.compactions)} round(s), {size(progress.done)} read")
    return report


def run_compaction(cl, topic: str, job: Job):
    job.progress(f"{topic}: looking for what is new")
    progress = ByteProgress(job, cleaning.compaction_estimate(cl, topic), topic)
    outcome = cl.compact_topic(topic, on_io=progress)
    job.progress(f"{topic}: {size(progress.done)} read")
    return {"outcome": outcome, "status": cl.compaction_status(topic)}


@routes.post("/cleaner/run")
async def run_now(request: web.Request) -> web.Response:
    require(request, "ALTER")
    c = console(request)
    raise await start_job(request, "Log cleaner run", "cleaner_job.html", lambda job: run_cleaner(c.cl, job))


@routes.post("/cleaner/compact/{topic}")
async def compact_now(request: web.Request) -> web.Response:
    topic = path_name(request, "topic")
    require(request, "ALTER", "TOPIC", topic)
    c = console(request)
    raise await start_job(request, f"Compaction of {topic}", "cleaner_compaction_job.html",
                          lambda job: run_compaction(c.cl, topic, job), topic=topic)
