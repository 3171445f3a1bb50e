"""``produce`` and ``consume``: kafka-console-producer and kafka-console-consumer over a data directory."""

from __future__ import annotations


import sys
from dataclasses import dataclass

import click

from ..errors import InvalidRecordError
from .common import data_dir_option, kafka_errors, open_data_dir, parse_key_values

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def _unescape(s: str) -> str:
    """Kafka's console tools take separators like ``\\t`` literally escaped."""
    return s.encode("utf-8").decode("unicode_escape")


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
        known = {"parse.key", "key.separator", "null.marker", "parse.headers", "headers.delimiter",
                 "headers.separator", "headers.key.separator", "ignore.error"}
        unknown = sorted(set(props) - known)
        if unknown:
            raise click.BadParameter(f"unknown producer property {unknown[0]} (known: {', '.join(sorted(known))})",
                                     param_hint="--property")
        b = lambda k, d: _unescape(props.get(k, d)).encode("utf-8")  # noqa: E731
        return cls(
            parse_key=props.get("parse.key", "false").lower() == "true",
            key_separator=b("key.separator", "\t"),
            null_marker=b("null.marker", "") if "null.marker" in props else None,
            parse_headers=props.get("parse.headers", "false").lower() == "true",
            headers_delimiter=b("headers.delimiter", "\t"),
            headers_separator=b("headers.separator", ","),
            headers_key_separator=b("headers.key.separator", ":"),
        )

    def parse(self, line: bytes, number: int) -> tuple:
        headers: list[tuple[str, bytes | None]] = []
        if self.parse_headers:
            head, sep, line = line.partition(self.headers_delimiter)
            if not sep:
                raise InvalidRecordError(f"No headers delimiter found on line number {number}: '{head.decode(errors='replace')}'")
            for item in head.split(self.headers_separator):
                if item:
                    k, s, v = item.partition(self.headers_key_separator)
                    headers.append((k.decode("utf-8"), self._nullable(v) if s else None))
        key = None
        if self.parse_key:
            k, sep, line = line.partition(self.key_separator)
            if not sep:
                raise InvalidRecordError(f"No key separator found on line number {number}: '{k.decode(errors='replace')}'")
            key = self._nullable(k)
        return key, self._nullable(line), tuple(headers)

    def _nullable(self, b: bytes) -> bytes | None:
        return None if self.null_marker is not None and b == self.null_marker else b


@click.command("produce")
@data_dir_option
@click.option("--topic", required=True, help="The topic to produce to.")
@click.option("--property", "properties", multiple=True,
              help="parse.key, key.separator, null.marker, parse.headers, headers.delimiter, headers.separator, headers.key.separator.")
@click.option("--compression-codec", type=click.Choice(CODECS), default="none", help="Producer-side codec.")
@click.option("--compression-level", type=int, default=None, help="Producer-side codec level.")
@click.option("--batch-size", type=int, default=16384, show_default=True, help="Bytes per batch.")
@kafka_errors
def produce(data_dir, server_properties, topic, properties, compression_codec, compression_level, batch_size):
    """Read records from standard input, one per line (kafka-console-producer).

    Example: printf 'p3:10\\n' | compactlog produce --data-dir data --topic prices --property parse.key=true --property key.separator=:
    """
    reader = LineReaderProps.from_properties(parse_key_values(properties, "--property"))
    rows = []
    for number, raw in enumerate(sys.stdin.buffer, start=1):
        line = raw[:-1] if raw.endswith(b"\n") else raw
        if line.endswith(b"\r"):
            line = line[:-1]
        rows.append(reader.parse(line, number))
    with open_data_dir(data_dir, server_properties) as cl:
        cl.produce_batch(topic, rows, compression=compression_codec, level=compression_level, batch_bytes=batch_size)


class RecordFormatter:
    """The console consumer's ``--property`` keys (DefaultMessageFormatter's): what to print per record."""

    def __init__(self, props: dict[str, str]) -> None:
        flag = lambda k, d="false": props.get(k, d).lower() == "true"  # noqa: E731
        self.fields = [k for k in ("timestamp", "partition", "offset", "headers", "key") if flag(f"print.{k}")]
        if flag("print.value", "true"):
            self.fields.append("value")
        self.sep = _unescape(props.get("key.separator", "\t")).encode()
        self.line_sep = _unescape(props.get("line.separator", "\n")).encode()
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
@data_dir_option
@click.option("--topic", required=True, help="The topic to read.")
@click.option("--from-beginning", is_flag=True, help="Start at the log start offset (default: the end).")
@click.option("--partition", type=int, help="Read only this partition.")
@click.option("--offset", help="Start offset for --partition: a number, 'earliest' or 'latest'.")
@click.option("--max-messages", type=int, help="Stop after this many records.")
@click.option("--timeout-ms", type=int,
              help="Follow the topic as another process appends, and exit once no record arrived for this long "
                   "(-1: never). Without it, stop at the current end of the log.")
@click.option("--read-compacted", is_flag=True,
              help="Read the compacted view (compact-topic): latest record per key below its horizon, then the live log.")
@click.option("--property", "properties", multiple=True,
              help="print.key, print.value, print.timestamp, print.offset, print.partition, print.headers, key.separator, line.separator, null.literal (alias null.marker).")
@kafka_errors
def consume(data_dir, server_properties, topic, from_beginning, partition, offset, max_messages, timeout_ms, read_compacted,
            properties):
    """Print records up to the current end of the log, or follow it with --timeout-ms (kafka-console-consumer).

    Example: compactlog consume --data-dir data --topic prices --from-beginning --property print.key=true
    """
    fmt = RecordFormatter(parse_key_values(properties, "--property"))
    out = sys.stdout.buffer
    start = None
    if offset is not None:
        if partition is None:
            raise click.UsageError("--offset needs --partition")
        if offset == "earliest":
            from_beginning = True
        elif offset != "latest":
            start = int(offset)
    if timeout_ms is not None:
        follow(data_dir, topic, partition, start if start is not None else "earliest" if from_beginning else "latest",
               max_messages, timeout_ms, read_compacted, fmt, out)
        return
    with open_data_dir(data_dir, server_properties) as cl:
        for rec in cl.consume(topic, partition, from_beginning=from_beginning, offset=start, max_records=max_messages,
                              read_compacted=read_compacted):
            out.write(fmt.format(rec))
    out.flush()


def follow(data_dir, topic, partition, start, max_messages, timeout_ms, read_compacted, fmt, out) -> None:
    """Poll read-only snapshots (no lock: the owner keeps appending) until ``timeout_ms`` without a
    record, ``max_messages`` records, or Ctrl-C (which exits 130, once what was read is printed)."""
    import time

    from ..consumer import SnapshotConsumer

    consumer = SnapshotConsumer(data_dir, topic, partition, start=start, read_compacted=read_compacted,
                                max_poll_records=5000)
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
