"""Messages: browse a partition from an offset or a timestamp, and look up the latest value of a key.

Browsing reads with ``CompactLog.consume`` (the embedded consumer: CRC-checked batches, control
batches skipped) at the isolation level the form picks (read_uncommitted, Kafka's default, or
read_committed: committed transactions only, up to the last stable offset; ``compactlog.reading``'s
rule) on the console's threads, at most ``MAX_LIMIT`` records and ``READ_BYTES`` of keys and
values a page; each record is turned into bounded text as it is read (``formats``), so a page of large
values holds only their beginnings. The key lookup reads the compacted view newest first (``compactlog.key_lookup``).
Kafka's errors (an offset out of range, an unknown partition) are shown in the page beside the form.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlencode

from aiohttp import web

from ... import cleaning
from ...cleaning import CompactionStatus
from ...errors import CompactLogError, UnknownTopicOrPartitionError
from ...key_lookup import SCAN_BYTES, Lookup, find_latest
from ...reading import ISOLATION_LEVELS, READ_COMMITTED, READ_UNCOMMITTED
from .. import formats
from ..fields import INT_MAX, LONG_MAX, FieldError, optional_whole_number, shown
from ..formats import FORMATS, TEXT, Shown
from ..handlers import console, page, path_name, require, topic_url

routes = web.RouteTableDef()

DEFAULT_LIMIT = 50
MAX_LIMIT = 500
READ_BYTES = 16 * 1024 * 1024  # of keys and values one page reads before it stops early
MAX_HEADERS = 32  # headers shown per record; the rest are counted
MAX_KEY_BYTES = 16 * 1024  # the longest key a lookup takes


# pure rules -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class BrowseQuery:
    """Where to read from and how to show it; ``start`` says which of offset and timestamp counts."""

    partition: int = 0
    start: str = "offset"
    offset: int | None = None  # None with start=offset: from the log start offset
    timestamp: int | None = None
    offset_text: str = ""
    timestamp_text: str = ""
    limit: int = DEFAULT_LIMIT
    fmt: str = TEXT
    isolation: str = READ_UNCOMMITTED


def _int(params: Mapping[str, str], name: str, what: str, errors: list[str], low: int = 0,
         high: int = LONG_MAX) -> int | None:
    """The field ``name`` as a whole number in [low, high], None when empty or refused (the refusal,
    which names the field, goes to ``errors``)."""
    try:
        return optional_whole_number(params.get(name, ""), name, low, high, what)
    except FieldError as exc:
        errors.append(str(exc))
        return None


def parse_format(params: Mapping[str, str], errors: list[str]) -> str:
    fmt = params.get("format", TEXT) or TEXT
    if fmt not in FORMATS:
        errors.append(f"Unknown format {shown(fmt)}: choose one of {', '.join(FORMATS)}.")
        return TEXT
    return fmt


def parse_browse(params: Mapping[str, str]) -> tuple[BrowseQuery, list[str], list[str]]:
    """The query of a browse URL: (query, errors that stop the read, notes about what was changed)."""
    errors: list[str] = []
    notes: list[str] = []
    partition = _int(params, "partition", "partition", errors, high=INT_MAX)
    offset_text = params.get("offset", "").strip()
    timestamp_text = params.get("timestamp", "").strip()
    start = params.get("start", "")
    if start and start not in ("offset", "timestamp"):
        errors.append(f"Start from an offset or a timestamp, not {shown(start)}.")
        start = ""
    if start not in ("offset", "timestamp"):
        if offset_text and timestamp_text:
            errors.append("Give an offset or a timestamp to start from, not both.")
        start = "timestamp" if timestamp_text and not offset_text else "offset"
    offset = _int(params, "offset", "offset", errors) if start == "offset" else None
    timestamp = None
    if start == "timestamp":
        if not timestamp_text:
            errors.append("Give a timestamp to start from: an ISO date-time or milliseconds since the epoch.")
        else:
            try:
                timestamp = formats.parse_timestamp(timestamp_text)
            except ValueError as exc:
                errors.append(str(exc))
    limit = _int(params, "limit", "number of records (limit)", errors, low=1)
    if limit is None:
        limit = DEFAULT_LIMIT
    elif limit > MAX_LIMIT:
        notes.append(f"A page shows at most {MAX_LIMIT} records.")
        limit = MAX_LIMIT
    fmt = parse_format(params, errors)
    isolation = params.get("isolation", "") or READ_UNCOMMITTED
    if isolation not in ISOLATION_LEVELS:
        errors.append(f"Unknown isolation level {shown(isolation)}: choose {' or '.join(ISOLATION_LEVELS)}.")
        isolation = READ_UNCOMMITTED
    q = BrowseQuery(partition or 0, start, offset, timestamp, offset_text, timestamp_text, limit, fmt, isolation)
    return q, errors, notes


@dataclass(frozen=True)
class Row:
    """One record as the table shows it."""

    offset: int
    timestamp: int
    timestamp_type: str
    key: Shown
    value: Shown
    headers: list[tuple[str, Shown]]
    more_headers: int = 0


def row_of(rec, fmt: str) -> Row:
    """A record (``records.batch.Record``) as bounded text in format ``fmt``."""
    headers = [(formats.show_name(k), formats.show_key(v, fmt)) for k, v in rec.headers[:MAX_HEADERS]]
    return Row(rec.offset, rec.timestamp, formats.timestamp_type(rec.timestamp_type, rec.timestamp),
               formats.show_key(rec.key, fmt), formats.show(rec.value, fmt), headers,
               max(0, len(rec.headers) - MAX_HEADERS))


def record_bytes(rec) -> int:
    return (len(rec.key) if rec.key is not None else 0) + (len(rec.value) if rec.value is not None else 0)


# reads, on the console's threads ---------------------------------------------------------------------

@dataclass
class Browse:
    """A page of records and the partition's offsets around it."""

    partitions: int
    log_start: int | None = None
    log_end: int | None = None
    last_stable: int | None = None  # the last stable offset: read_committed reads stop there
    rows: list[Row] = field(default_factory=list)
    stopped_early: bool = False  # READ_BYTES reached before ``limit`` records
    reached_end: bool = False  # fewer than ``limit`` records: the read ran to the end (the LSO for read_committed)
    error: str | None = None

    @property
    def next_offset(self) -> int | None:
        return self.rows[-1].offset + 1 if self.rows else None

    def end_for(self, isolation: str) -> int | None:
        """Where a reader of ``isolation`` stops: the last stable offset for read_committed, else the end."""
        return self.last_stable if isolation == READ_COMMITTED else self.log_end


