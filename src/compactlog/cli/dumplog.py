"""``dump-log``: kafka-dump-log for ``.log``, ``.index`` and ``.timeindex`` files.

What it prints follows Kafka's ``DumpLogSegments`` (4.0):

* a ``.log``: ``Log starting offset: N``, then one line per batch. With ``--deep-iteration`` one
  ``| offset: ...`` line per record too (its sequence is the batch's base sequence plus the record's
  offset delta, -1 when the batch has none); ``--print-data-log`` (which implies it) ends each line with
  ``key: ...`` and ``payload: ...``, each left out when null, decoded as UTF-8 with replacement
  characters, and neither for a control batch.
* an ``.index``: ``<file> is empty.``, or one line per entry, each checked against the batch at its
  position in the ``.log`` beside it; a ``.timeindex``: one line per entry, each checked against the
  batch holding its offset.
* after every file, on standard error, what the checks found: ``Mismatches in :<file>`` (an index entry
  whose offset is not the last offset of the batch at its position, as the entries of a multi-batch
  append are, which the cleaner's writes often are), Kafka's three time-index findings, and
  ``Non-consecutive offsets in <file>`` (with deep iteration: records whose offsets leave a gap, as
  cleaning leaves them). As in Kafka, the index mismatches and the gaps are listed last found first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..errors import CompactLogError, CorruptRecordError
from ..storage import files
from .common import kafka_errors

if TYPE_CHECKING:
    from ..records.batch import RecordBatch
    from ..storage.index import OffsetIndex
    from ..storage.segment import LogSegment

# The record format, the segment and the indexes (numpy under them) are imported by the functions that
# read files, so that listing the commands (compactlog --help) does not load them.

INT_MAX = 2**31 - 1
NO_TIMESTAMP = -1


def increment_sequence(sequence: int, increment: int) -> int:
    """A producer sequence ``increment`` further on, wrapping past Integer.MAX_VALUE to 0 as Kafka's does."""
    if sequence > INT_MAX - increment:
        return increment - (INT_MAX - sequence) - 1
    return sequence + increment


def _text(b: bytes) -> str:
    """Bytes as Kafka's StringDecoder shows them: UTF-8, a malformed sequence read as U+FFFD."""
    return b.decode("utf-8", errors="replace")


def batch_line(position: int, batch: RecordBatch) -> str:
    """One batch the way kafka-dump-log prints it."""
    seq = batch.base_sequence
    last_seq = -1 if seq < 0 else increment_sequence(seq, batch.last_offset_delta)
    horizon = f"OptionalLong[{batch.delete_horizon_ms}]" if batch.has_delete_horizon else "OptionalLong.empty"
    ts_name = "LogAppendTime" if batch.timestamp_type else "CreateTime"
    return (
        f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} count: {batch.record_count} "
        f"baseSequence: {seq} lastSequence: {last_seq} producerId: {batch.producer_id} "
        f"producerEpoch: {batch.producer_epoch} partitionLeaderEpoch: {batch.partition_leader_epoch} "
        f"isTransactional: {str(batch.is_transactional).lower()} isControl: {str(batch.is_control).lower()} "
        f"deleteHorizonMs: {horizon} position: {position} {ts_name}: {batch.max_timestamp} size: {batch.size} "
        f"magic: {batch.magic} compresscodec: {batch.codec.config_name} crc: {batch.crc} isvalid: {str(batch.is_valid()).lower()}"
    )


def record_line(batch: RecordBatch, rec, print_data: bool) -> str:
    """One record the way kafka-dump-log prints it with --deep-iteration (and --print-data-log)."""
    ts_name = "LogAppendTime" if batch.timestamp_type else "CreateTime"
    seq = -1 if batch.base_sequence < 0 else increment_sequence(batch.base_sequence, rec.offset - batch.base_offset)
    line = (f"| offset: {rec.offset} {ts_name}: {rec.timestamp} keySize: {-1 if rec.key is None else len(rec.key)} "
            f"valueSize: {-1 if rec.value is None else len(rec.value)} sequence: {seq} "
            f"headerKeys: [{','.join(k for k, _ in rec.headers)}]")
    if print_data and not batch.is_control:
        if rec.key is not None:
            line += f" key: {_text(rec.key)}"
        if rec.value is not None:
            line += f" payload: {_text(rec.value)}"
    return line


