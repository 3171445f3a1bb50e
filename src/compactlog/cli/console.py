"""``produce`` and ``consume``: kafka-console-producer and kafka-console-consumer over a data directory, or
through a running broker with ``--bootstrap-server`` (``wire.py``): the same line parsing and the same
record formatting either way."""

from __future__ import annotations


import sys
from contextlib import contextmanager
from dataclasses import dataclass

import click

from ..errors import InvalidRecordError
from ..records.levels import levels_text
from .common import (
    bool_property,
    check_compression_level,
    INT_MAX,
    LONG_MAX,
    Number,
    OneOf,
    check_property_names,
    data_dir_option,
    kafka_errors,
    open_data_dir,
    open_target,
    parse_key_values,
    parse_number,
    shown,
    unescape_property,
)

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
# Kafka's batch.size default, compactlog.producer.DEFAULT_BATCH_BYTES (a test holds the two equal): written
# out here because importing the producer loads numpy and the codecs, which --help does not need.
DEFAULT_BATCH_BYTES = 16384


@dataclass(frozen=True)
class LineReaderProps:
    """The console producer's ``--property`` keys we support (LineMessageReader's)."""

    parse_key: bool = False
    key_separator: bytes = b"\t"
    null_marker: bytes | None = None
    parse_headers: bool = False
    headers_delimiter: bytes = b"\t"
    headers_separator: bytes = b","
    headers_key_separator: bytes = b":"

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> "LineReaderProps":
        check_property_names(props, {"parse.key", "key.separator", "null.marker", "parse.headers", "headers.delimiter",
                                     "headers.separator", "headers.key.separator", "ignore.error"}, "producer")
        bool_property(props, "ignore.error", False)  # accepted as Kafka's; a bad line always stops the producer

        def separator(name: str, default: str) -> bytes:
            sep = unescape_property(props, name, default).encode("utf-8")
            if not sep:
                raise click.BadParameter(f"{name} must not be empty", param_hint="'--property'")
            return sep

        return cls(
            parse_key=bool_property(props, "parse.key", False),
            key_separator=separator("key.separator", "\t"),
            null_marker=unescape_property(props, "null.marker", "").encode("utf-8") if "null.marker" in props else None,
            parse_headers=bool_property(props, "parse.headers", False),
            headers_delimiter=separator("headers.delimiter", "\t"),
            headers_separator=separator("headers.separator", ","),
            headers_key_separator=separator("headers.key.separator", ":"),
        )

    def parse(self, line: bytes, number: int) -> tuple:
        headers: list[tuple[str, bytes | None]] = []
        if self.parse_headers:
            head, sep, line = line.partition(self.headers_delimiter)
            if not sep:
                raise InvalidRecordError(f"No headers delimiter found on line number {number}: {shown(head.decode(errors='replace'))}")
            for item in head.split(self.headers_separator):
                if item:
                    k, s, v = item.partition(self.headers_key_separator)
                    if not s:  # Kafka's console producer refuses the pair (ignore.error aside, as for keys)
                        raise InvalidRecordError(f"No header key separator found in pair "
                                                 f"{shown(k.decode(errors='replace'))} on line number {number}")
                    if self.null_marker is not None and k == self.null_marker:
                        raise InvalidRecordError(f"Header keys should not be equal to the null marker "
                                                 f"{shown(k.decode(errors='replace'))} as they can't be null")
                    try:
                        name = k.decode("utf-8")
                    except UnicodeDecodeError:
                        raise InvalidRecordError(f"Header key on line number {number} is not valid UTF-8: "
                                                 f"{shown(k.decode(errors='backslashreplace'))}") from None
                    headers.append((name, self._nullable(v)))
        key = None
        if self.parse_key:
            k, sep, line = line.partition(self.key_separator)
            if not sep:
                raise InvalidRecordError(f"No key separator found on line number {number}: {shown(k.decode(errors='replace'))}")
            key = self._nullable(k)
        return key, self._nullable(line), tuple(headers)

    def _nullable(self, b: bytes) -> bytes | None:
        return None if self.null_marker is not None and b == self.null_marker else b


@click.command("produce")
@data_dir_option(wire=True)
@click.option("--topic", required=True, help="The topic to produce to.")
@click.option("--property", "properties", multiple=True,
              help="parse.key, key.separator, null.marker, parse.headers, headers.delimiter, headers.separator, headers.key.separator.")
@click.option("--compression-codec", type=OneOf(CODECS), default="none", help="Producer-side codec.")
@click.option("--compression-level", type=Number(-INT_MAX - 1, INT_MAX), default=None,
              help=f"Producer-side codec level: {levels_text()}.")