def read_page(cl, topic: str, q: BrowseQuery | None) -> Browse:
    """Up to ``q.limit`` records of one partition (None: only the topic's partitions, for the form).
    An unknown topic raises UnknownTopicOrPartitionError; every other Kafka error goes in ``error``."""
    out = Browse(cl.partitions_for(topic))
    if q is None:
        return out
    if q.partition >= out.partitions:
        out.error = f"Partition {q.partition} of topic {shown(topic)} does not exist (the topic has {out.partitions})."
        return out
    part = cl.partition(topic, q.partition)
    out.last_stable = part.last_stable_offset  # first: never above the end read after it
    out.log_start, out.log_end = part.log_start_offset, part.log_end_offset
    read = 0
    records = cl.consume(topic, q.partition, offset=q.offset, timestamp=q.timestamp, max_records=q.limit,
                         from_beginning=q.offset is None and q.timestamp is None, isolation_level=q.isolation)
    try:
        for rec in records:
            out.rows.append(row_of(rec, q.fmt))
            read += record_bytes(rec)
            if read >= READ_BYTES and len(out.rows) < q.limit:
                out.stopped_early = True
                break
    except CompactLogError as exc:
        out.error = str(exc)
    finally:
        records.close()
    # what lies between the last record and the end is markers or aborted records: no page to offer there
    out.reached_end = out.error is None and not out.stopped_early and len(out.rows) < q.limit
    return out


