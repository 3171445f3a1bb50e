"""The compression advisor on Spark: every trial of ``compactlog.advisor`` as one Spark task.

Each task reads the sample itself and runs on one core, so speeds are per core, and a cluster measures
its own CPUs. The sample, the trials and the recommendation are the advisor's (``compactlog.advisor``,
which the web console runs in-process); this module adds the Spark job and the chart of the CLI's
``spark advise``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..advisor import TRIALS, Advice, Trial, plan_sample, read_sample, recommend, run_trial
from ..records.codecs import Codec


def advise(spark, cl, topic: str, sample_bytes: int = 16 << 20, min_compress_mbps: float = 50.0,
           trials: Sequence[tuple[Codec, int | None]] = TRIALS, progress: Callable[[str], None] = print) -> Advice | None:
    """Measure ``trials`` on a sample of ``topic``; None when the topic holds no records yet."""
    from .progress import spark_progress

    plan = plan_sample(cl, topic, sample_bytes)
    places = plan.places
    if not places:
        progress(f"{topic}: no records to sample")
        return None
    path = str(cl.data_dir)
    progress(f"{topic}: measuring {len(trials)} codec/level trials on a sample of up to "
             f"{sample_bytes / 2**20:.0f} MiB from {len(places)} place(s), on {spark.sparkContext.master}")

    def measure(trial: tuple[int, int | None]) -> tuple[Trial, int]:
        payloads, stored = read_sample(path, topic, places)
        return run_trial(payloads, Codec(trial[0]), trial[1]), stored

    with spark_progress(spark, "advise"):
        results = spark.sparkContext.parallelize([(int(c), lv) for c, lv in trials], len(trials)).map(measure).collect()
    measured = [t for t, _ in results]
    return Advice(measured, results[0][1], plan.topic_bytes, recommend(measured, min_compress_mbps), min_compress_mbps)


def write_chart(advice: Advice, path: str, title: str) -> None:
    """Ratio against compression speed, one point per trial, the recommendation marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5), dpi=110)
    colors = {Codec.NONE: "#888888", Codec.GZIP: "#1f77b4", Codec.SNAPPY: "#2ca02c", Codec.LZ4: "#ff7f0e",
              Codec.ZSTD: "#9467bd"}
    for t in advice.trials:
        if t.codec is Codec.NONE:
            ax.axhline(1.0, color=colors[t.codec], linewidth=1)
            continue
        ax.scatter(t.compress_mbps, t.ratio, s=60, color=colors[t.codec], zorder=3,
                   edgecolors="black" if t is advice.choice else "none", linewidths=2)
        ax.annotate(t.name, (t.compress_mbps, t.ratio), textcoords="offset points", xytext=(5, 4), fontsize=8)
    ax.axvline(advice.min_compress_mbps, color="#cc3333", linestyle="--", linewidth=1)
    ax.text(advice.min_compress_mbps, ax.get_ylim()[1], f" {advice.min_compress_mbps:g} MB/s", color="#cc3333",
            va="top", fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("compression speed per core (MB/s of records, log scale)")
    ax.set_ylabel("compression ratio (records / stored bytes)")
    ax.set_title(f"{title}\nrecommended: {advice.config} "
                 f"({100 * advice.saving_fraction:.1f}% smaller than now)", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)