@dataclass
class DumpFindings:
    """What the checks found, printed on standard error after every file, in Kafka's order and words.
    Keys are the files' absolute paths; the pairs are (index or earlier, log or later) values."""

    index_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_out_of_order: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_not_found: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    non_consecutive: dict[str, list[tuple[int, int]]] = field(default_factory=dict)

    @staticmethod
    def add(found: dict[str, list[tuple[int, int]]], path: Path, pair: tuple[int, int]) -> None:
        found.setdefault(str(path.absolute()), []).append(pair)

    def lines(self) -> list[str]:
        out = []
        for name, pairs in self.index_mismatches.items():
            out.append(f"Mismatches in :{name}")
            out += [f"  Index offset: {i}, log offset: {lg}" for i, lg in reversed(pairs)]
        for name, pairs in self.time_mismatches.items():
            out.append(f"Found timestamp mismatch in :{name}")
            out += [f"  Index timestamp: {i}, log timestamp: {lg}" for i, lg in pairs]
        for name, pairs in self.time_out_of_order.items():
            out.append(f"Found out of order timestamp in :{name}")
            out += [f"  Index timestamp: {i}, Previously indexed timestamp: {p}" for i, p in pairs]
        for pairs in self.time_not_found.values():
            out.append("The following indexed offsets are not found in the log.")
            out += [f"Indexed offset: {i}, found log offset: {lg}" for i, lg in pairs]
        for name, pairs in self.non_consecutive.items():
            out.append(f"Non-consecutive offsets in {name}")
            out += [f"  {a} is followed by {b}" for a, b in reversed(pairs)]
        return out


def dump_log_file(path: Path, deep: bool, print_data: bool, findings: DumpFindings | None = None,
                  echo=click.echo) -> None:
    """Print one ``.log``: its batches, with ``deep`` its records, with ``print_data`` their keys and values."""
    from ..storage.segment import LogSegment, SegmentParams

    findings = DumpFindings() if findings is None else findings
    seg = LogSegment(path.parent, files.base_offset_of(path), SegmentParams(), temp_suffix=path.name.split(files.LOG_SUFFIX, 1)[1],
                     read_only=True)
    try:
        echo(f"Log starting offset: {seg.base_offset}")
        end = 0
        last_offset = -1
        for position, batch in _batches(seg):
            echo(batch_line(position, batch))
            end = position + batch.size
            if deep:
                try:
                    for rec in batch.records():
                        if last_offset >= 0 and rec.offset != last_offset + 1:
                            findings.add(findings.non_consecutive, path, (last_offset, rec.offset))
                        last_offset = rec.offset
                        echo(record_line(batch, rec, print_data))
                except CompactLogError as exc:
                    echo(f"| records unreadable: {exc}")
        if end < seg.size:
            if end == 0:  # not one batch: this is no segment, whatever its name says
                raise CorruptRecordError(f"no whole record batch: {_short_first_batch(seg)} "
                                         "(not a log segment, or one torn inside its first batch)")
            echo(f"Found {seg.size - end} invalid bytes at the end of {path.name}")
    finally:
        seg.close_handlers()


def _not_a_segment(why: str) -> CorruptRecordError:
    return CorruptRecordError(f"not a Kafka log segment: no record batch at position 0 ({why})")


def _batches(seg: LogSegment):
    """The segment's batches; a first one that cannot be a batch means the file is not a segment."""
    from ..records.batch import MAGIC

    head = seg.read_bytes(0, 17)
    length = int.from_bytes(head[8:12], "big", signed=True) if len(head) == 17 else -1
    whole = 49 <= length and 12 + length <= seg.size  # a batch that could be one, but for its magic
    if whole and head[16] != MAGIC:  # before the walk, which would only call it damage
        raise _not_a_segment(f"magic byte {head[16]}, and Kafka's record batches have {MAGIC}")
    it = seg.batches(0)
    try:
        first = next(it, None)
    except CorruptRecordError as exc:
        raise _not_a_segment(str(exc).split(": ", 1)[-1]) from None  # (the file is named already)
    if first is None:
        return
    if first[1].magic != MAGIC:
        raise _not_a_segment(f"magic byte {first[1].magic}, and Kafka's record batches have {MAGIC}")
    yield first
    yield from it


