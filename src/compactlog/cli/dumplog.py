"""``dump-log``: kafka-dump-log for ``.log``, ``.index`` and ``.timeindex`` files."""

from __future__ import annotations

import re
from pathlib import Path

import click

from ..errors import CompactLogError, CorruptRecordError
from ..records.batch import HEADER_SIZE_UP_TO_MAGIC, LOG_OVERHEAD, MAGIC, RecordBatch
from ..storage import files
from ..storage.index import OffsetIndex, TimeIndex
from ..storage.segment import LogSegment, SegmentParams
from .common import kafka_errors


def _fmt_bytes(b: bytes | None) -> str:
    return "null" if b is None else b.decode("utf-8", errors="backslashreplace")


def batch_line(position: int, batch: RecordBatch) -> str:
    """One batch the way kafka-dump-log prints it."""
    seq = batch.base_sequence
    last_seq = -1 if seq < 0 else (seq + batch.last_offset_delta) % (2**31)
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


def dump_log_file(path: Path, print_data: bool, echo=click.echo) -> None:
    seg = LogSegment(path.parent, files.base_offset_of(path), SegmentParams(), temp_suffix=path.name.split(files.LOG_SUFFIX, 1)[1],
                     read_only=True)
    try:
        echo(f"Log starting offset: {seg.base_offset}")
        end = 0
        for position, batch in _batches(seg):
            echo(batch_line(position, batch))
            end = position + batch.size
            if print_data:
                try:
                    for rec in batch.records():
                        ts_name = "LogAppendTime" if rec.timestamp_type else "CreateTime"
                        hdrs = ",".join(k for k, _ in rec.headers)
                        echo(
                            f"| offset: {rec.offset} {ts_name}: {rec.timestamp} keySize: {-1 if rec.key is None else len(rec.key)} "
                            f"valueSize: {-1 if rec.value is None else len(rec.value)} sequence: -1 headerKeys: [{hdrs}] "
                            f"key: {_fmt_bytes(rec.key)} payload: {_fmt_bytes(rec.value)}"
                        )
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
    it = seg.batches(0)
    try:
        first = next(it, None)
    except CorruptRecordError as exc:
        raise _not_a_segment(str(exc)) from None
    if first is None:
        return
    if first[1].magic != MAGIC:
        raise _not_a_segment(f"magic byte {first[1].magic}, and Kafka's record batches have {MAGIC}")
    yield first
    yield from it


def _short_first_batch(seg: LogSegment) -> str:
    if seg.size < HEADER_SIZE_UP_TO_MAGIC:
        return f"the file's {seg.size} bytes are fewer than a batch header's {HEADER_SIZE_UP_TO_MAGIC}"
    claimed = int.from_bytes(seg.read_bytes(8, 4), "big", signed=True) + LOG_OVERHEAD
    return f"the first claims {claimed} bytes, the file has {seg.size}"


def dump_index_file(path: Path, echo=click.echo) -> None:
    base = files.base_offset_of(path)
    if path.name.endswith(files.TIME_INDEX_SUFFIX):
        idx = TimeIndex(path, base, 1 << 62)
        for e in idx.view():
            echo(f"timestamp: {int(e['timestamp'])} offset: {base + int(e['offset'])}")
    else:
        idx = OffsetIndex(path, base, 1 << 62)
        for e in idx.view():
            echo(f"offset: {base + int(e['offset'])} position: {int(e['position'])}")


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
        entry = (TimeIndex if path.name.endswith(files.TIME_INDEX_SUFFIX) else OffsetIndex).dtype.itemsize
        size = path.stat().st_size
        if size % entry:
            raise click.ClickException(f"{path}: {size} bytes is not a whole number of {entry}-byte index entries "
                                       "(a torn index; the log rebuilds it when the partition is opened)")


@click.command("dump-log")
@click.option("--files", "paths", required=True, help="Comma-separated .log, .index or .timeindex files.")
@click.option("--print-data-log", is_flag=True, help="Print every record, not only batch headers.")
@click.option("--deep-iteration", is_flag=True, help="Same as --print-data-log for v2 batches.")
@kafka_errors
def dump_log(paths, print_data_log, deep_iteration):
    """Print the batches and records of segment files (kafka-dump-log); reads files only, takes no lock.

    Example: compactlog dump-log --files data/prices-0/00000000000000000000.log --print-data-log
    """
    names = [p.strip() for p in paths.split(",") if p.strip()]
    if not names:
        raise click.BadParameter(f"expected a comma-separated list of .log, .index or .timeindex files, got {paths!r}",
                                 param_hint="'--files'")
    for name in names:
        path = Path(name)
        click.echo(f"Dumping {path}")
        check_segment_file(path)
        try:
            if files.LOG_SUFFIX in path.name:
                dump_log_file(path, print_data_log or deep_iteration)
            else:
                dump_index_file(path)
        except CompactLogError as exc:
            raise click.ClickException(f"{path}: {exc}") from None
        except OSError as exc:
            raise click.ClickException(f"{path}: {exc.strerror or exc}") from None