@click.option("--batch-size", type=Number(0, INT_MAX), default=DEFAULT_BATCH_BYTES, show_default=True,
              help="Bytes per batch (Kafka's batch.size; 0: one record per batch). Batches also fit the topic's "
                   "max.message.bytes and segment.bytes.")
@click.option("--producer-property", "producer_properties", multiple=True, metavar="KEY=VALUE",
              help="With --bootstrap-server: a Kafka producer setting (repeatable); the flags below win over it.")
@click.option("--producer.config", "producer_config", type=click.Path(exists=True, dir_okay=False), metavar="FILE",
              help="With --bootstrap-server: Kafka producer settings in a properties file (--producer-property wins).")
@click.option("--request-required-acks", "acks", type=OneOf(["all", "-1", "0", "1"]),
              help="With --bootstrap-server: the acks the producer asks for (default: all).")
@click.option("--sync", is_flag=True, help="With --bootstrap-server: send each record and wait for its acknowledgement.")
@click.option("--request-timeout-ms", type=Number(1, INT_MAX), help="With --bootstrap-server: request.timeout.ms.")
@click.option("--message-send-max-retries", type=Number(0, INT_MAX), help="With --bootstrap-server: retries.")
@click.option("--retry-backoff-ms", type=Number(1, 300000), help="With --bootstrap-server: retry.backoff.ms.")
@click.option("--max-block-ms", type=Number(0, LONG_MAX),
              help="With --bootstrap-server: how long a send may wait for room in the producer's queue.")
@click.option("--linger-ms", type=Number(0, 900000), help="With --bootstrap-server: linger.ms.")
@kafka_errors
def produce(data_dir, server_properties, bootstrap_server, topic, properties, compression_codec, compression_level,
            batch_size, producer_properties, producer_config, acks, sync, request_timeout_ms, message_send_max_retries,
            retry_backoff_ms, max_block_ms, linger_ms):
    """Read records from standard input, one per line (kafka-console-producer).

    Records are batched by the producer plan the API uses (compactlog.producer): keys pick partitions by
    murmur2, keyless records stick to a partition for a batch.size of bytes, and no batch exceeds what
    the topic takes. Every batch is built before any is appended.

    Over --bootstrap-server the records go through a Kafka producer (acks=all, murmur2 partitioning), and
    the command ends once every one is acknowledged.

    Example: printf 'p3:10\\n' | compactlog produce --data-dir data --topic prices --property parse.key=true --property key.separator=:
    """
    check_compression_level(compression_codec, compression_level)
    from ..topics import is_internal

    if is_internal(topic):  # the broker refuses it; a data directory's group coordinator would read the lines
        from ..errors import InvalidTopicError

        raise InvalidTopicError(f"Cannot append to internal topic {topic}")
    reader = LineReaderProps.from_properties(parse_key_values(properties, "--property", strip=False))
    rows = []
    for number, raw in enumerate(sys.stdin.buffer, start=1):
        line = raw[:-1] if raw.endswith(b"\n") else raw
        if line.endswith(b"\r"):
            line = line[:-1]
        rows.append(reader.parse(line, number))
    flags = {"acks": acks, "request.timeout.ms": request_timeout_ms, "retries": message_send_max_retries,
             "retry.backoff.ms": retry_backoff_ms, "max.block.ms": max_block_ms, "linger.ms": linger_ms}
    given = {k: str(v) for k, v in flags.items() if v is not None}
    if bootstrap_server is None:
        if given or sync or producer_properties or producer_config:
            raise click.UsageError("--producer-property, --producer.config, --request-required-acks, --sync, "
                                   "--request-timeout-ms, --message-send-max-retries, --retry-backoff-ms, "
                                   "--max-block-ms and --linger-ms go with --bootstrap-server (a producer's settings)")
        with open_target(data_dir, server_properties, None) as cl:
            cl.produce_batch(topic, rows, compression=compression_codec, level=compression_level, batch_bytes=batch_size)
        return
    from .producer_settings import producer_settings

    settings, block_ms = producer_settings(producer_config, parse_key_values(producer_properties, "--producer-property"),
                                           given)
    with open_target(data_dir, server_properties, bootstrap_server) as cl:
        cl.produce_batch(topic, rows, compression=compression_codec, level=compression_level, batch_bytes=batch_size,
                         settings=settings, sync=sync, max_block_ms=block_ms)


class OffsetType(click.ParamType):
    """``--offset``: a non-negative number, ``earliest`` or ``latest`` (kafka-console-consumer's forms)."""

    name = "offset"

    def convert(self, value, param, ctx):
        if isinstance(value, int) or value in ("earliest", "latest"):
            return value
        try:
            return parse_number(str(value), 0, LONG_MAX)
        except ValueError:
            self.fail(f"{shown(str(value))} is not an offset: give a number (0 or more), earliest or latest", param, ctx)