@dataclass
class KeyResult:
    lookup: Lookup
    row: Row | None
    status: CompactionStatus


def look_up(cl, topic: str, key: bytes, fmt: str) -> KeyResult:
    found = find_latest(cl, topic, key)
    row = None if found.record is None else row_of(found.record, fmt)
    return KeyResult(found, row, cleaning.compaction_status(cl, topic, found.partition))


def topic_partitions(cl, topic: str) -> int:
    return cl.partitions_for(topic)


# pages ----------------------------------------------------------------------------------------------

def _urls(topic: str) -> dict[str, str]:
    return {"topic_href": topic_url(topic), "browse_href": topic_url(topic, "messages"),
            "key_href": topic_url(topic, "messages", "key")}


def _unknown_topic(request: web.Request, exc: UnknownTopicOrPartitionError) -> web.Response:
    return page(request, "error.html", status=404, title="Unknown topic", message=str(exc))


@routes.get("/topics/{topic}/messages")
async def browse(request: web.Request) -> web.Response:
    topic = path_name(request, "topic")
    require(request, "READ", "TOPIC", topic)
    c = console(request)
    q, errors, notes = parse_browse(request.query)
    try:
        result = await c.run(read_page, c.cl, topic, None if errors else q)
    except UnknownTopicOrPartitionError as exc:
        return _unknown_topic(request, exc)
    urls = _urls(topic)
    nav = {"partition": q.partition, "limit": q.limit, "format": q.fmt, "isolation": q.isolation}
    next_href = last_href = None
    end = result.end_for(q.isolation)
    if result.next_offset is not None and end is not None and result.next_offset < end and not result.reached_end:
        next_href = urls["browse_href"] + "?" + urlencode({**nav, "offset": result.next_offset})
    if end is not None and result.log_start is not None:
        last = max(result.log_start, end - q.limit)
        last_href = urls["browse_href"] + "?" + urlencode({**nav, "offset": last})
    first_href = urls["browse_href"] + "?" + urlencode({**nav, "offset": result.log_start}) \
        if result.log_start is not None else None
    status = 400 if errors or result.error else 200  # a value that cannot be read, or that Kafka refuses
    return page(request, "messages.html", status=status, topic=topic, q=q, errors=errors, notes=notes, result=result,
                formats=FORMATS, isolation_levels=ISOLATION_LEVELS, max_limit=MAX_LIMIT, next_href=next_href,
                last_href=last_href,
                first_href=first_href, read_bytes=READ_BYTES, **urls)


@routes.get("/topics/{topic}/messages/key")
async def key_lookup(request: web.Request) -> web.Response:
    topic = path_name(request, "topic")
    require(request, "READ", "TOPIC", topic)
    c = console(request)
    errors: list[str] = []
    fmt = parse_format(request.query, errors)
    key_text = request.query.get("key")
    key_format = request.query.get("key_format") or TEXT
    if key_format not in (formats.TEXT, formats.HEX):
        errors.append(f"Unknown key format {shown(key_format)}: choose text or hex.")
        key_format = TEXT
    key = None
    if key_text is not None and not errors:
        try:
            key = formats.parse_key(key_text, key_format)
        except ValueError as exc:
            errors.append(str(exc))
        else:
            if len(key) > MAX_KEY_BYTES:
                errors.append(f"The key is {len(key):,} bytes; a lookup takes keys of at most {MAX_KEY_BYTES:,}.")
                key = None
    result = error = None
    try:
        if key is None:
            await c.run(topic_partitions, c.cl, topic)
        else:
            result = await c.run(look_up, c.cl, topic, key, fmt)
    except UnknownTopicOrPartitionError as exc:
        return _unknown_topic(request, exc)
    except CompactLogError as exc:
        error = str(exc)
    return page(request, "messages_key.html", status=400 if errors else 200, topic=topic, key_text=key_text or "", key_format=key_format,
                fmt=fmt, formats=FORMATS, errors=errors, error=error, result=result,
                scan_bytes=SCAN_BYTES, **_urls(topic))
