"""The compression advisor: what each codec and level would do to a topic's stored batches.

A sample of the topic's batches (spread over partitions and segments, :func:`plan_sample`) is
decompressed once; then each trial -- one codec at one level -- compresses every sampled batch's
records section as Kafka would store it (one frame per batch, so small batches pay their framing), and
decompresses it again. :func:`advise_local` runs the trials one by one in the calling thread (the web
console's job thread: no Spark in the broker's process), so speeds are those of one core here; the
Spark job (``compactlog.spark.advise``) runs the same trials as Spark tasks. The recommendation is a
pure rule over the measured trials (:func:`recommend`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from .records.batch import HEADER_SIZE
from .records.codecs import LEVELS, Codec, compress, decompress

# Kafka's codecs at the levels worth comparing: the fast end, Kafka's default and the dense end.
TRIALS: tuple[tuple[Codec, int | None], ...] = (
    (Codec.NONE, None),
    (Codec.GZIP, 1), (Codec.GZIP, 6), (Codec.GZIP, 9),
    (Codec.SNAPPY, None),
    (Codec.LZ4, 1), (Codec.LZ4, 9), (Codec.LZ4, 17),
    (Codec.ZSTD, -1), (Codec.ZSTD, 1), (Codec.ZSTD, 3), (Codec.ZSTD, 9), (Codec.ZSTD, 19),
)
# the level compression.<codec>.level's default compresses at (gzip's -1 is zlib's 6)
DEFAULT_LEVEL = {codec: levels.effective_default for codec, levels in LEVELS.items()}
WINDOW_BYTES = 1 << 20  # contiguous bytes read at each sampled place
MEASURE_SECONDS = 0.2  # advise_local measures a small sample again until this much time went by (at most 5 runs)


@dataclass(frozen=True)
class Trial:
    codec: Codec
    level: int | None
    batches: int
    records_bytes: int  # the sampled records sections, uncompressed
    stored_bytes: int  # what the sample takes on disk with this codec and level (headers included)
    compress_seconds: float
    decompress_seconds: float

    @property
    def name(self) -> str:
        return self.codec.config_name + ("" if self.level is None else f" {self.level}")

    @property
    def ratio(self) -> float:
        return (self.records_bytes + self.batches * HEADER_SIZE) / max(self.stored_bytes, 1)

    @property
    def compress_mbps(self) -> float:
        return self.records_bytes / 1e6 / max(self.compress_seconds, 1e-9)

    @property
    def decompress_mbps(self) -> float:
        return self.records_bytes / 1e6 / max(self.decompress_seconds, 1e-9)


@dataclass(frozen=True)
class Advice:
    trials: list[Trial]
    current_sample_bytes: int  # the sample as it is stored now
    topic_bytes: int
    choice: Trial
    min_compress_mbps: float

    @property
    def saving_fraction(self) -> float:
        return 1 - self.choice.stored_bytes / max(self.current_sample_bytes, 1)

    @property
    def projected_saving_bytes(self) -> int:
        return int(self.topic_bytes * self.saving_fraction)

    @property
    def config(self) -> str:
        """The recommendation as the topic configs to set (``configs --alter --add-config`` words)."""
        return " ".join(f"{k}={v}" for k, v in topic_settings(self.choice).items())


def topic_settings(t: Trial) -> dict[str, str]:
    """The topic configs that store batches as ``t`` does: compression.type (``uncompressed``, the topic
    config's word, for no codec) and the level when it is not the default."""
    out = {"compression.type": "uncompressed" if t.codec is Codec.NONE else t.codec.config_name}
    if t.level is not None and t.level != DEFAULT_LEVEL.get(t.codec):
        out[f"compression.{t.codec.config_name}.level"] = str(t.level)
    return out


def recommend(trials: Sequence[Trial], min_compress_mbps: float) -> Trial:
    """The smallest stored size among trials that compress at least ``min_compress_mbps`` per core
    (falling back to the fastest trial when none does); ties go to the faster compressor.

    Why this rule: storage is what compaction and retention pay for, but producers pay the compression
    (or the broker does, with a topic codec that differs from the producer's), so a codec that cannot
    keep up with the write rate is no saving. Decompression is fast for every codec here, so it does
    not decide."""
    fast = [t for t in trials if t.compress_mbps >= min_compress_mbps]
    if not fast:
        return max(trials, key=lambda t: t.compress_mbps)
    return min(fast, key=lambda t: (t.stored_bytes, -t.compress_mbps))


def sample_places(segments: Sequence[tuple[int, int, int]], sample_bytes: int) -> list[tuple[int, int, int]]:
    """(partition, segment base, offset) places to start reading, spread evenly by size, and at least one
    in every partition that holds records (a small sample of a topic would otherwise measure one
    partition's batches only, whatever the others hold).

    ``segments`` are (partition, base offset, next offset) of non-empty segments, weighted by offsets;
    each place starts a window of :data:`WINDOW_BYTES`."""
    windows = max(1, sample_bytes // WINDOW_BYTES)
    total = sum(nxt - base for _, base, nxt in segments)
    if total <= 0:
        return []
    places = []
    for i in range(windows):
        target = total * (i + 0.5) / windows
        for p, base, nxt in segments:
            if target < nxt - base:
                places.append((p, base, base + int(target)))
                break
            target -= nxt - base
    sampled = {p for p, _, _ in places}
    for p, base, nxt in segments:
        if p not in sampled:
            sampled.add(p)
            places.append((p, base, base + (nxt - base) // 2))
    return sorted(set(places))


def read_sample(path: str, topic: str, places: Sequence[tuple[int, int, int]]) -> tuple[list[bytes], int]:
    """The decompressed records sections of the sampled batches, and their stored size now."""
    from .storage.snapshot import PartitionSnapshot

    payloads: list[bytes] = []
    stored = 0
    seen: set[tuple[int, int]] = set()
    by_partition: dict[int, list[int]] = {}
    for p, _, off in places:
        by_partition.setdefault(p, []).append(off)
    for p, offs in sorted(by_partition.items()):
        with PartitionSnapshot.open(path, topic, p) as snap:
            for off in offs:
                got = 0
                for b in snap.batches(off):
                    if got >= WINDOW_BYTES:
                        break
                    if (p, b.base_offset) in seen or b.is_control:
                        continue
                    seen.add((p, b.base_offset))
                    b.ensure_valid()
                    payloads.append(bytes(b.payload()))
                    stored += b.size
                    got += b.size
    return payloads, stored


def run_trial(payloads: Sequence[bytes], codec: Codec, level: int | None) -> Trial:
    """Compress and decompress every payload as one batch's records section each."""
    t0 = time.perf_counter()
    frames = [compress(codec, p, level) for p in payloads] if codec is not Codec.NONE else list(payloads)
    t1 = time.perf_counter()
    if codec is not Codec.NONE:
        for f in frames:
            decompress(codec, f)
    t2 = time.perf_counter()
    return Trial(codec, level, len(payloads), sum(len(p) for p in payloads),
                 sum(len(f) + HEADER_SIZE for f in frames), t1 - t0, t2 - t1)


@dataclass(frozen=True)
class SamplePlan:
    """Where to sample a topic and how large it is: the part both advisors share."""

    places: list[tuple[int, int, int]]  # (partition, segment base, offset) from :func:`sample_places`
    topic_bytes: int


def plan_sample(cl, topic: str, sample_bytes: int) -> SamplePlan:
    """The topic's non-empty segments, spread into sample places (reads segment sizes only)."""
    n = cl.manager.partitions_for(topic)
    segments = []
    topic_bytes = 0
    for p in range(n):
        lg = cl.log(topic, p)
        topic_bytes += lg.size
        segs = lg.segments
        for i, s in enumerate(segs):
            nxt = segs[i + 1].base_offset if i + 1 < len(segs) else lg.log_end_offset
            if s.size and nxt > s.base_offset:
                segments.append((p, s.base_offset, nxt))
    return SamplePlan(sample_places(segments, sample_bytes), topic_bytes)


def advise_local(cl, topic: str, sample_bytes: int = 16 << 20, min_compress_mbps: float = 50.0,
                 trials: Sequence[tuple[Codec, int | None]] = TRIALS,
                 progress: Callable[[str, float], None] = lambda _m, _f: None) -> Advice | None:
    """The same measurement without Spark: the sample is read once and the trials run one after the
    other in the calling thread (a server's job thread), so speeds are those of one core here.
    ``progress(message, fraction done)`` hears of each trial; None when the topic holds no records."""
    plan = plan_sample(cl, topic, sample_bytes)
    if not plan.places:
        progress(f"{topic}: no records to sample", 1.0)
        return None
    progress(f"{topic}: reading a sample of up to {sample_bytes / 1e6:,.1f} MB from {len(plan.places)} place(s)", 0.0)
    payloads, stored = read_sample(str(cl.manager.dir), topic, plan.places)
    measured = []
    for i, (codec, level) in enumerate(trials):
        name = codec.config_name + ("" if level is None else f" {level}")
        progress(f"{topic}: trial {i + 1} of {len(trials)}: {name}", i / len(trials))
        measured.append(_fastest_of(payloads, codec, level))
    progress(f"{topic}: {len(trials)} trials measured", 1.0)
    return Advice(measured, stored, plan.topic_bytes, recommend(measured, min_compress_mbps), min_compress_mbps)


def _fastest_of(payloads: Sequence[bytes], codec: Codec, level: int | None) -> Trial:
    """The fastest of a few runs of one trial: a sample of a few batches compresses in microseconds,
    where the first call's set-up and the clock's grain would decide the speed."""
    best = run_trial(payloads, codec, level)
    spent = best.compress_seconds + best.decompress_seconds
    for _ in range(4):
        if spent >= MEASURE_SECONDS:
            break
        t = run_trial(payloads, codec, level)
        spent += t.compress_seconds + t.decompress_seconds
        best = replace(best, compress_seconds=min(best.compress_seconds, t.compress_seconds),
                       decompress_seconds=min(best.decompress_seconds, t.decompress_seconds))
    return best