OFFSET = OffsetType()


class RecordFormatter:
    """The console consumer's ``--property`` keys (DefaultMessageFormatter's): what to print per record."""

    FIELDS = ("timestamp", "partition", "offset", "headers", "key")

    def __init__(self, props: dict[str, str]) -> None:
        check_property_names(props, {f"print.{f}" for f in (*self.FIELDS, "value")} |
                             {"key.separator", "line.separator", "null.literal", "null.marker"}, "consumer")
        self.fields = [f for f in self.FIELDS if bool_property(props, f"print.{f}", False)]
        if bool_property(props, "print.value", True):
            self.fields.append("value")
        self.sep = unescape_property(props, "key.separator", "\t").encode()
        self.line_sep = unescape_property(props, "line.separator", "\n").encode()
        self.null = props.get("null.literal", props.get("null.marker", "null")).encode()

    def format(self, rec) -> bytes:
        null, cols = self.null, []
        for f in self.fields:
            if f == "timestamp":
                cols.append(f"{'LogAppendTime' if rec.timestamp_type else 'CreateTime'}:{rec.timestamp}".encode())
            elif f == "partition":
                cols.append(f"Partition:{rec.partition}".encode())
            elif f == "offset":
                cols.append(f"Offset:{rec.offset}".encode())
            elif f == "headers":
                cols.append(b",".join(k.encode() + b":" + (null if v is None else v) for k, v in rec.headers) or b"NO_HEADERS")
            else:
                v = rec.key if f == "key" else rec.value
                cols.append(null if v is None else v)
        return self.sep.join(cols) + self.line_sep


@click.command("consume")
@data_dir_option(wire=True)
@click.option("--topic", required=True, help="The topic to read.")
@click.option("--from-beginning", is_flag=True, help="Start at the log start offset (default: the end).")
@click.option("--partition", type=Number(0, INT_MAX), help="Read only this partition.")
@click.option("--offset", type=OFFSET, help="Start offset for --partition: a number, 'earliest' or 'latest'.")
@click.option("--max-messages", type=Number(0, INT_MAX), help="Stop after this many records.")
@click.option("--timeout-ms", type=Number(-1, INT_MAX),
              help="Follow the topic as another process appends, and exit once no record arrived for this long "
                   "(-1: never). Without it, stop at the current end of the log.")
@click.option("--read-compacted", is_flag=True,
              help="Read the compacted view (compact-topic): latest record per key below its horizon, then the live log.")
@click.option("--isolation-level", type=OneOf(["read_committed", "read_uncommitted"]), default="read_uncommitted",
              show_default=True,
              help="read_committed: only records of committed transactions, up to the last stable offset; "
                   "read_uncommitted: every record (transaction markers are never printed).")
@click.option("--group", help="With --bootstrap-server: read as a member of this consumer group, from its committed "
                              "offsets (else as --from-beginning says), and commit what was read.")
@click.option("--property", "properties", multiple=True,
              help="print.key, print.value, print.timestamp, print.offset, print.partition, print.headers, key.separator, line.separator, null.literal (alias null.marker).")
@click.option("--consumer-property", "consumer_properties", multiple=True,
              help="check.crcs=true|false: verify every batch's CRC (the default, as Kafka's consumer does).")
@kafka_errors
def consume(data_dir, server_properties, bootstrap_server, topic, from_beginning, partition, offset, max_messages,
            timeout_ms, read_compacted, isolation_level, group, properties, consumer_properties):
    """Print records up to the current end of the log, or follow it with --timeout-ms (kafka-console-consumer).

    Example: compactlog consume --data-dir data --topic prices --from-beginning --property print.key=true

    Example: compactlog consume --bootstrap-server 127.0.0.1:9092 --topic prices --group cache --max-messages 10
    """
    fmt = RecordFormatter(parse_key_values(properties, "--property", strip=False))
    check_crcs = consumer_settings(parse_key_values(consumer_properties, "--consumer-property", strip=False))
    out = CountingWriter(sys.stdout.buffer)
    with reporting_count(out):
        _consume(data_dir, server_properties, bootstrap_server, topic, from_beginning, partition, offset, max_messages,
                 timeout_ms, read_compacted, group, check_crcs, fmt, out, isolation_level)


class CountingWriter:
    """Standard output that counts the records written to it (each formatted record is one write)."""

    def __init__(self, raw) -> None:
        self.raw = raw
        self.count = 0

    def write(self, data: bytes) -> None:
        self.raw.write(data)
        self.count += 1

    def flush(self) -> None:
        self.raw.flush()