def _short_first_batch(seg: LogSegment) -> str:
    from ..records.batch import HEADER_SIZE_UP_TO_MAGIC, LOG_OVERHEAD, batch_size_at

    if seg.size < HEADER_SIZE_UP_TO_MAGIC:
        return f"the file's {seg.size} bytes are fewer than a batch header's {HEADER_SIZE_UP_TO_MAGIC}"
    claimed = batch_size_at(seg.read_bytes(0, LOG_OVERHEAD))
    return f"the first claims {claimed} bytes, the file has {seg.size}"


def _log_beside(path: Path, base: int) -> LogSegment | None:
    """The ``.log`` an index belongs to, read-only; None when there is none (the entries are then
    printed unchecked, where Kafka's tool fails)."""
    from ..storage.segment import LogSegment, SegmentParams

    if not files.segment_file(path.parent, base, files.LOG_SUFFIX).is_file():
        return None
    return LogSegment(path.parent, base, SegmentParams(), read_only=True)


def _last_offset_at(seg: LogSegment, position: int) -> int:
    """The last offset of the batch whose header starts at ``position``; -1 when there is none."""
    from ..records.batch import HEADER_SIZE, MAGIC, RecordBatch

    header = seg.read_bytes(position, HEADER_SIZE) if 0 <= position < seg.size else b""
    if len(header) < HEADER_SIZE:
        return -1
    batch = RecordBatch(header)
    return batch.last_offset if batch.magic == MAGIC else -1


def dump_index_file(path: Path, findings: DumpFindings | None = None, echo=click.echo) -> None:
    """Print one ``.index`` or ``.timeindex`` and check it against its ``.log``."""
    findings = DumpFindings() if findings is None else findings
    base = files.base_offset_of(path)
    seg = _log_beside(path, base)
    try:
        if path.name.endswith(files.TIME_INDEX_SUFFIX):
            _dump_time_index(path, base, seg, findings, echo)
        else:
            _dump_offset_index(path, base, seg, findings, echo)
    finally:
        if seg is not None:
            seg.close_handlers()


def _dump_offset_index(path: Path, base: int, seg: LogSegment | None, findings: DumpFindings, echo) -> None:
    from ..storage.index import OffsetIndex

    entries = OffsetIndex(path, base, 1 << 62, read_only=True).view()
    if not len(entries):
        echo(f"{path} is empty.")
        return
    for i, e in enumerate(entries):
        offset, position = base + int(e["offset"]), int(e["position"])
        if i > 0 and offset == base:  # the zeros of a preallocated index that was never trimmed
            return
        if seg is not None:
            found = _last_offset_at(seg, position)
            if found != offset:
                findings.add(findings.index_mismatches, path, (offset, found))
        echo(f"offset: {offset} position: {position}")


def _dump_time_index(path: Path, base: int, seg: LogSegment | None, findings: DumpFindings, echo) -> None:
    from ..storage.index import TimeIndex

    entries = TimeIndex(path, base, 1 << 62, read_only=True).view()
    offsets = _offset_index_beside(path, base)
    previous = NO_TIMESTAMP
    for i, e in enumerate(entries):
        timestamp, offset = int(e["timestamp"]), base + int(e["offset"])
        if i > 0 and offset == base:
            return
        if seg is not None:
            _check_time_entry(path, seg, offsets, timestamp, offset, previous, findings)
        echo(f"timestamp: {timestamp} offset: {offset}")
        previous = timestamp


def _offset_index_beside(path: Path, base: int) -> OffsetIndex | None:
    from ..storage.index import OffsetIndex

    index = files.segment_file(path.parent, base, files.INDEX_SUFFIX)
    try:
        return OffsetIndex(index, base, 1 << 62, read_only=True) if index.is_file() else None
    except CompactLogError:  # a torn index only loses the shortcut
        return None


