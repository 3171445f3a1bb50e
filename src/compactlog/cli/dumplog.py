"""``dump-log``: kafka-dump-log for ``.log``, ``.index`` and ``.timeindex`` files."""

from __future__ import annotations

from pathlib import Path

import click

from ..errors import CompactLogError
from ..records.batch import RecordBatch
from ..storage import files
from ..storage.index import OffsetIndex, TimeIndex
from ..storage.segment import LogSegment, SegmentParams


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
        for position, batch in seg.batches(0):
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
            echo(f"Found {seg.size - end} invalid bytes at the end of {path.name}")
    finally:
        seg.close_handlers()


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


@click.command("dump-log")
@click.option("--files", "paths", required=True, help="Comma-separated .log, .index or .timeindex files.")
@click.option("--print-data-log", is_flag=True, help="Print every record, not only batch headers.")
@click.option("--deep-iteration", is_flag=True, help="Same as --print-data-log for v2 batches.")
def dump_log(paths, print_data_log, deep_iteration):
    """Print the batches and records of segment files (kafka-dump-log); reads files only, takes no lock.

    Example: compactlog dump-log --files data/prices-0/00000000000000000000.log --print-data-log
    """
    for name in [p for p in paths.split(",") if p]:
        path = Path(name)
        click.echo(f"Dumping {path}")
        if not path.exists():
            raise click.ClickException(f"{path} does not exist")
        try:
            if files.LOG_SUFFIX in path.name:
                dump_log_file(path, print_data_log or deep_iteration)
            elif path.name.endswith((files.INDEX_SUFFIX, files.TIME_INDEX_SUFFIX)):
                dump_index_file(path)
            else:
                raise click.ClickException(f"{path.name} is not a .log, .index or .timeindex file")
        except (CompactLogError, ValueError) as exc:
            raise click.ClickException(f"{path}: {exc}") from None
