"""Compression: run the advisor on a topic, see every codec's ratio and speed, apply the recommendation,
and recompress the stored history to a codec.

The advisor runs as a job, without Spark (``advise_local``: the trials one after the other on the job
thread), because measuring compression speed costs seconds of CPU; starting it takes ALTER on the topic
for that reason, and applying the recommendation takes ALTER_CONFIGS, through ``alter_topic_config``
as ``configs --alter`` does. The page shows the viewer's latest advice for the topic from the jobs
the console remembers.

A codec change applies to new batches only, as in Kafka; "Recompress" rewrites the closed segments
already stored (``spark recompress``'s rewrite, here one segment after another on the job thread:
``recompress_local``), swapping each in crash-safely; it takes ALTER on the topic.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web
from markupsafe import Markup

from ...advisor import TRIALS, Advice, Trial, advise_local, topic_settings
from ...errors import CompactLogError
from ...records.codecs import Codec, check_level, codec_from_name
from ...recompression import recompress_local
from .. import charts
from ..fields import INT_MAX, FieldError, decimal, optional_whole_number
from ..handlers import console, page, path_name, require, see_other, start_job, topic_url, viewer
from ..jobs import Job

routes = web.RouteTableDef()

MB = 1_000_000
DEFAULT_SAMPLE_MB = 16.0  # as ``compactlog spark advise``
MIN_SAMPLE_MB, MAX_SAMPLE_MB = 0.0656, 64.0  # the CLI's 64 KiB floor; a cap on what the broker's process holds
DEFAULT_MIN_MBPS = 50.0
JOB_TEMPLATE = "compression_job.html"
RECOMPRESS_TEMPLATE = "compression_recompress_job.html"
CODECS = ("zstd", "lz4", "snappy", "gzip", "uncompressed")


@dataclass(frozen=True)
class AdvisorResult:
    """What the job gives its page: the advice (None for an empty topic) and its chart."""

    topic: str
    advice: Advice | None
    chart: Markup | None

    @property
    def settings(self) -> dict[str, str]:
        """The topic configs the recommendation sets."""
        return topic_settings(self.advice.choice) if self.advice else {}

    def saving(self, t: Trial) -> int:
        """Bytes the whole topic would save stored with ``t`` (negative: it would grow)."""
        a = self.advice
        return int(a.topic_bytes * (1 - t.stored_bytes / max(a.current_sample_bytes, 1))) if a else 0


def advice_chart(topic: str, a: Advice) -> Markup:
    """Ratio against compression speed (log scale), one point per trial, the recommendation ringed;
    uncompressed is the ratio-1 line, the minimum speed a dashed line."""
    points = [charts.Point(t.compress_mbps, t.ratio, t.name, t.codec.config_name, t is a.choice)
              for t in a.trials if t.codec is not Codec.NONE]
    return charts.scatter_chart(
        points, title=f"{topic}: compression ratio against speed per core", width=760, height=380, log_x=True,
        x_format=lambda v: f"{v:,g}", y_format=lambda v: f"{v:g}x", x_label="compression speed (MB/s of records, log scale)",
        y_label="ratio (records / stored)", vline=(a.min_compress_mbps, f"minimum {a.min_compress_mbps:g} MB/s"),
        hline=(1.0, "uncompressed"), css_class="advice")


def run_advisor(cl, topic: str, sample_bytes: int, min_mbps: float, job: Job) -> AdvisorResult:
    advice = advise_local(cl, topic, sample_bytes, min_mbps, TRIALS, progress=job.progress)
    return AdvisorResult(topic, advice, advice_chart(topic, advice) if advice else None)


@dataclass(frozen=True)
class RecompressResult:
    topic: str
    codec: str
    level: int | None
    segments: int
    bytes_before: int
    bytes_after: int


def run_recompression(cl, topic: str, codec: str, level: int | None, job: Job) -> RecompressResult:
    results = recompress_local(cl, topic, codec, level, progress=job.progress,
                               on_segment=lambda done, total: job.progress(f"{done} of {total} segments rewritten",
                                                                           done / total))
    return RecompressResult(topic, codec, level, len(results), sum(r.bytes_before for r in results),
                            sum(r.bytes_after for r in results))




def latest_advice(request: web.Request, topic: str) -> Job | None:
    """The newest finished advisor job on ``topic`` the viewer may see."""
    v = viewer(request)
    for j in console(request).jobs.recent():
        if (j.template == JOB_TEMPLATE and j.context.get("topic") == topic and j.state == "done"
                and (j.owner == v.principal or v.can("ALTER"))):
            return j
    return None


async def _page(request: web.Request, topic: str, status: int = 200, error: str | None = None,
                form: dict | None = None, applied: bool = False) -> web.Response:
    c = console(request)
    desc, size = await c.run(_describe, c.cl, topic)
    return page(request, "compression.html", status=status, topic=topic, config=desc.config,
                partitions=len(desc.partitions), topic_bytes=size, error=error, applied=applied,
                last=latest_advice(request, topic), codecs=CODECS,
                form=form or {"sample_mb": f"{DEFAULT_SAMPLE_MB:g}", "min_mbps": f"{DEFAULT_MIN_MBPS:g}"},
                limits=(MIN_SAMPLE_MB, MAX_SAMPLE_MB))


def _describe(cl, topic: str):
    desc = cl.describe_topic(topic)
    return desc, sum(cl.partition(topic, p).size_bytes for p in range(len(desc.partitions)))


@routes.get("/topics/{topic}/compression")
async def compression_page(request: web.Request) -> web.Response:
    topic = path_name(request, "topic")
    require(request, "DESCRIBE", "TOPIC", topic)
    return await _page(request, topic, applied="applied" in request.query)


@routes.post("/topics/{topic}/compression")
async def start_advisor(request: web.Request) -> web.Response:
    topic = path_name(request, "topic")
    require(request, "ALTER", "TOPIC", topic)  # minutes of CPU on the broker's machine
    c = console(request)
    form = {k: str(v) for k, v in (await request.post()).items() if k != "csrf"}
    try:
        sample_mb = decimal(form.get("sample_mb"), "sample_mb", MIN_SAMPLE_MB, MAX_SAMPLE_MB, "sample size (MB)")
        min_mbps = decimal(form.get("min_mbps"), "min_mbps", 0, 1e6, "minimum compression speed (MB/s)")
    except FieldError as exc:
        return await _page(request, topic, 400, str(exc), form)
    raise await start_job(request, f"Compression advice for {topic}", JOB_TEMPLATE,
                          lambda job: run_advisor(c.cl, topic, int(sample_mb * MB), min_mbps, job), topic=topic)


@routes.post("/topics/{topic}/compression/apply")
async def apply_advice(request: web.Request) -> web.Response:
    """Set compression.type (and a level) as the advice says; the topic's config rules check the values."""
    topic = path_name(request, "topic")
    require(request, "ALTER_CONFIGS", "TOPIC", topic)
    c = console(request)
    form = await request.post()
    codec = str(form.get("compression.type", ""))
    settings = {"compression.type": codec}
    level = str(form.get("level", "")).strip()
    if level and codec not in ("uncompressed", "producer"):
        settings[f"compression.{codec}.level"] = level
    try:
        await c.run(c.cl.alter_topic_config, topic, settings, None)
    except CompactLogError as exc:
        return await _page(request, topic, 400, str(exc))
    raise see_other(topic_url(topic, "compression") + "?applied")


@routes.post("/topics/{topic}/compression/recompress")
async def start_recompression(request: web.Request) -> web.Response:
    """Rewrite the topic's closed segments with a codec (the active one keeps taking appends)."""
    topic = path_name(request, "topic")
    require(request, "ALTER", "TOPIC", topic)
    c = console(request)
    form = await request.post()
    codec_name = str(form.get("codec", ""))
    level_text = str(form.get("level", "")).strip()
    try:
        level = optional_whole_number(level_text, "level", -INT_MAX - 1, INT_MAX, "compression level")
        check_level(codec_from_name(codec_name), level)
    except (CompactLogError, FieldError) as exc:
        return await _page(request, topic, 400, str(exc))
    raise await start_job(request, f"Recompression of {topic} to {codec_name}", RECOMPRESS_TEMPLATE,
                          lambda job: run_recompression(c.cl, topic, codec_name, level, job), topic=topic)
