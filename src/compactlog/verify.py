"""``compactlog verify``: a read-only scrub of a data directory, and ``--repair``.

Kafka has no such tool; people who run it ask for one after every disk incident. The scrub reads every
segment (each batch's size, CRC, offsets that follow, and its records decoded), every index against
the log, every checkpoint against the logs, the topic metadata and the compacted views, and reports
each problem with its file and position. It writes nothing and takes no lock, so it can run beside the
directory's owner (the active segments' last batches may then be in flight: run it again to tell).

``repair`` fixes what recovery fixes, and only that: it opens the directory with a full recovery (every
segment checked and its indexes rebuilt, a torn tail of a log's last segment cut, leftover files of an
interrupted swap resolved, checkpoints rewritten from the logs, no offset handed out twice). Damage in
the middle of a log is never cut: it stays, reported, with what a person can do about it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .compaction.state import read_state, side_log_dir, side_logs
from .errors import CompactLogError
from .records.columns import Chunk
from .storage import files
from .storage.checkpoint import OffsetCheckpointFile
from .storage.broker_config import BrokerConfig
from .storage.log_config import LogConfig
from .storage.index import CorruptIndexError, OffsetIndex, TimeIndex
from .storage.manager import LogManager
from .storage.topics import kafka_topics, parse_topic, require_data_dir
from .storage.segment import LogSegment

ERROR, WARNING = "error", "warning"
SCAN_BYTES = 4 << 20  # batches decoded together

MIDDLE_ADVICE = ("kept in place: restore the file from a copy, or read around it with check_crcs=False "
                 "(kafka.check.crcs=false in Spark)")


@dataclass(frozen=True)
class Problem:
    """One finding: where (a path relative to the data directory, and a byte position in it), what,
    how bad, and what ``--repair`` does about it."""

    where: str
    position: int | None
    what: str
    severity: str = ERROR
    repair: str = ""

    def __str__(self) -> str:
        at = f" position {self.position}" if self.position is not None else ""
        return f"{self.severity}: {self.where}{at}: {self.what}"


@dataclass
class PartitionSummary:
    name: str
    segments: int = 0
    batches: int = 0
    records: int = 0
    bytes: int = 0
    log_start_offset: int = 0
    log_end_offset: int = 0


@dataclass
class VerifyReport:
    partitions: list[PartitionSummary] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == ERROR]

    @property
    def ok(self) -> bool:
        return not self.errors


OnIo = Callable[[str, str, int], None]


def verify(data_dir: str | os.PathLike[str], topic: str | None = None, on_io: OnIo | None = None,
           broker: BrokerConfig | None = None) -> VerifyReport:
    """Scrub ``data_dir`` (or one topic of it) without writing anything."""
    root = require_data_dir(data_dir)
    broker = broker or BrokerConfig({})
    on_io = on_io or (lambda _where, _phase, _n: None)
    report = VerifyReport()
    add = report.problems.append
    topics: dict[str, dict] = {}
    unreadable: set[str] = set()
    for entry in sorted((root / files.TOPICS_DIR).glob("*" + files.TOPIC_SUFFIX)) if (root / files.TOPICS_DIR).is_dir() else []:
        try:
            meta = parse_topic(entry)
            topics[meta["name"]] = meta
        except CompactLogError as exc:
            unreadable.add(entry.name[: -len(files.TOPIC_SUFFIX)])
            add(Problem(f"{files.TOPICS_DIR}/{entry.name}", None, str(exc), ERROR, "nothing: restore or remove the file"))
    topics.update(kafka_topics(root, set(topics) | unreadable))  # a Kafka broker's folders have no metadata file
    checkpoints = {}
    for name in (files.RECOVERY_POINT_CHECKPOINT, files.LOG_START_OFFSET_CHECKPOINT, files.CLEANER_OFFSET_CHECKPOINT):
        try:
            checkpoints[name] = OffsetCheckpointFile(root / name).read()
        except (OSError, CompactLogError) as exc:
            checkpoints[name] = {}
            add(Problem(name, None, str(exc), ERROR, "rewritten from the logs"))
    dirs = {}
    for child in sorted(root.iterdir()):
        parsed = files.parse_partition_dir(child.name) if child.is_dir() else None
        if parsed is None or child.name.endswith(files.DELETE_SUFFIX):
            continue
        if topic is not None and parsed[0] != topic:
            continue
        if parsed[0] not in topics:  # its metadata file is unreadable (reported above)
            continue
        dirs[parsed] = child
    found = set(kafka_topics(root, set()))  # topics known by their folders: a partition may be on another broker
    for name, meta in sorted(topics.items()):
        if topic is not None and name != topic:
            continue
        for p in range(meta["partitions"]):
            if (name, p) not in dirs:
                add(Problem(files.partition_dir_name(name, p), None, "the partition directory is missing",
                            WARNING if name in found and not files.topic_file(root, name).exists() else ERROR,
                            "created empty"))
    for tp, d in sorted(dirs.items()):
        config = LogConfig(topics[tp[0]].get("config", {}), broker)
        summary = _verify_partition(d, config, {k: v.get(tp) for k, v in checkpoints.items()}, add, on_io)
        report.partitions.append(summary)
    return report


def _verify_partition(d: Path, config: LogConfig, ckpt: dict[str, int | None], add, on_io: OnIo) -> PartitionSummary:
    summary = PartitionSummary(d.name)
    names = sorted(os.listdir(d))
    for n in names:
        if files.is_segment_file(n) and n.endswith((files.CLEANED_SUFFIX, files.SWAP_SUFFIX, files.DELETED_SUFFIX)):
            add(Problem(f"{d.name}/{n}", None, "left by an interrupted cleaning or deletion", WARNING,
                        "finished or removed as the next open does"))
    bases = sorted(files.base_offset_of(n) for n in names if files.is_segment_file(n) and n.endswith(files.LOG_SUFFIX))
    logs = set(bases)
    for n in names:
        if files.is_segment_file(n) and n.endswith((files.INDEX_SUFFIX, files.TIME_INDEX_SUFFIX)) \
                and files.base_offset_of(n) not in logs:
            add(Problem(f"{d.name}/{n}", None, "an index without its .log (the segment was removed?)", WARNING,
                        "removed"))
    cleaned = ckpt[files.CLEANER_OFFSET_CHECKPOINT]
    gaps_below = cleaned if cleaned is not None else (bases[-1] if bases and config.compact else 0)
    summary.segments = len(bases)
    expected = None
    for i, base in enumerate(bases):
        seg = LogSegment(d, base, read_only=True)
        try:
            end = _verify_segment(seg, expected, gaps_below, last=i == len(bases) - 1, summary=summary, add=add,
                                  on_io=on_io)
        finally:
            seg.close_handlers()
        if expected is not None and base < expected:
            add(Problem(seg.file_name, None, f"the segment's base offset {base} overlaps the segment before it, "
                                             f"which ends at offset {expected - 1}", ERROR, MIDDLE_ADVICE))
        elif expected is not None and base > expected and base > gaps_below:
            add(Problem(seg.file_name, None, f"offsets {expected}..{base - 1} are missing before this segment (a "
                                             f"segment file was removed?)", ERROR, "nothing: restore the file"))
        expected = max(end, base)
    summary.log_start_offset = bases[0] if bases else 0
    summary.log_end_offset = expected if expected is not None else 0
    end = summary.log_end_offset
    for name, value in ckpt.items():
        if value is None or value <= end:
            continue
        if name == files.RECOVERY_POINT_CHECKPOINT:
            add(Problem(name, None, f"{d.name}: offsets {end}..{value - 1} were flushed but are missing from the log",
                        ERROR, f"the log goes on at offset {value}, so that no offset is handed out twice"))
        else:
            add(Problem(name, None, f"{d.name}: the entry {value} is beyond the log end offset {end}", ERROR,
                        "ignored and rewritten from the log"))
    if ckpt[files.LOG_START_OFFSET_CHECKPOINT] is not None and ckpt[files.LOG_START_OFFSET_CHECKPOINT] <= end:
        summary.log_start_offset = max(summary.log_start_offset, ckpt[files.LOG_START_OFFSET_CHECKPOINT])
    _verify_compacted_view(d, add, on_io)
    return summary


def _verify_segment(seg: LogSegment, expected: int | None, gaps_below: int, last: bool, summary: PartitionSummary,
                    add, on_io: OnIo) -> int:
    """Scrub one segment; returns the offset after its last sound batch."""
    next_offset = seg.base_offset
    entries: list[tuple[int, int]] = []  # (position, last offset) of every sound batch, for the index check
    group: list[tuple[int, object]] = []
    group_bytes = 0

    def decode(group) -> None:
        try:
            Chunk.scan([b for _, b in group])
        except CompactLogError:
            for position, b in group:  # find which batch, to name its position
                try:
                    b.scan()
                except CompactLogError as exc:
                    add(Problem(seg.file_name, position, f"records cannot be decoded: {exc}", ERROR, MIDDLE_ADVICE))

    start = seg.base_offset if expected is None else max(expected, seg.base_offset)
    for position, batch, damage in seg.audit(0, start, gaps_below):
        if damage is not None:
            if damage.tail and last:
                fix = "cut, as recovery cuts a torn tail"
            elif damage.tail:
                fix = "nothing: only a log's last segment can be torn by a crash; " + MIDDLE_ADVICE
            else:
                fix = MIDDLE_ADVICE
            add(Problem(seg.file_name, damage.position, damage.reason, ERROR, fix))
            continue
        summary.batches += 1
        summary.records += batch.record_count
        summary.bytes += batch.size
        next_offset = batch.next_offset
        entries.append((position, batch.last_offset))
        group.append((position, batch))
        group_bytes += batch.size
        if group_bytes >= SCAN_BYTES:
            decode(group)
            on_io(seg.file_name, "verifying", group_bytes)
            group, group_bytes = [], 0
    if group:
        decode(group)
        on_io(seg.file_name, "verifying", group_bytes)
    _verify_indexes(seg, entries, next_offset, add)
    return next_offset


def _verify_indexes(seg: LogSegment, entries: list[tuple[int, int]], next_offset: int, add) -> None:
    """Every offset index entry must name a sound batch's position and last offset; time index entries
    must rise and point inside the segment."""
    directory, base = seg.directory, seg.base_offset
    path = files.segment_file(directory, base, files.INDEX_SUFFIX)
    where = f"{directory.name}/{path.name}"
    try:
        index = OffsetIndex(path, base, 1 << 62, read_only=True)
        index.sanity_check(seg.size)
    except (CorruptIndexError, OSError) as exc:
        add(Problem(where, None, str(exc), ERROR, "rebuilt from the log"))
    else:
        at = dict(entries)
        for i, e in enumerate(index.view()):
            pos, off = int(e["position"]), base + int(e["offset"])
            if at.get(pos) != off:
                add(Problem(where, i * 8, f"entry ({off}, {pos}) does not point at a batch ending at offset {off}",
                            ERROR, "rebuilt from the log"))
                break
    tpath = files.segment_file(directory, base, files.TIME_INDEX_SUFFIX)
    twhere = f"{directory.name}/{tpath.name}"
    try:
        tindex = TimeIndex(tpath, base, 1 << 62, read_only=True)
        tindex.sanity_check()
    except (CorruptIndexError, OSError) as exc:
        add(Problem(twhere, None, str(exc), ERROR, "rebuilt from the log"))
    else:
        v = tindex.view()
        if len(v) and not base <= base + int(v["offset"][-1]) < max(next_offset, base + 1):
            add(Problem(twhere, (len(v) - 1) * 12, f"the last entry points at offset {base + int(v['offset'][-1])}, "
                                                   f"outside the segment", ERROR, "rebuilt from the log"))


def _verify_compacted_view(d: Path, add, on_io: OnIo) -> None:
    """The published side log of the Pulsar-style compacted view: sound batches in offset order (its
    gaps are the point of it)."""
    try:
        state = read_state(d)
    except (OSError, ValueError, CompactLogError) as exc:
        add(Problem(f"{d.name}/compaction-state", None, f"unreadable: {exc}", ERROR,
                    "nothing: run compact-topic to build the view again"))
        return
    if state is None:
        return
    side = side_log_dir(d, state.side_log)
    if state.side_log not in side_logs(d) or not side.is_dir():
        add(Problem(f"{d.name}/compaction-state", None, f"names side log {state.side_log}, which is missing", ERROR,
                    "nothing: run compact-topic to build the view again"))
        return
    expected = None
    for base in sorted(files.base_offset_of(n) for n in os.listdir(side) if n.endswith(files.LOG_SUFFIX) and files.is_segment_file(n)):
        seg = LogSegment(side, base, read_only=True)
        try:
            for position, batch, damage in seg.audit(0, expected, None):
                if damage is not None:
                    add(Problem(f"{d.name}/{side.name}/{seg.log_path.name}", damage.position, damage.reason, ERROR,
                                "nothing: run compact-topic to build the view again"))
                    continue
                expected = batch.next_offset
            on_io(seg.file_name, "verifying", seg.size)
        finally:
            seg.close_handlers()


def repair(data_dir: str | os.PathLike[str], broker: BrokerConfig | None = None) -> None:
    """Open ``data_dir`` with a full recovery and close it cleanly (see the module docstring); takes
    the directory's lock, so its owner must not be running."""
    require_data_dir(data_dir)
    with LogManager(data_dir, broker, full_recovery=True) as manager:
        _repair_cleaner_checkpoint(manager)


def _repair_cleaner_checkpoint(manager: LogManager) -> None:
    """Keep the cleaner's entries that name a live partition and lie within its log; an unreadable file
    becomes an empty one. A dropped entry only means that partition is cleaned again from its start."""
    path = manager.dir / files.CLEANER_OFFSET_CHECKPOINT
    if not path.exists():
        return
    checkpoint = OffsetCheckpointFile(path)
    try:
        entries = checkpoint.read()
    except (OSError, CompactLogError):
        entries = None
    keep = {tp: offset for tp, offset in (entries or {}).items()
            if tp in manager.logs and manager.logs[tp].log_start_offset <= offset <= manager.logs[tp].log_end_offset}
    if keep != entries:
        checkpoint.write(keep)
