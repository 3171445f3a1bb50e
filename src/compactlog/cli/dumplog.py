"""``dump-log``: kafka-dump-log for ``.log``, ``.index``, ``.timeindex`` and ``.txnindex`` files.

What it prints follows Kafka's ``DumpLogSegments`` (4.0):

* a ``.log``: ``Log starting offset: N``, then one line per batch. With ``--deep-iteration`` one
  ``| offset: ...`` line per record too (its sequence is the batch's base sequence plus the record's
  offset delta, -1 when the batch has none); ``--print-data-log`` (which implies it) ends each line with
  ``key: ...`` and ``payload: ...``, each left out when null, decoded as UTF-8 with replacement
  characters, and neither for a control batch. A control record's line ends instead with
  ``endTxnMarker: COMMIT coordinatorEpoch: N`` (or ABORT) for a transaction's marker, ``controlType:
  NAME(id)`` for any other type.
* an ``.index``: ``<file> is empty.``, or one line per entry, each checked against the batch at its
  position in the ``.log`` beside it; a ``.timeindex``: one line per entry, each checked against the
  batch holding its offset; a ``.txnindex``: ``version: 0 producerId: ... firstOffset: ... lastOffset: ...
  lastStableOffset: ...`` per aborted transaction (and, where Kafka's tool says nothing, ``Found N invalid
  bytes at the end of <file>`` for a torn last entry, as for a ``.log``).
* after every file, on standard error, what the checks found: ``Mismatches in :<file>`` (an index entry
  whose offset is not the last offset of the batch at its position, as the entries of a multi-batch
  append are, which the cleaner's writes often are), Kafka's three time-index findings, and
  ``Non-consecutive offsets in <file>`` (with deep iteration: records whose offsets leave a gap, as
  cleaning leaves them). As in Kafka, the index mismatches and the gaps are listed last found first.

Kafka 3.7's other flags are taken as it takes them: ``--skip-record-metadata`` (a record's line holds
only ``| key: ...`` and `` payload: ...``), ``--max-bytes`` (only the batches within the first N bytes of a
``.log``, and then no word about a torn tail), ``--max-message-size`` (the largest batch an ``.index``
entry may point at), ``--verify-index-only`` (the checks without the entries), ``--index-sanity-check``
(Kafka's start-up check of an index, in its words), ``--key-decoder-class`` / ``--value-decoder-class``
(Kafka's ``StringDecoder`` only) and the coordinators' decoders, ``--offsets-decoder`` and
``--transaction-log-decoder`` (``dumplog_parsers.py``); any decoder option prints the data.

The files are read, and the entries checked, by ``compactlog.dump_log``; this module prints.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..dump_log import (
    INDEX,
    LOG,
    TIME_INDEX,
    TXN_INDEX,
    CorruptIndexFoundError,
    DumpFindings,
    NotASegmentFileError,
    RecordParseError,
    check_segment_file,
    index_sanity_check,
    offset_index_entries,
    open_log_file,
    time_index_entries,
    txn_index_entries,
)
from ..errors import CompactLogError
from .common import INT_MAX, Number, kafka_errors, shown

if TYPE_CHECKING:
    from ..records.batch import RecordBatch

DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024  # Kafka's default for --max-message-size
STRING_DECODER = "kafka.serializer.StringDecoder"  # the one --key/--value-decoder-class there is here



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


def string_decoder(rec) -> tuple[str | None, str | None]:
    """Kafka's default parser (``kafka.serializer.StringDecoder`` for key and value): each as text, None
    when null."""
    return (None if rec.key is None else _text(rec.key)), (None if rec.value is None else _text(rec.value))


def record_line(batch: RecordBatch, rec, print_data: bool, parser=string_decoder, skip_metadata: bool = False) -> str:
    """One record the way kafka-dump-log prints it with --deep-iteration (and --print-data-log).

    As Kafka assembles it: without ``skip_metadata`` the metadata (and a control record's part), then,
    for a data record with ``print_data``, `` key: ...`` and `` payload: ...`` as ``parser`` gives them.
    With ``skip_metadata`` the line starts ``| key: ...``; a record without a key then starts with
    `` payload: ...`` and a control record's line is empty, as in Kafka."""
    prefix, line = "| ", ""
    if not skip_metadata:
        ts_name = "LogAppendTime" if batch.timestamp_type else "CreateTime"
        seq = -1 if batch.base_sequence < 0 else increment_sequence(batch.base_sequence, rec.offset - batch.base_offset)
        line = (f"| offset: {rec.offset} {ts_name}: {rec.timestamp} "
                f"keySize: {-1 if rec.key is None else len(rec.key)} "
                f"valueSize: {-1 if rec.value is None else len(rec.value)} sequence: {seq} "
                f"headerKeys: [{','.join(k for k, _ in rec.headers)}]")
        prefix = " "
        if batch.is_control:
            line += control_part(rec.key, rec.value)
    if print_data and not batch.is_control:
        key, payload = parser(rec)
        if key is not None:
            line += f"{prefix}key: {key}"
        if payload is not None:
            line += f" payload: {payload}"
    return line


def control_part(key: bytes | None, value: bytes | None) -> str:
    """What kafka-dump-log adds to a control record's line: ``endTxnMarker: COMMIT coordinatorEpoch: N``
    for a marker, ``controlType: NAME(id)`` for any other type (UNKNOWN for one Kafka does not know)."""
    from ..records.control import parse_control_record

    try:
        control = parse_control_record(key, value)
    except CompactLogError as exc:  # Kafka's tool stops with a stack trace here; this line names the damage
        return f" control record unreadable: {exc}"
    if control.is_end_txn_marker:
        return f" endTxnMarker: {control.type_name} coordinatorEpoch: {control.coordinator_epoch}"
    return f" controlType: {control.type_name}({control.type_id})"


def dump_log_file(path: Path, deep: bool, print_data: bool, findings: DumpFindings | None = None,
                  echo=click.echo, parser=string_decoder, skip_metadata: bool = False, max_bytes: int = INT_MAX) -> None:
    """Print one ``.log``: its batches, with ``deep`` its records, with ``print_data`` their keys and values
    (as ``parser`` reads them). Only the batches that end within the first ``max_bytes`` bytes are read;
    the bytes after the last whole batch are reported only when the whole file was read, as Kafka does."""
    findings = DumpFindings() if findings is None else findings
    with open_log_file(path) as log_file:
        echo(f"Log starting offset: {log_file.base_offset}")
        end = 0
        last_offset = -1
        for position, batch in log_file.batches():
            if position + batch.size > max_bytes:
                break
            echo(batch_line(position, batch))
            end = position + batch.size
            if deep:
                try:
                    for rec in batch.records():
                        if last_offset >= 0 and rec.offset != last_offset + 1:
                            findings.add(findings.non_consecutive, path, (last_offset, rec.offset))
                        last_offset = rec.offset
                        echo(record_line(batch, rec, print_data, parser, skip_metadata))
                except RecordParseError as exc:  # Kafka's tool stops with its exception here
                    raise click.ClickException(str(exc)) from None
                except CompactLogError as exc:
                    echo(f"| records unreadable: {exc}")
        if max_bytes != INT_MAX:
            return
        invalid = log_file.invalid_bytes_after(end)
        if invalid:
            echo(f"Found {invalid} invalid bytes at the end of {path.name}")


def dump_index_file(path: Path, findings: DumpFindings | None = None, echo=click.echo, time_index: bool = False,
                    verify_only: bool = False, sanity_only: bool = False,
                    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> None:
    """Print one ``.index`` (``time_index``: ``.timeindex``), each entry checked against its ``.log``.

    ``verify_only`` checks without printing the entries; ``sanity_only`` makes only Kafka's sanity check
    and says ``<file> passed sanity check.`` (an empty ``.index`` is still ``<file> is empty.`` first, as in
    Kafka). The batch at an ``.index`` entry's position is read within ``max_message_size`` bytes."""
    findings = DumpFindings() if findings is None else findings
    if time_index:
        if sanity_only:
            index_sanity_check(path, TIME_INDEX)
            echo(f"{path} passed sanity check.")
            return
        for timestamp, offset in time_index_entries(path, findings):
            if not verify_only:
                echo(f"timestamp: {timestamp} offset: {offset}")
        return
    if path.stat().st_size < 8:
        echo(f"{path} is empty.")
        return
    if sanity_only:
        index_sanity_check(path, INDEX)
        echo(f"{path} passed sanity check.")
        return
    for offset, position in offset_index_entries(path, findings, max_message_size):
        if not verify_only:
            echo(f"offset: {offset} position: {position}")


def dump_txn_index_file(path: Path, echo=click.echo) -> None:
    """Print one ``.txnindex``: its aborted transactions, as Kafka's ``dumpTxnIndex`` does."""
    entries, torn = txn_index_entries(path)
    for e in entries:
        echo(f"version: {e.version} producerId: {e.producer_id} firstOffset: {e.first_offset} "
             f"lastOffset: {e.last_offset} lastStableOffset: {e.last_stable_offset}")
    if torn:
        echo(f"Found {torn} invalid bytes at the end of {path.name}")


@click.command("dump-log")
@click.option("--files", "paths", required=True, help="Comma-separated .log, .index, .timeindex or .txnindex files.")
@click.option("--print-data-log", is_flag=True, help="Print every record with its key and value (implies --deep-iteration).")
@click.option("--deep-iteration", is_flag=True, help="Print every record's metadata, not only batch headers.")
@click.option("--skip-record-metadata", is_flag=True, help="Leave each record's metadata out of its line.")
@click.option("--max-bytes", type=Number(0, INT_MAX), default=INT_MAX, show_default=True,
              help="Read only the batches within the first N bytes of each .log.")
@click.option("--max-message-size", type=Number(0, INT_MAX), default=DEFAULT_MAX_MESSAGE_SIZE, show_default=True,
              help="Size of the largest batch an .index entry may point at.")
@click.option("--verify-index-only", is_flag=True, help="Check .index and .timeindex entries against the log "
              "without printing them.")
@click.option("--index-sanity-check", is_flag=True, help="Only make the sanity check a broker makes of an index "
              "at start (to decide whether to rebuild it).")
@click.option("--key-decoder-class", is_flag=False, flag_value=STRING_DECODER, default=None, metavar="CLASS",
              help=f"How keys are printed; only {STRING_DECODER} (the default). Implies --print-data-log.")
@click.option("--value-decoder-class", is_flag=False, flag_value=STRING_DECODER, default=None, metavar="CLASS",
              help=f"How values are printed; only {STRING_DECODER} (the default). Implies --print-data-log.")
@click.option("--offsets-decoder", is_flag=True, help="Read records as __consumer_offsets records "
              "(implies --print-data-log).")
@click.option("--transaction-log-decoder", is_flag=True, help="Read records as __transaction_state records "
              "(implies --print-data-log).")
@kafka_errors
def dump_log(paths, print_data_log, deep_iteration, skip_record_metadata, max_bytes, max_message_size,
             verify_index_only, index_sanity_check, key_decoder_class, value_decoder_class, offsets_decoder,
             transaction_log_decoder):
    """Print the batches and records of segment files, and the aborted transactions of transaction
    indexes (kafka-dump-log); reads files only, takes no lock.

    Index entries that do not match the log, and record offsets that leave gaps (with --deep-iteration),
    are reported on standard error at the end, as kafka-dump-log reports them.

    Example: compactlog dump-log --files data/prices-0/00000000000000000000.log --print-data-log
    """
    for flag, name in (("--key-decoder-class", key_decoder_class), ("--value-decoder-class", value_decoder_class)):
        if name is not None and name != STRING_DECODER:
            raise click.BadParameter(f"{shown(name)} is not available; the one decoder class is {STRING_DECODER}",
                                     param_hint=f"'{flag}'")
    parser = _parser(offsets_decoder, transaction_log_decoder)
    print_data_log = (print_data_log or offsets_decoder or transaction_log_decoder
                      or key_decoder_class is not None or value_decoder_class is not None)
    names = [p.strip() for p in paths.split(",") if p.strip()]
    if not names:
        raise click.BadParameter(f"expected a comma-separated list of .log, .index, .timeindex or .txnindex files, "
                                 f"got {shown(paths)}",
                                 param_hint="'--files'")
    findings = DumpFindings()
    try:
        for name in names:
            path = Path(name)
            click.echo(f"Dumping {path}")
            try:
                kind = check_segment_file(path, whole_entries=not index_sanity_check)
            except NotASegmentFileError as exc:
                raise click.ClickException(str(exc)) from None
            except OSError as exc:  # a name the file system refuses (too long, a loop of links)
                raise click.ClickException(f"{shown(name)}: {exc.strerror or exc}") from None
            try:
                if kind == LOG:
                    dump_log_file(path, deep_iteration or print_data_log, print_data_log, findings, parser=parser,
                                  skip_metadata=skip_record_metadata, max_bytes=max_bytes)
                elif kind == TXN_INDEX:
                    dump_txn_index_file(path)
                else:
                    dump_index_file(path, findings, time_index=kind == TIME_INDEX, verify_only=verify_index_only,
                                    sanity_only=index_sanity_check, max_message_size=max_message_size)
            except CorruptIndexFoundError as exc:  # Kafka's message as it is
                raise click.ClickException(str(exc)) from None
            except CompactLogError as exc:
                raise click.ClickException(f"{path}: {exc}") from None
            except OSError as exc:
                raise click.ClickException(f"{path}: {exc.strerror or exc}") from None
    finally:  # what was found so far is reported even when a later file fails
        for line in findings.lines():
            click.echo(line, err=True)


def _parser(offsets: bool, transaction_log: bool):
    """How records are read for printing: as Kafka picks its parser, the offsets decoder first."""
    if offsets:
        from .dumplog_parsers import offsets_parser

        return offsets_parser
    if transaction_log:
        from .dumplog_parsers import transaction_log_parser

        return transaction_log_parser
    return string_decoder
