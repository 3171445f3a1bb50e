"""Recompression of stored history to another codec, one Spark task per closed segment.

The plan, the rewrite of each segment and the crash-safe swap are ``compactlog.recompression``'s (the
web console runs them in-process); this module runs the rewrites as Spark tasks, read-only on the
executors, while the driver holds the data directory and swaps the results in.
"""

from __future__ import annotations

from typing import Callable

from ..recompression import JobStaging, SegmentResult, SegmentTask, recompress, rewrite_segment
from .progress import spark_progress


def recompress_topic(spark, cl, topic: str, compression: str, level: int | None = None,
                     progress: Callable[[str], None] = print) -> list[SegmentResult]:
    """Rewrite every closed segment of ``topic`` with ``compression`` at ``level``, one Spark task per
    segment; returns per-segment sizes."""
    def on_spark(tasks: list[SegmentTask], staging: JobStaging) -> list[SegmentResult]:
        with spark_progress(spark, "recompression"):
            return spark.sparkContext.parallelize(tasks, len(tasks)).map(lambda t: rewrite_segment(t, staging)).collect()

    return recompress(cl, topic, compression, level, on_spark, f"on {spark.sparkContext.master}", progress)
