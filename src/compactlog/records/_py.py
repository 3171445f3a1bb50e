"""Pure-Python twin of the record kernels in ``_native.c``.

Both implementations answer the calls of ``RecordKernels`` (``_protocols.py``) with the same results
(the named ones of ``results.py``) and the same error texts (records that do not parse raise
``KernelError``); the test suite runs once against each (``COMPACTLOG_NO_EXTENSIONS=1`` selects this
one). This twin is the readable statement of the record layout; the compiled one is what makes
per-record work fast, because a Python loop over records tops out near 0.25 M records/s (see the
design notes).

Record layout inside a batch's records section (all varints zigzag, protobuf-style)::

    length          varint   bytes after this field
    attributes      int8     written 0, ignored
    timestampDelta  varlong  record ts - batch baseTimestamp
    offsetDelta     varint   record offset - batch baseOffset
    keyLength       varint   -1 = null key
    key             bytes
    valueLength     varint   -1 = null value (tombstone)
    value           bytes
    headerCount     varint   >= 0
    headers         [keyLength varint >= 0, key utf-8, valueLength varint (-1 = null), value]

``scan_records`` fills one row of ``NCOLS`` int64 columns per record (positions are into ``data``); the
column numbers are those of ``layout.py``.
Readers decode a header key that is not valid UTF-8 with replacement characters (as Java's
``new String(bytes, UTF_8)`` does); ``summarize_records`` counts the records that have one, so that
appends can refuse them. Nothing is sized by a record count before the records are there.
"""

from __future__ import annotations

import struct
from typing import Any, Iterator, Sequence

import google_crc32c

from .layout import (
    C_END,
    C_HDR_COUNT,
    C_HDR_POS,
    C_KEY_LEN,
    C_KEY_POS,
    C_OFFSET_DELTA,
    C_POS,
    C_TS_DELTA,
    C_VAL_LEN,
    C_VAL_POS,
    NCOLS,
    POSITION_COLUMNS,
    SLOT,
)
from .results import BinaryColumn, DecodedColumns, KernelError, MapPut, RecordsSummary

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
INT32_MAX = (1 << 31) - 1


def crc32c(data: Any) -> int:
    """CRC-32C (Castagnoli) of any bytes-like object."""
    return google_crc32c.value(data if isinstance(data, bytes) else bytes(data))