@contextmanager
def reporting_count(out: CountingWriter):
    """Kafka's console consumer ends, whether it ran out of records, reached --max-messages or was
    interrupted, with ``Processed a total of N messages`` on standard error; a failure is reported by its
    own one line instead."""
    try:
        yield
    except KeyboardInterrupt:
        click.echo(f"Processed a total of {out.count} messages", err=True)
        raise
    click.echo(f"Processed a total of {out.count} messages", err=True)


def _consume(data_dir, server_properties, bootstrap_server, topic, from_beginning, partition, offset, max_messages,
             timeout_ms, read_compacted, group, check_crcs, fmt, out, isolation_level="read_uncommitted") -> None:
    start = None
    if offset is not None:
        if partition is None:
            raise click.UsageError("--offset needs --partition")
        if from_beginning:
            raise click.UsageError("--from-beginning and --offset cannot be given together")
        if offset == "earliest":
            from_beginning = True
        elif offset != "latest":
            start = offset
    if bootstrap_server is not None:
        if read_compacted:
            raise click.UsageError("--read-compacted reads a data directory's compacted view; give --data-dir")
        if group is not None and partition is not None:
            raise click.UsageError("--group and --partition cannot be given together (the group assigns partitions)")
        if group is not None and not group.strip():  # librdkafka treats it as no group (and its wrapper aborts)
            raise click.BadParameter(f"{shown(group)}: to use the group management or offset commit APIs, a group "
                                     "id must be given that is not empty or only spaces", param_hint="'--group'")
        with open_target(data_dir, server_properties, bootstrap_server) as cl:
            write_records(cl.consume(topic, partition, from_beginning=from_beginning, offset=start,
                                     max_records=max_messages, group=group, timeout_ms=timeout_ms,
                                     check_crcs=check_crcs, isolation_level=isolation_level), fmt, out)
        return
    if group is not None:
        raise click.UsageError("--group needs --bootstrap-server: consumer groups live in a running broker")
    if timeout_ms is not None:
        follow(data_dir, topic, partition, start if start is not None else "earliest" if from_beginning else "latest",
               max_messages, timeout_ms, read_compacted, fmt, out, check_crcs, isolation_level)
        return
    if max_messages == 0:  # nothing to print, as when following or via a broker (the API wants >= 1)
        return
    with open_data_dir(data_dir, server_properties) as cl:
        write_records(cl.consume(topic, partition, from_beginning=from_beginning, offset=start, max_records=max_messages,
                                 read_compacted=read_compacted, check_crcs=check_crcs, isolation_level=isolation_level),
                      fmt, out)


def write_records(records, fmt: RecordFormatter, out) -> None:
    """Print records as they come (a follower sees each at once), then flush."""
    for rec in records:
        out.write(fmt.format(rec))
    out.flush()


def consumer_settings(props: dict[str, str]) -> bool:
    """The consumer configs the console consumer takes (``--consumer-property``): only ``check.crcs``."""
    unknown = sorted(set(props) - {"check.crcs"})
    if unknown:
        raise click.BadParameter(f"unknown consumer property {shown(unknown[0], '')} (known: check.crcs)",
                                 param_hint="'--consumer-property'")
    return bool_property(props, "check.crcs", True)


def follow(data_dir, topic, partition, start, max_messages, timeout_ms, read_compacted, fmt, out,
           check_crcs: bool = True, isolation_level: str = "read_uncommitted") -> None:
    """Poll read-only snapshots (no lock: the owner keeps appending) until ``timeout_ms`` without a
    record, ``max_messages`` records, or Ctrl-C (which exits 130, once what was read is printed)."""
    import time

    from ..consumer import SnapshotConsumer

    consumer = SnapshotConsumer(data_dir, topic, partition, start=start, read_compacted=read_compacted,
                                max_poll_records=5000, check_crcs=check_crcs, isolation_level=isolation_level)
    left = max_messages
    idle_since = time.monotonic()
    try:
        while left is None or left > 0:
            recs = consumer.poll()
            if left is not None:
                recs = recs[:left]
                left -= len(recs)
            for rec in recs:
                out.write(fmt.format(rec))
            out.flush()
            now = time.monotonic()
            if recs:
                idle_since = now
                continue
            waited_ms = (now - idle_since) * 1000
            if timeout_ms >= 0 and waited_ms >= timeout_ms:
                break
            # Kafka's fetch.max.wait.ms is the long-poll bound; a file has no push, so look again soon.
            time.sleep(0.1 if timeout_ms < 0 else min(0.1, (timeout_ms - waited_ms) / 1000))
    finally:
        consumer.close()
