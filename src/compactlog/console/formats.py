"""How a record's key, value and headers read on a page: as text, as JSON or as a hex dump.

Pure functions over bytes. Each returns a :class:`Shown`: the text to put on the page (never markup:
templates escape it), the whole size of what was shown, and whether the text stops short of it. What
is shown is bounded (``SHOW_BYTES`` of a value, ``HEX_BYTES`` in a dump), so a page of 500 records of
1 MB each stays a page; a value is parsed as JSON only up to ``JSON_PARSE_BYTES``.
"""

from __future__ import annotations

import codecs
import datetime
import json
import re
from dataclasses import dataclass

from .fields import LONG_MAX, FieldError, shown, whole_number

TEXT, JSON, HEX = "text", "json", "hex"
FORMATS = (TEXT, JSON, HEX)
SHOW_BYTES = 4096  # of a value shown as text (or of its pretty-printed JSON, in characters)
HEX_BYTES = 1024  # of a value shown as a hex dump (64 lines of 16 bytes)
KEY_BYTES = 512  # of a key or a header value
JSON_PARSE_BYTES = 256 * 1024  # larger values are shown as text: parsing them would stall the page
HEX_WIDTH = 16
TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}  # Kafka's names (TimestampType.name)
# control characters other than tab and newline, which a page would drop or garble: shown as escapes
_CONTROL = re.compile(r"([\x00-\x08\x0b-\x1f\x7f])")
_ESCAPES = {"\0": "\\0", "\b": "\\b", "\x0b": "\\v", "\f": "\\f", "\r": "\\r", "\x1b": "\\e"}


@dataclass(frozen=True)
class Shown:
    """A key, value or header value as the page shows it. ``text`` is None for null."""

    text: str | None
    size: int  # bytes of the whole key or value; -1 for null
    truncated: bool = False  # the text shows only the start of it
    note: str | None = None  # why it reads as it does (not JSON, too large to parse)

    @property
    def is_null(self) -> bool:
        return self.text is None

    @property
    def pieces(self) -> list[tuple[str, bool]]:
        """The text in runs: (plain text, False) and (a control character as an escape such as ``\\r``
        or ``\\x1a``, True), so a template can set the escapes apart from text that looks the same."""
        if not self.text:
            return []
        out = []
        for i, run in enumerate(_CONTROL.split(self.text)):
            if i % 2:
                out.append((_ESCAPES.get(run) or f"\\x{ord(run):02x}", True))
            elif run:
                out.append((run, False))
        return out


NULL = Shown(None, -1)


def as_text(data: bytes | memoryview, limit: int = SHOW_BYTES) -> Shown:
    """UTF-8, each invalid byte read as U+FFFD; a character cut by ``limit`` is left out, not mangled."""
    head = bytes(data[:limit])
    whole = len(data) <= limit
    text = codecs.getincrementaldecoder("utf-8")("replace").decode(head, final=whole)
    return Shown(text, len(data), not whole)


def as_json(data: bytes | memoryview, limit: int = SHOW_BYTES) -> Shown:
    """Pretty-printed when the whole value parses as JSON, else the text with a note saying why not."""
    if len(data) > JSON_PARSE_BYTES:
        return _with_note(as_text(data, limit), f"larger than {JSON_PARSE_BYTES // 1024} KB: shown as text, not parsed")
    try:
        doc = json.loads(bytes(data))
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return _with_note(as_text(data, limit), f"not JSON ({_reason(exc)}): shown as text")
    pretty = json.dumps(doc, indent=2, ensure_ascii=False)
    return Shown(pretty[:limit], len(data), len(pretty) > limit)


def as_hex(data: bytes | memoryview, limit: int = HEX_BYTES) -> Shown:
    """A hex dump: offset, 16 bytes in two groups of 8, and the printable ASCII beside them."""
    head = bytes(data[:limit])
    lines = []
    for at in range(0, len(head), HEX_WIDTH):
        row = head[at : at + HEX_WIDTH]
        left, right = row[:8].hex(" "), row[8:].hex(" ")
        ascii_ = "".join(chr(b) if 32 <= b < 127 else "." for b in row)
        lines.append(f"{at:08x}  {left:<23}  {right:<23}  |{ascii_}|")
    return Shown("\n".join(lines), len(data), len(data) > limit)


def show(data: bytes | memoryview | None, fmt: str, limit: int | None = None) -> Shown:
    """A value in format ``fmt`` (text, json or hex), bounded by ``limit`` (the format's default)."""
    if data is None:
        return NULL
    if fmt == HEX:
        return as_hex(data, HEX_BYTES if limit is None else limit)
    if fmt == JSON:
        return as_json(data, SHOW_BYTES if limit is None else limit)
    return as_text(data, SHOW_BYTES if limit is None else limit)


def show_key(data: bytes | memoryview | None, fmt: str) -> Shown:
    """Keys and header values are short names: text unless a hex dump was asked for."""
    return show(data, HEX if fmt == HEX else TEXT, KEY_BYTES)


def show_name(name: str) -> str:
    """A header name (decoded by the record reader), bounded."""
    return name if len(name) <= KEY_BYTES else name[:KEY_BYTES] + "…"


def timestamp_type(code: int, timestamp: int) -> str:
    return "NoTimestampType" if timestamp < 0 else TIMESTAMP_TYPES.get(code, f"type {code}")


def parse_timestamp(text: str) -> int:
    """Milliseconds since the epoch, from ms (0 up to a long, read with a bound: ``fields``) or an ISO
    8601 date-time (UTC unless it says otherwise; one before 1970 is 0, the first record's time at the
    earliest). Raises ``fields.FieldError`` (a ValueError) naming the timestamp field."""
    s = text.strip()
    if re.fullmatch(r"[+-]?[0-9]+", s):
        return whole_number(s, "timestamp", 0, LONG_MAX, "timestamp (milliseconds since the epoch)")
    try:
        t = datetime.datetime.fromisoformat(s) if s.isascii() else None
    except ValueError:
        t = None
    if t is None:
        raise FieldError("timestamp", f"The timestamp {shown(text.strip())} is neither milliseconds since the "
                         "epoch nor an ISO date-time (such as 2024-05-01T12:00:00Z).")
    if t.tzinfo is None:
        t = t.replace(tzinfo=datetime.timezone.utc)
    return max(0, int(t.timestamp() * 1000))


def parse_key(text: str, key_format: str) -> bytes:
    """The key typed in a form: UTF-8 text, or hex digits (spaces allowed) for binary keys."""
    if key_format == HEX:
        digits = re.sub(r"\s+", "", text)
        try:
            return bytes.fromhex(digits)
        except ValueError:
            raise FieldError("key", f"The key {shown(text)} is not hex: give pairs of hex digits, such as 6b 65 79.") from None
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: no UTF-8 for it
        raise FieldError("key", f"The key {shown(text)} is not valid text: give it in hex instead.") from None


def _with_note(shown: Shown, note: str) -> Shown:
    return Shown(shown.text, shown.size, shown.truncated, note)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8"
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return str(exc)