def _check_time_entry(path: Path, seg: LogSegment, offsets: OffsetIndex | None, timestamp: int, offset: int,
                      previous: int, findings: DumpFindings) -> None:
    """Kafka's checks of a time-index entry: the batch holding its offset ends there, its records'
    largest timestamp is the entry's, and entries' timestamps rise."""
    start = offsets.lookup(offset)[1] if offsets is not None else 0
    batch = next((b for _, b in seg.batches(start) if b.last_offset >= offset), None)
    if batch is None:
        findings.add(findings.time_not_found, path, (offset, -1))
        return
    if batch.last_offset != offset:
        findings.add(findings.time_not_found, path, (offset, batch.last_offset))
        return
    largest = max((r.timestamp for r in batch.records()), default=NO_TIMESTAMP)
    if largest != timestamp:
        findings.add(findings.time_mismatches, path, (timestamp, largest))
    if previous >= timestamp:
        findings.add(findings.time_out_of_order, path, (timestamp, previous))


def check_segment_file(path: Path) -> None:
    """Refuse, before reading a byte, what cannot be a segment file: ``Error: <path>: why``."""
    if not path.exists():
        raise click.ClickException(f"{path} does not exist")
    if path.is_dir():
        raise click.ClickException(f"{path} is a directory; --files takes .log, .index and .timeindex files")
    is_index = path.name.endswith((files.INDEX_SUFFIX, files.TIME_INDEX_SUFFIX))
    if files.LOG_SUFFIX not in path.name and not is_index:
        raise click.ClickException(f"{path.name} is not a .log, .index or .timeindex file")
    if not re.fullmatch(r"[0-9]+", path.name.split(".", 1)[0]):
        raise click.ClickException(f"{path}: a segment file's name starts with its base offset "
                                   f"(as in 00000000000000000000{path.name[path.name.index('.'):]})")
    if is_index:
        from ..storage.index import OffsetIndex, TimeIndex

        entry = (TimeIndex if path.name.endswith(files.TIME_INDEX_SUFFIX) else OffsetIndex).dtype.itemsize
        size = path.stat().st_size
        if size % entry:
            raise click.ClickException(f"{path}: {size} bytes is not a whole number of {entry}-byte index entries "
                                       "(a torn index; the log rebuilds it when the partition is opened)")


@click.command("dump-log")
@click.option("--files", "paths", required=True, help="Comma-separated .log, .index or .timeindex files.")
@click.option("--print-data-log", is_flag=True, help="Print every record with its key and value (implies --deep-iteration).")
@click.option("--deep-iteration", is_flag=True, help="Print every record's metadata, not only batch headers.")
@kafka_errors
def dump_log(paths, print_data_log, deep_iteration):
    """Print the batches and records of segment files (kafka-dump-log); reads files only, takes no lock.

    Index entries that do not match the log, and record offsets that leave gaps (with --deep-iteration),
    are reported on standard error at the end, as kafka-dump-log reports them.

    Example: compactlog dump-log --files data/prices-0/00000000000000000000.log --print-data-log
    """
    names = [p.strip() for p in paths.split(",") if p.strip()]
    if not names:
        raise click.BadParameter(f"expected a comma-separated list of .log, .index or .timeindex files, got {paths!r}",
                                 param_hint="'--files'")
    findings = DumpFindings()
    try:
        for name in names:
            path = Path(name)
            click.echo(f"Dumping {path}")
            check_segment_file(path)
            try:
                if files.LOG_SUFFIX in path.name:
                    dump_log_file(path, deep_iteration or print_data_log, print_data_log, findings)
                else:
                    dump_index_file(path, findings)
            except CompactLogError as exc:
                raise click.ClickException(f"{path}: {exc}") from None
            except OSError as exc:
                raise click.ClickException(f"{path}: {exc.strerror or exc}") from None
    finally:  # what was found so far is reported even when a later file fails
        for line in findings.lines():
            click.echo(line, err=True)