def scan_batches(base: Any, views: Sequence[Any], counts: Any, base_offsets: Any, verify: bool, out: Any,
                 rows: Any) -> int:
    """Scan whole batches where they lie: ``views[i]``, a view into ``base``, is a batch; ``counts[i]`` of
    its records (0 for a control batch) go into consecutive rows of ``out``, positions absolute in
    ``base``, offsets absolute (``base_offsets[i]`` added); ``rows[i]`` is batch i's first row. First
    every batch is checked: a size (12 + batchLength) of at least the 61-byte header within its view;
    with ``verify``, what ``RecordBatch.ensure_valid`` checks (magic 2, the CRC-32C of bytes [21, size));
    a count its records section can hold. Returns -1 when all were scanned, else the first batch that
    failed a check, or -2 when ``out`` has too few rows."""
    import numpy as np

    def address(buf: Any) -> int:  # where a buffer's bytes are in memory (numpy knows; Python does not say)
        return int(np.frombuffer(buf, dtype=np.uint8).ctypes.data) if len(memoryview(buf)) else -1

    n = len(views)
    if len(counts) != n or len(base_offsets) != n or len(rows) < n + 1:
        raise ValueError(f"counts and base_offsets must hold {n} items, rows {n + 1}")
    if len(out.shape) != 2 or out.shape[1] != NCOLS:
        raise ValueError(f"out must be an int64 array of {NCOLS} columns")
    mv = memoryview(base).cast("B")
    b0 = address(mv)
    batches, positions = [], []
    for i, view in enumerate(views):
        v = memoryview(view).cast("B")
        at = address(v) - b0 if len(v) else 0
        if at < 0 or at > len(mv) or len(v) > len(mv) - at:
            raise ValueError(f"view {i} does not lie in the base buffer")
        batches.append(v)
        positions.append(at)
    counts, base_offsets = [int(c) for c in counts], [int(o) for o in base_offsets]
    sizes = []
    for i, v in enumerate(batches):
        size = 12 + int.from_bytes(v[8:12], "big", signed=True) if len(v) >= 61 else 0
        if (not 61 <= size <= len(v) or verify and (v[16] != 2 or crc32c(v[21:size]) != int.from_bytes(v[17:21], "big"))
                or counts[i] != 0 and not 0 <= counts[i] <= (size - 61) // 7):
            return i
        sizes.append(size)
    if sum(counts) > len(out):
        return -2
    row = 0
    for i, (at, size, count) in enumerate(zip(positions, sizes, counts)):
        rows[i] = row
        start = at + 61
        part = np.empty((count, NCOLS), dtype=np.int64)
        try:
            scan_records(mv[start : start + (size - 61 if count else 0)], count, part)
        except KernelError as exc:
            raise KernelError(exc.reason, i) from None  # the section names the caller's batch
        for c in POSITION_COLUMNS:
            part[:, c] += start
        part[:, C_OFFSET_DELTA] += base_offsets[i]
        out[row : row + count] = part
        row += count
    rows[n] = row
    return -1


def verify_batches(data: Any, table: Any) -> int:
    """Kafka's ``ensureValid`` for many batches of one buffer: ``table`` holds (position, size, base offset,
    last offset) per batch, as ``walk_headers`` writes them. Each batch must lie in ``data``, be at least
    the 61-byte header, with magic 2 and the CRC-32C of its bytes [21, size) as stored. Returns the first
    row that fails (``RecordBatch.ensure_valid`` says why), or -1."""
    mv = memoryview(data).cast("B")
    flat = _int64_view(table, "table")
    if len(flat) % 4:
        raise ValueError("table must hold 4 int64 a batch")
    for i in range(len(flat) // 4):
        pos, size = flat[4 * i], flat[4 * i + 1]
        if (size < 61 or pos < 0 or pos > len(mv) or size > len(mv) - pos
                or 12 + int.from_bytes(mv[pos + 8 : pos + 12], "big", signed=True) != size or mv[pos + 16] != 2
                or crc32c(mv[pos + 21 : pos + size]) != int.from_bytes(mv[pos + 17 : pos + 21], "big")):
            return i
    return -1


def _decodable_count(mv: memoryview, pos: int, size: int) -> tuple[int, int]:
    """(records, codec id) of batch (pos, size) of a run as ``decode_columns`` sees it: 0 records for a
    control or empty batch, -1 for a batch it does not decode (a size other than its header's, a count
    an uncompressed batch's bytes cannot hold; a compressed one's is checked once decompressed)."""
    if size < 61 or pos < 0 or pos > len(mv) or size > len(mv) - pos:
        return -1, 0
    if 12 + int.from_bytes(mv[pos + 8 : pos + 12], "big", signed=True) != size:
        return -1, 0
    attrs = int.from_bytes(mv[pos + 21 : pos + 23], "big")
    count = int.from_bytes(mv[pos + 57 : pos + 61], "big", signed=True)
    if attrs & 0x20 or count == 0:
        return 0, 0
    codec = attrs & 0x07
    if count < 0 or not codec and count > (size - 61) // 7:
        return -1, codec
    return count, codec


def _wrap64(n: int) -> int:
    return (n + (1 << 63)) % (1 << 64) - (1 << 63)


DECODED_CODECS = (3, 4)  # lz4 and zstd: the codecs decode_columns decompresses itself


def decode_columns(data: Any, table: Any, start: int, end: int, max_size: int) -> DecodedColumns | None:
    """The columns a columnar reader (the Spark source) takes from a run of batches of one buffer: ``table``
    holds (position, size, base offset, last offset) per batch, as ``walk_headers`` writes them; lz4 and
    zstd batches are decompressed first, each to at most ``max_size`` bytes. Pass 0 (none is) unless the
    run's CRCs were verified: the compiled kernel decompresses with the system's libraries, which may
    notice damage otherwise than the Python codecs do. For every record
    of its data batches with an offset in [start, end): key and value as Arrow binary columns
    (``BinaryColumn``), the offset, the timestamp in microseconds (the batch's maxTimestamp under
    LogAppendTime) and the timestamp type, as int64, int64 and int32 bytes. Control batches give no rows.
    None when a batch is not one this decodes (another codec, a section the codecs refuse, a size other
    than its header's, a count its bytes cannot hold), a record fails ``scan_records``' checks or a
    timestamp leaves int64: the caller scans those the general way, which decompresses them or names the
    damage."""
    import numpy as np

    from ..errors import CorruptRecordError
    from .codecs import Codec, decompress

    mv = memoryview(data).cast("B")
    flat = _int64_view(table, "table")
    if len(flat) % 4:
        raise ValueError("table must hold 4 int64 a batch")
    wanted = []
    for i in range(0, len(flat), 4):
        count, codec = _decodable_count(mv, flat[i], flat[i + 1])
        if count < 0 or count and codec and (codec not in DECODED_CODECS or max_size <= 0):
            return None
        if count:
            wanted.append((flat[i], flat[i + 1], flat[i + 2], count, codec))
    sections, body_bytes = [], 0
    for pos, size, _base, count, codec in wanted:
        body = mv[pos + 61 : pos + size]
        if codec:
            try:
                body = memoryview(decompress(Codec(codec), bytes(body), max_size))
            except CorruptRecordError:
                return None
            if count > len(body) // 7:
                return None
        sections.append(body)
        body_bytes += len(body)
    if body_bytes > INT32_MAX:
        return None
    keys, values, offsets, stamps, types = [], [], [], [], []
    for (pos, _size, base_offset, count, _codec), body in zip(wanted, sections):
        attrs = int.from_bytes(mv[pos + 21 : pos + 23], "big")
        base_ts = int.from_bytes(mv[pos + 27 : pos + 35], "big", signed=True)
        max_ts = int.from_bytes(mv[pos + 35 : pos + 43], "big", signed=True)
        log_append = bool(attrs & 0x08)
        try:
            rows = list(_scan(body, count))
        except KernelError:
            return None
        for row in rows:
            offset = _wrap64(base_offset + row[C_OFFSET_DELTA])
            if not start <= offset < end:
                continue
            ms = max_ts if log_append else base_ts + row[C_TS_DELTA]
            if not -(1 << 63) <= ms < (1 << 63):
                return None
            keys.append(None if row[C_KEY_LEN] < 0 else bytes(body[row[C_KEY_POS] : row[C_KEY_POS] + row[C_KEY_LEN]]))
            values.append(None if row[C_VAL_LEN] < 0 else bytes(body[row[C_VAL_POS] : row[C_VAL_POS] + row[C_VAL_LEN]]))
            offsets.append(offset)
            stamps.append(_wrap64(ms * 1000))
            types.append(int(log_append))
    return DecodedColumns(len(offsets), _binary_column(keys), _binary_column(values),
                          np.array(offsets, dtype=np.int64).tobytes(), np.array(stamps, dtype=np.int64).tobytes(),
                          np.array(types, dtype=np.int32).tobytes())


def _binary_column(items: list[bytes | None]) -> BinaryColumn:
    """Values (None for null) in Arrow's binary layout, as ``gather_column`` lays them out."""
    import numpy as np

    lens = np.array([-1 if v is None else len(v) for v in items], dtype=np.int64)
    offsets = np.zeros(len(items) + 1, dtype=np.int32)
    np.cumsum(np.where(lens < 0, 0, lens), out=offsets[1:])
    nulls = int((lens < 0).sum())
    validity = np.packbits(lens >= 0, bitorder="little").tobytes() if nulls else None
    return BinaryColumn(offsets.tobytes(), b"".join(v for v in items if v is not None), validity, nulls)


def walk_headers(data: Any, position: int, segment_base: int, expected_next: int, known: bool, upper: int | None,
                 gaps_below: int | None, out: Any) -> int:
    """Walk the batch headers that pass the header rules, from ``position`` in ``data``; returns how many.

    The rules are those of ``storage.integrity.header_problem``, their one statement (with the messages a
    reader raises): this twin, like the compiled kernel, is their fast form, says only which headers pass,
    and is held to ``header_problem`` by ``tests/storage/test_header_walk.py`` (a rule changed there is
    changed here and in ``_native.c`` too). A batch passes when it is whole in ``data`` (a size,
    12 + batchLength, of at least the 61-byte header and within the buffer), has magic 2 and a
    lastOffsetDelta >= 0, starts at or after ``expected_next`` (the offset the first batch must start at),
    ends within 2^31 - 1 of ``segment_base`` and below ``upper``, and, when the batch before it is known
    (``known``; always from the second batch on), jumps past ``expected_next`` only below ``gaps_below``
    (``upper``, ``gaps_below``: the segment's ``Bounds``, None for none). Each batch that passes writes
    (position, size, base offset, last offset) as one row of ``out`` (int64, 4 a row) and the next must
    follow it; the walk stops at the first batch that fails or does not fit, at a last offset beyond int64
    (no stored batch has one), or when ``out`` is full."""
    mv = memoryview(data).cast("B")
    if not 0 <= position <= len(mv):
        raise ValueError(f"position {position} lies outside the data")
    rows = memoryview(out)
    if rows.itemsize != 8 or rows.format.lstrip("@=<") not in ("q", "l") or rows.readonly or not rows.c_contiguous:
        raise ValueError("out must be a writable C-contiguous int64 array")
    rows = rows.cast("B").cast("q")
    n, p, cap, expected = 0, position, len(rows) // 4, expected_next
    while n < cap and len(mv) - p >= 61:
        base, length = _BASE_AND_LENGTH.unpack_from(mv, p)
        size = 12 + length
        if not 61 <= size <= len(mv) - p or mv[p + 16] != 2:  # whole in the buffer; magic
            break
        (delta,) = _INT32.unpack_from(mv, p + 23)  # lastOffsetDelta
        last = base + delta
        if (delta < 0 or base < expected or last - segment_base > INT32_MAX  # MAX_RELATIVE_OFFSET
                or upper is not None and last >= upper
                or known and gaps_below is not None and base > max(expected, gaps_below) or last > INT64_MAX):
            break
        rows[4 * n], rows[4 * n + 1], rows[4 * n + 2], rows[4 * n + 3] = p, size, base, last
        n += 1
        expected, known, p = last + 1, True, p + size
    return n


_BASE_AND_LENGTH = struct.Struct(">qi")
_INT32 = struct.Struct(">i")


def _zigzag_encode(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def write_varint(out: bytearray, n: int) -> None:
    """Append ``n`` as a zigzag varint (valid for both the 32- and 64-bit forms)."""
    z = _zigzag_encode(n) & 0xFFFFFFFFFFFFFFFF
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)


def read_varint(data: Any, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    """Read one zigzag varint at ``pos``; returns (value, next position)."""
    shift = 0
    z = 0
    i = 0
    while True:
        if pos >= end:
            raise KernelError("premature EOF while reading a varint")
        b = data[pos]
        pos += 1
        z |= (b & 0x7F) << shift
        i += 1
        if not b & 0x80:
            break
        if i >= max_bytes:
            raise KernelError(f"varint is longer than {max_bytes} bytes")
        shift += 7
    z &= 0xFFFFFFFFFFFFFFFF  # a 10th byte's high bits fall off, as in Kafka's readVarlong and the C kernel
    return (z >> 1) ^ -(z & 1), pos


def encode_records(
    keys: Sequence[Any],
    values: Sequence[Any],
    timestamps: Sequence[int],
    base_timestamp: int,
    offset_deltas: Sequence[int] | None,
    headers: Sequence[Sequence[tuple[Any, Any]]] | Sequence[tuple[Any, Any]] | None,
    header_offsets: Sequence[int] | None = None,
) -> bytes:
    """Encode records into an uncompressed records section.

    ``offset_deltas`` None means 0..n-1. ``headers`` None means no record has headers; a header key is
    bytes or a str written as UTF-8. With ``header_offsets`` (n + 1 ints), ``headers`` is one flat
    sequence of pairs and record i's are ``headers[header_offsets[i]:header_offsets[i + 1]]``: columnar
    callers pass Arrow's list offsets instead of building a list per record.
    """
    n = len(keys)
    if len(values) != n or len(timestamps) != n:
        raise ValueError("keys, values and timestamps must have the same length")
    if offset_deltas is not None and len(offset_deltas) != n:
        raise ValueError("offset_deltas must have one entry per record")
    if headers is not None and header_offsets is not None:
        if len(header_offsets) != n + 1:
            raise ValueError("header_offsets must have one entry per record and one more")
    elif headers is not None and len(headers) != n:
        raise ValueError("headers must have one entry per record")
    out = bytearray()
    body = bytearray()
    for i in range(n):
        body.clear()
        body.append(0)
        ts_delta = timestamps[i] - base_timestamp
        if not -(1 << 63) <= ts_delta < (1 << 63):
            raise ValueError(f"timestamp delta {ts_delta} does not fit in 64 bits")
        write_varint(body, ts_delta)
        offset_delta = i if offset_deltas is None else offset_deltas[i]
        if not -(1 << 31) <= offset_delta < (1 << 31):
            raise ValueError(f"offset delta {offset_delta} does not fit in 32 bits")
        write_varint(body, offset_delta)
        for field in (keys[i], values[i]):
            if field is None:
                write_varint(body, -1)
            else:
                write_varint(body, len(field))
                body += field
        if headers is None:
            hdrs = ()
        elif header_offsets is None:
            hdrs = headers[i]
        else:
            lo, hi = header_offsets[i], header_offsets[i + 1]
            if not 0 <= lo <= hi <= len(headers):
                raise ValueError("header_offsets must rise from 0 to at most len(headers)")
            hdrs = headers[lo:hi]
        write_varint(body, len(hdrs))
        for hk, hv in hdrs:
            if isinstance(hk, str):
                hk = hk.encode("utf-8")
            write_varint(body, len(hk))
            body += hk
            if hv is None:
                write_varint(body, -1)
            else:
                write_varint(body, len(hv))
                body += hv
        write_varint(out, len(body))
        out += body
    return bytes(out)


def _read_bytes_field(data: Any, pos: int, end: int, what: str, nullable: bool) -> tuple[int, int, int]:
    length, pos = read_varint(data, pos, end, 5)
    if length < 0:
        if length == -1 and nullable:
            return pos, -1, pos
        raise KernelError(f"invalid {what} length {length}")
    if pos + length > end:
        raise KernelError(f"premature EOF: {what} of {length} bytes runs past the record")
    return pos, length, pos + length


def _check_count(count: int) -> None:
    if count < 0:
        raise KernelError(f"invalid record count {count}")


def _scan(data: Any, count: int) -> Iterator[list[int]]:
    """Validate ``count`` records filling ``data`` exactly, yielding each one's ``NCOLS`` columns."""
    total = len(data)
    pos = 0
    for i in range(count):
        if pos >= total:
            raise KernelError(f"premature EOF: expected {count} records, found {i}")
        start = pos
        length, pos = read_varint(data, pos, total, 5)
        if length <= 0:
            raise KernelError(f"invalid record length {length}")
        end = pos + length
        if end > total:
            raise KernelError(f"premature EOF: record of {length} bytes runs past the batch")
        pos += 1  # attributes
        ts_delta, pos = read_varint(data, pos, end, 10)
        off_delta, pos = read_varint(data, pos, end, 5)
        key_pos, key_len, pos = _read_bytes_field(data, pos, end, "key", True)
        val_pos, val_len, pos = _read_bytes_field(data, pos, end, "value", True)
        hdr_count, pos = read_varint(data, pos, end, 5)
        if hdr_count < 0:
            raise KernelError(f"invalid header count {hdr_count}")
        hdr_pos = pos
        for _ in range(hdr_count):
            _, _, pos = _read_bytes_field(data, pos, end, "header key", False)
            _, _, pos = _read_bytes_field(data, pos, end, "header value", True)
        if pos != end:
            raise KernelError(f"record length {length} does not match its {pos - (end - length)} bytes of content")
        row = [0] * NCOLS  # filled by column name: layout.py alone says where each one goes
        row[C_POS], row[C_END], row[C_OFFSET_DELTA], row[C_TS_DELTA] = start, end, off_delta, ts_delta
        row[C_KEY_POS], row[C_KEY_LEN], row[C_VAL_POS], row[C_VAL_LEN] = key_pos, key_len, val_pos, val_len
        row[C_HDR_POS], row[C_HDR_COUNT] = hdr_pos, hdr_count
        yield row
    if pos != total:
        raise KernelError(f"{total - pos} bytes still remaining after {count} records")


def scan_records(data: Any, count: int, out: Any) -> int:
    """Validate ``count`` records filling ``data`` exactly and write their columns into ``out``.

    ``out`` is a writable int64 array of shape (count, NCOLS). Returns the number of bytes read.
    """
    _check_count(count)
    shape = getattr(out, "shape", None)
    if shape is None or len(shape) != 2 or shape[0] < count or shape[1] != NCOLS or getattr(out, "dtype", None) != "int64":
        raise ValueError(f"out must be a writable int64 array of at least {count} rows of {NCOLS} columns")
    for i, row in enumerate(_scan(data, count)):
        out[i] = row
    return len(data)


def scan_many(data: Any, starts: Any, ends: Any, counts: Any, out: Any) -> int:
    """Scan several record sections of one buffer into consecutive rows, positions absolute in ``data``."""
    import numpy as np

    mv = memoryview(data)
    if not len(starts) == len(ends) == len(counts):
        raise ValueError("starts, ends and counts must have the same length")
    if len(out.shape) != 2 or out.shape[1] != NCOLS:
        raise ValueError(f"out must be a writable int64 array of {NCOLS} columns")
    row = 0
    for i, (s, e, n) in enumerate(zip(starts.tolist(), ends.tolist(), counts.tolist())):
        if n < 0 or row + n > len(out) or s < 0 or e > len(mv) or s > e:
            raise ValueError(f"section {i} does not fit the buffers")
        part = np.empty((n, NCOLS), dtype=np.int64)
        try:
            scan_records(mv[s:e], n, part)
        except KernelError as exc:
            raise KernelError(exc.reason, i) from None  # the section names the caller's batch
        for c in POSITION_COLUMNS:
            part[:, c] += s
        out[row : row + n] = part
        row += n
    return row


def gather_records(data: Any, cols: Any, rows: Any) -> bytes:
    """The raw bytes of the chosen records, concatenated (a valid records section when the batch keeps
    its base offset and base timestamp)."""
    mv = memoryview(data)
    return b"".join(bytes(mv[cols[r, C_POS] : cols[r, C_END]]) for r in rows.tolist())



def rebase_records(data: Any, cols: Any, rows: Any, ts_shift: int) -> bytes:
    """The chosen records with every timestamp delta moved by ``ts_shift`` and the rest (offset delta,
    key, value, headers) copied byte for byte: a records section for a new base timestamp."""
    mv = memoryview(data)
    out = bytearray()
    for r in rows.tolist():
        start, end = int(cols[r, C_POS]), int(cols[r, C_END])
        if not 0 <= start <= end <= len(mv):
            raise ValueError(f"row {r} lies outside the data")
        _, pos = read_varint(mv, start, end, 5)
        attributes = mv[pos]
        ts, pos = read_varint(mv, pos + 1, end, 10)
        moved = ts + ts_shift
        if not -(1 << 63) <= moved < (1 << 63):
            raise ValueError(f"timestamp delta {ts} moved by {ts_shift} does not fit in 64 bits")
        body = bytearray([attributes])
        write_varint(body, moved)
        body += mv[pos:end]
        write_varint(out, len(body))
        out += body
    return bytes(out)

def assemble_batches(data: Any, cols: Any, rows: Any, bounds: Any, shifts: Any, headers: Any, out_ends: Any) -> bytes:
    """Many batches rebuilt around their kept records: batch j is the 61-byte header
    ``headers[61j : 61j + 61]`` (every field but batchLength and the CRC set), then the records
    ``rows[bounds[j][0] : bounds[j][1]]`` of ``data`` (as ``gather_records``, or ``rebase_records`` by
    ``shifts[j]`` when it is not 0), with batchLength and the CRC-32C filled in; ``out_ends[j]`` is where
    it ends in the result."""
    hv = memoryview(headers).cast("B")
    m = len(shifts)
    if len(bounds) != m or len(hv) != 61 * m or len(out_ends) < m:
        raise ValueError(f"bounds, shifts, headers and out_ends must describe the same {m} batches")
    bounds = [(int(lo), int(hi)) for lo, hi in bounds.tolist()]
    if any(not 0 <= lo <= hi <= len(rows) for lo, hi in bounds):
        j = next(j for j, (lo, hi) in enumerate(bounds) if not 0 <= lo <= hi <= len(rows))
        raise IndexError(f"the rows of batch {j} are out of range")
    gather_records(data, cols, rows)  # every row checked before anything is built
    out = bytearray()
    for j, ((lo, hi), shift) in enumerate(zip(bounds, shifts.tolist())):
        chosen = rows[lo:hi]
        body = rebase_records(data, cols, chosen, shift) if shift else gather_records(data, cols, chosen)
        batch = bytearray(hv[61 * j : 61 * j + 61]) + body
        if len(batch) - 12 > INT32_MAX:
            raise OverflowError(f"batch {j} of {len(batch)} bytes is too large")
        batch[8:12] = (len(batch) - 12).to_bytes(4, "big")
        batch[17:21] = crc32c(batch[21:]).to_bytes(4, "big")
        out += batch
        out_ends[j] = len(out)
    return bytes(out)


def gather_column(data: Any, cols: Any, pos_col: int, len_col: int) -> BinaryColumn:
    """One binary column in Arrow's layout: int32 offsets, contiguous values, validity bitmap (None if
    nothing is null), null count."""
    mv = memoryview(data)
    return _binary_column([None if ln < 0 else bytes(mv[p : p + ln])
                           for p, ln in zip(cols[:, pos_col].tolist(), cols[:, len_col].tolist())])


def decode_headers(data: Any, pos: int, count: int) -> tuple[tuple[str, bytes | None], ...]:
    """Decode ``count`` headers starting at ``pos`` (already validated by a scan)."""
    end = len(data)
    out = []
    for _ in range(count):
        kp, kl, pos = _read_bytes_field(data, pos, end, "header key", False)
        vp, vl, pos = _read_bytes_field(data, pos, end, "header value", True)
        key = bytes(data[kp : kp + kl]).decode("utf-8", "replace")
        out.append((key, None if vl < 0 else bytes(data[vp : vp + vl])))
    return tuple(out)


def _header_keys_valid(data: Any, pos: int, count: int, end: int) -> bool:
    """Are the ``count`` header keys from ``pos`` all strict UTF-8 (no surrogates, no overlong forms)?"""
    for _ in range(count):
        kp, kl, pos = _read_bytes_field(data, pos, end, "header key", False)
        _, _, pos = _read_bytes_field(data, pos, end, "header value", True)
        try:
            bytes(data[kp : kp + kl]).decode("utf-8")
        except UnicodeDecodeError:
            return False
    return True


def decode_records(
    record_type: type,
    topic: str | None,
    partition: int,
    timestamp_type: int,
    data: Any,
    count: int,
    base_offset: int,
    base_timestamp: int,
    timestamp_override: int | None,
) -> list:
    """Decode ``count`` records into ``record_type`` tuples.

    Fields: (topic, partition, offset, timestamp, timestamp_type, key, value, headers). With
    ``timestamp_override`` set (LogAppendTime) every record's timestamp is that value.
    """
    _check_count(count)
    rows = list(_scan(data, count))  # every record is checked before any is decoded, as in the C kernel
    mv = memoryview(data)
    out = []
    for i, row in enumerate(rows):
        kl, vl = row[C_KEY_LEN], row[C_VAL_LEN]
        key = None if kl < 0 else bytes(mv[row[C_KEY_POS] : row[C_KEY_POS] + kl])
        value = None if vl < 0 else bytes(mv[row[C_VAL_POS] : row[C_VAL_POS] + vl])
        headers = decode_headers(mv, row[C_HDR_POS], row[C_HDR_COUNT]) if row[C_HDR_COUNT] else ()
        if timestamp_override is not None:
            ts = timestamp_override
        else:
            ts = base_timestamp + row[C_TS_DELTA]
            if not INT64_MIN <= ts <= INT64_MAX:
                raise KernelError(f"base timestamp {base_timestamp} + timestamp delta {row[C_TS_DELTA]} of record {i} "
                                  "is outside the int64 range")
        out.append(
            record_type(topic, partition, base_offset + row[C_OFFSET_DELTA], ts, timestamp_type, key, value, headers)
        )
    return out


def murmur2(data: Any) -> int:
    """Kafka's murmur2 (seed 0x9747b28c) as a signed 32-bit int: the default partitioner's hash."""
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    n4 = length & ~3
    for i in range(0, n4, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    rest = length & 3
    if rest == 3:
        h ^= data[n4 + 2] << 16
    if rest >= 2:
        h ^= data[n4 + 1] << 8
    if rest >= 1:
        h ^= data[n4]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def encode_columns(key_data: Any, key_spans: Any, value_data: Any, value_spans: Any, timestamps: Any,
                   base_timestamp: int, header_key_data: Any = None, header_key_spans: Any = None,
                   header_value_data: Any = None, header_value_spans: Any = None, header_ranges: Any = None) -> bytes:
    """The records section of ``len(timestamps)`` records (offset deltas 0..n-1) from columns as Arrow
    lays them out: record i's key is ``key_data[pos:pos + len]`` for ``(pos, len) = key_spans[i]``, a null
    key when ``len`` is -1, and its value likewise. With headers, record i's are the pairs
    ``header_ranges[i] = (first, count)`` of the header columns (pair j's key by ``header_key_spans[j]``,
    never null; its value by ``header_value_spans[j]``, -1 for null). Every span and timestamp delta is
    checked before anything is built."""
    with_headers = header_ranges is not None
    if any((x is not None) != with_headers for x in (header_key_data, header_key_spans, header_value_data,
                                                     header_value_spans)):
        raise ValueError("the header columns and header_ranges are given together or not at all")
    kd = memoryview(key_data).cast("B")  # the arguments are taken in order, as the compiled kernel takes them
    ks = _int64_view(key_spans, "key_spans").tolist()
    vd = memoryview(value_data).cast("B")
    vs = _int64_view(value_spans, "value_spans").tolist()
    ts = _int64_view(timestamps, "timestamps").tolist()
    _check_int64(base_timestamp)
    if with_headers:
        hkd = memoryview(header_key_data).cast("B")
        hks = _int64_view(header_key_spans, "header_key_spans").tolist()
        hvd = memoryview(header_value_data).cast("B")
        hvs = _int64_view(header_value_spans, "header_value_spans").tolist()
        ranges = _int64_view(header_ranges, "header_ranges").tolist()
    n = len(ts)
    if len(ks) != 2 * n or len(vs) != 2 * n or (with_headers and len(ranges) != 2 * n):
        raise ValueError("key_spans, value_spans and header_ranges must hold a pair per timestamp")
    if with_headers and (len(hks) % 2 or len(hvs) != len(hks)):
        raise ValueError("header_key_spans and header_value_spans must hold a pair per header")
    if n > (1 << 31):
        raise ValueError("a batch holds at most 2^31 records")

    def inside(data: memoryview, pos: int, length: int) -> bool:
        return length == -1 or (0 <= pos <= len(data) and 0 <= length <= len(data) - pos)

    def span_bytes(length: int) -> int:
        return 1 if length == -1 else _varint_bytes(length) + length

    limit = (1 << 31) - 1  # Kafka's record length is an int32 varint
    keys, values, pairs, offsets = [], [], [], [0]
    for i in range(n):  # checked in the compiled kernel's order, before anything is built
        kp, kl, vp, vl = ks[2 * i], ks[2 * i + 1], vs[2 * i], vs[2 * i + 1]
        if not inside(kd, kp, kl):
            raise ValueError(f"the key of record {i} lies outside key_data")
        if not inside(vd, vp, vl):
            raise ValueError(f"the value of record {i} lies outside value_data")
        if not -(1 << 63) <= ts[i] - base_timestamp < (1 << 63):
            raise ValueError(f"timestamp {ts[i]} of record {i} minus the base timestamp {base_timestamp} does not "
                             "fit in 64 bits")
        if span_bytes(kl) > limit or span_bytes(vl) > limit:
            raise ValueError(f"record {i} would take more than 2^31 - 1 bytes")
        header_bytes = 1
        if with_headers:
            first, count = ranges[2 * i], ranges[2 * i + 1]
            if not (0 <= first <= len(hks) // 2 and 0 <= count <= len(hks) // 2 - first):
                raise ValueError(f"the header range of record {i} lies outside the header columns")
            header_bytes = _varint_bytes(count)
            for j in range(first, first + count):
                hkp, hkl, hvp, hvl = hks[2 * j], hks[2 * j + 1], hvs[2 * j], hvs[2 * j + 1]
                if hkl == -1 or not inside(hkd, hkp, hkl):
                    raise ValueError(f"a header key of record {i} is null or lies outside header_key_data")
                if not inside(hvd, hvp, hvl):
                    raise ValueError(f"a header value of record {i} lies outside header_value_data")
                header_bytes += span_bytes(hkl) + span_bytes(hvl)
                if header_bytes > limit:
                    raise ValueError(f"record {i} would take more than 2^31 - 1 bytes")
            pairs += [(bytes(hkd[hks[2 * j] : hks[2 * j] + hks[2 * j + 1]]),
                       None if hvs[2 * j + 1] == -1 else bytes(hvd[hvs[2 * j] : hvs[2 * j] + hvs[2 * j + 1]]))
                      for j in range(first, first + count)]
            offsets.append(len(pairs))
        size = (1 + _varint_bytes(ts[i] - base_timestamp) + _varint_bytes(i) + span_bytes(kl) + span_bytes(vl)
                + header_bytes)
        if size > limit:
            raise ValueError(f"record {i} would take more than 2^31 - 1 bytes")
        keys.append(None if kl == -1 else bytes(kd[kp : kp + kl]))
        values.append(None if vl == -1 else bytes(vd[vp : vp + vl]))
    if with_headers:
        return encode_records(keys, values, ts, base_timestamp, None, pairs, offsets)
    return encode_records(keys, values, ts, base_timestamp, None, None)


def _varint_bytes(value: int) -> int:
    """The bytes of ``value`` as a zigzag varint."""
    z = (value << 1) ^ (value >> 63)
    return max(1, ((z & 0xFFFFFFFFFFFFFFFF).bit_length() + 6) // 7)


def _int64_view(obj: Any, what: str) -> memoryview:
    """An int64 array's items as one flat view, refused as the compiled kernels refuse anything else."""
    mv = memoryview(obj)
    if mv.itemsize != 8 or mv.format.lstrip("@=<") not in ("q", "l") or not mv.c_contiguous:
        raise ValueError(f"{what} must be a C-contiguous int64 array")
    if not mv.nbytes:  # a view with a 0 in its shape cannot be cast
        return memoryview(bytearray()).cast("q")
    return mv.cast("B").cast("q")


def _check_int64(value: int) -> None:
    """An int argument the compiled kernels take as a C long long: refused there beyond 64 bits."""
    if not -(1 << 63) <= value < (1 << 63):
        raise OverflowError("int too big to convert")


def _kafka_partition(key: Any, partitions: int) -> int:
    """Kafka's default partition of a key: its murmur2, made positive, modulo the partitions."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def partition_for_keys(keys: Sequence[Any], num_partitions: int) -> list[int]:
    """Kafka's default partition per key: ``(murmur2(key) & 0x7fffffff) % n``; -1 for a null key."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return [-1 if k is None else _kafka_partition(k, num_partitions) for k in keys]


def partition_spans(key_data: Any, key_spans: Any, num_partitions: int, out: Any) -> None:
    """``partition_for_keys`` for keys given as a column (``encode_columns``' spans: (position, length),
    -1 for a null key): ``out[i]`` is key i's partition, -1 for a null one. Every span is checked before
    any is hashed."""
    _check_int64(num_partitions)
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    data = memoryview(key_data).cast("B")
    spans = _int64_view(key_spans, "key_spans")
    dest = _int64_view(out, "out")
    if len(spans) != 2 * len(dest):
        raise ValueError("key_spans must hold a (position, length) pair per row of out")
    def inside(i: int) -> bool:
        pos, length = spans[2 * i], spans[2 * i + 1]
        return length == -1 or (0 <= pos <= len(data) and 0 <= length <= len(data) - pos)

    for i in range(len(dest)):
        if not inside(i):
            raise ValueError(f"the key of record {i} lies outside key_data")
    for i in range(len(dest)):  # read again, as the compiled kernel does: out may overlap key_spans
        if not inside(i):
            raise ValueError("key_spans changed while the keys were hashed")
        pos, length = spans[2 * i], spans[2 * i + 1]
        dest[i] = -1 if length == -1 else _kafka_partition(data[pos : pos + length], num_partitions)


def summarize_records(data: Any, count: int) -> RecordsSummary:
    """Validate like ``scan_records`` and return what append validation needs, without columns."""
    _check_count(count)
    nulls = bad_keys = 0
    lo = hi = 0
    sequential = True
    for i, row in enumerate(_scan(data, count)):
        nulls += row[C_KEY_LEN] < 0
        ts = row[C_TS_DELTA]
        if i == 0 or ts < lo:
            lo = ts
        if i == 0 or ts > hi:
            hi = ts
        sequential &= row[C_OFFSET_DELTA] == i
        if row[C_HDR_COUNT] and not _header_keys_valid(data, row[C_HDR_POS], row[C_HDR_COUNT], row[C_END]):
            bad_keys += 1
    return RecordsSummary(nulls, lo, hi, sequential, bad_keys)


# --- the log cleaner's offset map ------------------------------------------------------------------
_M64 = 0xFFFFFFFFFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def _fmix(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _M64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _M64
    return k ^ (k >> 33)


def key_hash(key: Any) -> bytes:
    """MurmurHash3 x64-128 of a key (the offset map's 16-byte hash; all-zero is reserved for empty)."""
    data = bytes(key)
    c1, c2 = 0x87C37B91114253D5, 0x4CF5AD432745937F
    h1 = h2 = 0
    n = len(data) // 16
    for i in range(n):
        k1 = int.from_bytes(data[i * 16 : i * 16 + 8], "little")
        k2 = int.from_bytes(data[i * 16 + 8 : i * 16 + 16], "little")
        k1 = (_rotl((k1 * c1) & _M64, 31) * c2) & _M64
        h1 ^= k1
        h1 = (((_rotl(h1, 27) + h2) & _M64) * 5 + 0x52DCE729) & _M64
        k2 = (_rotl((k2 * c2) & _M64, 33) * c1) & _M64
        h2 ^= k2
        h2 = (((_rotl(h2, 31) + h1) & _M64) * 5 + 0x38495AB5) & _M64
    tail = data[n * 16 :]
    if len(tail) > 8:
        k2 = int.from_bytes(tail[8:], "little")
        h2 ^= (_rotl((k2 * c2) & _M64, 33) * c1) & _M64
    if tail:
        k1 = int.from_bytes(tail[:8], "little")
        h1 ^= (_rotl((k1 * c1) & _M64, 31) * c2) & _M64
    h1 ^= len(data)
    h2 ^= len(data)
    h1 = (h1 + h2) & _M64
    h2 = (h2 + h1) & _M64
    h1, h2 = _fmix(h1), _fmix(h2)
    h1 = (h1 + h2) & _M64
    h2 = (h2 + h1) & _M64
    out = h1.to_bytes(8, "little") + h2.to_bytes(8, "little")
    return b"\x01" + out[1:] if out == bytes(16) else out


def _probe(h: bytes, attempt: int, slots: int) -> int:
    i = min(attempt, 12)
    v = int.from_bytes(h[i : i + 4], "big", signed=True)
    base = 0 if v == -(2**31) else abs(v)
    return (base + max(attempt - 12, 0)) % slots


def _find(table: Any, slots: int, h: bytes) -> tuple[int, bool, int]:
    attempt = 0
    while True:
        s = _probe(h, attempt, slots) * SLOT
        attempt += 1
        cur = bytes(table[s : s + 16])
        if cur == h:
            return s, True, attempt
        if cur == bytes(16):
            return s, False, attempt


def offset_map_put(table: Any, slots: int, max_entries: int, size: int, data: Any, cols: Any, base_offset: int,
                   start_row: int, min_offset: int, versions: Any = None,
                   row_versions: Any = None) -> MapPut:
    """Put keyed records' offsets from ``start_row`` on until the map is full; see ``_native.c``.

    With ``versions`` (one int64 per slot) and ``row_versions`` the map keeps, per key, the record with
    the highest version, ties going to the later offset (KIP-280)."""
    mv = memoryview(data)
    tv = memoryview(table).cast("B")
    probes = 0
    row = start_row
    full = False
    last_put = -1
    puts = 0
    rows = cols.tolist()
    while row < len(rows):
        r = rows[row]
        off = base_offset + r[C_OFFSET_DELTA]
        if r[C_KEY_LEN] >= 0 and off >= min_offset:
            if size >= max_entries:
                full = True
                break
            last_put = off
            puts += 1
            h = key_hash(mv[r[C_KEY_POS] : r[C_KEY_POS] + r[C_KEY_LEN]])
            s, found, p = _find(tv, slots, h)
            probes += p
            if versions is not None:
                v = int(row_versions[row])
                if found and v < int(versions[s // SLOT]):
                    row += 1
                    continue
                versions[s // SLOT] = v
            if not found:
                tv[s : s + 16] = h
                size += 1
            tv[s + 16 : s + 24] = off.to_bytes(8, "little", signed=True)
        row += 1
    return MapPut(size, row, full, probes, last_put, puts)


def offset_map_get(table: Any, slots: int, data: Any, cols: Any, out: Any, versions: Any = None,
                   out_versions: Any = None) -> None:
    """out[i] = the mapped offset of row i's key, or -1 (missing or null key); with ``versions``,
    out_versions[i] = the mapped version (int64 min when missing)."""
    mv = memoryview(data)
    tv = memoryview(table).cast("B")
    for i, r in enumerate(cols.tolist()):
        if r[C_KEY_LEN] < 0:
            out[i] = -1
            if versions is not None:
                out_versions[i] = -(2**63)
            continue
        s, found, _ = _find(tv, slots, key_hash(mv[r[C_KEY_POS] : r[C_KEY_POS] + r[C_KEY_LEN]]))
        out[i] = int.from_bytes(tv[s + 16 : s + 24], "little", signed=True) if found else -1
        if versions is not None:
            out_versions[i] = int(versions[s // SLOT]) if found else -(2**63)


def offset_map_set(table: Any, slots: int, versions: Any, data: Any, cols: Any, rows: Any, offsets: Any,
                   row_versions: Any) -> None:
    """Point the mapped keys of ``rows`` at new (offset, version) entries."""
    mv = memoryview(data)
    tv = memoryview(table).cast("B")
    for i, row in enumerate(rows.tolist()):
        r = cols[row].tolist()
        if r[C_KEY_LEN] < 0:
            continue
        s, found, _ = _find(tv, slots, key_hash(mv[r[C_KEY_POS] : r[C_KEY_POS] + r[C_KEY_LEN]]))
        if found:
            tv[s + 16 : s + 24] = int(offsets[i]).to_bytes(8, "little", signed=True)
            versions[s // SLOT] = int(row_versions[i])


def offset_map_grow(table: Any, old_slots: int, new_slots: int, versions: Any = None) -> None:
    """Re-place the entries of the first ``old_slots`` slots over the first ``new_slots``, in place: each
    entry is taken out and probed for in the larger table; a slot still holding an entry not yet moved
    is taken over and that entry carried on in its place. The same walk as ``_native.c``, so the two
    leave the same bytes."""
    tv = memoryview(table).cast("B")
    if old_slots <= 0 or new_slots < old_slots or new_slots > len(tv) // SLOT or (
            versions is not None and len(versions) < new_slots):
        raise ValueError(f"cannot grow a map of {old_slots} slots to {new_slots} in this table")
    empty = bytes(SLOT)
    moved = [False] * new_slots
    for i in range(old_slots):
        s = i * SLOT
        if moved[i] or tv[s : s + 16] == empty[:16]:
            continue
        entry = bytes(tv[s : s + SLOT])
        ver = int(versions[i]) if versions is not None else 0
        tv[s : s + SLOT] = empty
        if versions is not None:
            versions[i] = 0
        attempt = 0
        while True:  # carry the entry until it lands on a free slot
            p = _probe(entry[:16], attempt, new_slots)
            attempt += 1
            q = p * SLOT
            if moved[p]:
                continue
            taken = bytes(tv[q : q + SLOT])
            taken_ver = int(versions[p]) if versions is not None else 0
            tv[q : q + SLOT] = entry
            moved[p] = True
            if versions is not None:
                versions[p] = ver
            if taken[:16] == empty[:16]:
                break
            entry, ver, attempt = taken, taken_ver, 0  # an entry not moved yet: carried now


def header_versions(data: Any, cols: Any, name: bytes | str, out: Any) -> None:
    """KIP-280 version of each record from header ``name``: 8-byte big-endian long or ASCII digits; -1 if absent."""
    key = name.encode() if isinstance(name, str) else bytes(name)
    mv = memoryview(data)
    for i, r in enumerate(cols.tolist()):
        v = -1
        pos = r[C_HDR_POS]
        for _ in range(r[C_HDR_COUNT]):
            # header keys compared as bytes: one that is not UTF-8 is just not the named header
            kp, kl, pos = _read_bytes_field(mv, pos, len(mv), "header key", False)
            vp, vl, pos = _read_bytes_field(mv, pos, len(mv), "header value", True)
            if bytes(mv[kp : kp + kl]) != key or vl < 0:
                continue
            hv = bytes(mv[vp : vp + vl])
            if len(hv) == 8:
                v = int.from_bytes(hv, "big", signed=True)
            elif 0 < len(hv) <= 18 and hv.isdigit():
                v = int(hv)
        out[i] = v
