"""Batch compression codecs with Kafka's framing and level rules.

Kafka compresses the records section of a batch (everything after the 61-byte header) as one stream:

* gzip  - an RFC 1952 member; readers accept concatenated members.
* snappy - snappy-java's "xerial" stream framing (16-byte preamble, then int32-length-prefixed raw
  blocks of at most 32 KiB). Readers also accept a bare raw snappy block and concatenated streams.
* lz4   - the LZ4 frame format with independent 64 KiB blocks (Kafka rejects linked blocks).
* zstd  - ordinary zstd frames, usually without a content size, so decoding is streamed.

Levels follow KIP-390 (``compression.<codec>.level``; the ranges and defaults are ``levels.py``'s).

Decompression is bounded: a batch's records may decompress to at most ``max_size`` bytes
(``DEFAULT_MAX_DECOMPRESSED_BYTES`` unless the caller says otherwise). Whatever a hostile batch declares
or holds, no codec produces more than that, and none is asked to allocate much more: sizes the stream
declares (a snappy block's length preamble, an lz4 or zstd frame's content size) are checked before the
library sees them, and output is pulled in bounded steps.
"""

from __future__ import annotations

import struct
import threading
import zlib
from enum import IntEnum
from typing import TYPE_CHECKING, Any

from ..errors import CorruptRecordError, InvalidConfigError, UnsupportedCompressionTypeError, shown
from .framing import (
    LZ4_MAGIC as _LZ4_MAGIC,
    LZ4_UNCOMPRESSED as _LZ4_UNCOMPRESSED,
    SNAPPY_HEADER as _SNAPPY_HEADER,
    SNAPPY_MAGIC as _SNAPPY_MAGIC,
    lz4_frame as _lz4_frame,
    snappy_blocks as _snappy_blocks,
    snappy_raw_length as _snappy_raw_length,
    zstd_frame as _zstd_frame,
)
from .levels import LEVEL_RANGES, LevelRange

if TYPE_CHECKING:
    import zstandard

# The snappy and lz4 libraries, bound by the first call that needs each (``cramjam or _cramjam()``):
# opening a log, or reading an uncompressed or gzip one, loads neither. zstandard is imported where its
# per-thread contexts are made.
cramjam: Any = None
lz4: Any = None


def _cramjam() -> Any:
    global cramjam
    import cramjam  # binds the global

    return cramjam


def _lz4() -> Any:
    global lz4
    import lz4.block  # binds the package to the global
    import lz4.frame

    return lz4

# The most a batch's records may decompress to. Kafka's own bound is implicit (a consumer's fetch and
# heap sizes); a broker that validates appends needs an explicit one, or one small batch can claim
# gigabytes. 64 MiB is 64 times Kafka's default max.message.bytes.
DEFAULT_MAX_DECOMPRESSED_BYTES = 64 * 1024 * 1024
_reader_bound = DEFAULT_MAX_DECOMPRESSED_BYTES


def reader_bound() -> int:
    """The most a batch's records may decompress to for a read that names no bound (see below)."""
    return _reader_bound


def allow_reading_up_to(max_size: int) -> None:
    """Raise this process's bound for reads that name none (never lower it): a process that accepts
    appends up to ``message.max.decompressed.bytes`` must be able to read back what it accepted."""
    global _reader_bound
    _reader_bound = max(_reader_bound, int(max_size))


class Codec(IntEnum):
    """Compression type ids as stored in bits 0-2 of a batch's attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @property
    def config_name(self) -> str:
        """The name Kafka's configs use (``none`` on the producer side, ``uncompressed`` on topics)."""
        return "none" if self is Codec.NONE else self.name.lower()


# (min, max, default) per codec that has levels, as Kafka's compression.<codec>.level configs define them.
LEVELS: dict[Codec, LevelRange] = {Codec[name.upper()]: r for name, r in LEVEL_RANGES.items()}


def codec_from_name(name: str) -> Codec:
    """Map a producer or topic codec name (``none``/``uncompressed``/``gzip``/...) to its id."""
    lowered = name.strip().lower()
    if lowered in ("none", "uncompressed"):
        return Codec.NONE
    try:
        return Codec[lowered.upper()]
    except KeyError:
        raise UnsupportedCompressionTypeError(
            f"Unknown compression name: {shown(name, '')}. Valid names are none, gzip, snappy, lz4, zstd"
        ) from None


def codec_from_id(codec_id: int) -> Codec:
    """Map attribute bits 0-2 to a codec, with Kafka's error for 5-7."""
    try:
        return Codec(codec_id)
    except ValueError:
        raise CorruptRecordError(f"Unknown compression type id: {codec_id}") from None


def check_level(codec: Codec, level: int | None) -> int | None:
    """Validate a level for ``codec``; None means the codec's default."""
    if level is None or codec not in LEVELS:
        return level if codec in LEVELS else None
    levels = LEVELS[codec]
    if levels.allows(level):
        return level
    lo, hi = levels.lo, levels.hi
    # Kafka's validators' words (ConfigDef.Range, and gzip's own "or equal to -1")
    if not lo <= levels.default <= hi:
        rule = f"Value must be between {lo} and {hi} or equal to {levels.default}"
    else:
        rule = f"Value must be at least {lo}" if level < lo else f"Value must be no more than {hi}"
    raise InvalidConfigError(f"Invalid value {level} for configuration compression.{codec.config_name}.level: {rule}")


def _too_big(limit: int) -> CorruptRecordError:
    return CorruptRecordError(f"records decompress to more than {limit} bytes (the limit for one batch)")


def _joined(parts: list) -> bytes:
    return parts[0] if len(parts) == 1 and isinstance(parts[0], bytes) else b"".join(parts)


_SNAPPY_BLOCK = 32 * 1024
_INT = struct.Struct(">i")


def _snappy_compress(data: bytes) -> bytes:
    out = [_SNAPPY_HEADER]
    mv = memoryview(data)
    snappy = (cramjam or _cramjam()).snappy
    for start in range(0, len(data), _SNAPPY_BLOCK):
        block = bytes(snappy.compress_raw(mv[start : start + _SNAPPY_BLOCK]))
        out.append(_INT.pack(len(block)))
        out.append(block)
    return b"".join(out)


def _snappy_raw(block: memoryview, room: int, limit: int) -> bytes:
    # The library allocates whatever the preamble says before it looks at the data: check it first.
    if _snappy_raw_length(block) > room:
        raise _too_big(limit)
    return bytes((cramjam or _cramjam()).snappy.decompress_raw(block))


def _snappy_decompress(data: bytes, limit: int) -> bytes:
    mv = memoryview(data)
    if bytes(mv[:8]) != _SNAPPY_MAGIC:
        return _snappy_raw(mv, limit, limit)
    out = []
    total = 0
    for raw in _snappy_blocks(mv):
        block = _snappy_raw(raw, limit - total, limit)
        total += len(block)
        out.append(block)
    return b"".join(out)


def _gzip_compress(data: bytes, level: int) -> bytes:
    # A plain gzip member with mtime 0, as Java's GZIPOutputStream writes it.
    gzip = LEVELS[Codec.GZIP]
    co = zlib.compressobj(gzip.effective_default if level == gzip.default else level, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return co.compress(data) + co.flush()


def _gzip_decompress(data: bytes, limit: int) -> bytes:
    out = []
    total = 0
    rest = data
    while len(rest):
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        # One byte more than the room left: getting it means the member is too big. zlib grows its
        # output as it goes, so a large max_length allocates nothing up front.
        piece = d.decompress(rest, limit - total + 1)
        total += len(piece)
        if total > limit:
            raise _too_big(limit)
        if not d.eof:
            raise CorruptRecordError("gzip stream is truncated")
        out.append(piece)
        rest = d.unused_data
    return _joined(out)


# Kafka's Lz4BlockOutputStream frame header: magic, FLG 0x60 (version 01, independent blocks, no checksums,
# no content size), BD 0x40 (64 KiB blocks), HC = (xxh32(FLG, BD) >> 8) & 0xFF.
_LZ4_FRAME_HEADER = bytes.fromhex("04224d18604082")
_LZ4_BLOCK = 64 * 1024
_UINT_LE = struct.Struct("<I")


def _lz4_compress(data: bytes, level: int) -> bytes:
    # Framed by hand because the frame API cannot do what Kafka does: level 9 (the default) is the fast
    # compressor and every other level 1..17 the HC compressor (the frame API silently uses the fast one
    # below level 3). Blocks that do not shrink are stored uncompressed, as Kafka's writer stores them.
    if level == LEVELS[Codec.LZ4].default:
        kwargs = {"mode": "default"}
    else:
        kwargs = {"mode": "high_compression", "compression": level}
    out = [_LZ4_FRAME_HEADER]
    mv = memoryview(data)
    compress_block = (lz4 or _lz4()).block.compress
    for start in range(0, len(mv), _LZ4_BLOCK):
        chunk = mv[start : start + _LZ4_BLOCK]
        block = compress_block(chunk, store_size=False, **kwargs)
        if len(block) >= len(chunk):
            out.append(_UINT_LE.pack(len(chunk) | _LZ4_UNCOMPRESSED))
            out.append(bytes(chunk))
        else:
            out.append(_UINT_LE.pack(len(block)))
            out.append(block)
    out.append(_UINT_LE.pack(0))
    return b"".join(out)


def _lz4_decompress(data: bytes, limit: int) -> bytes:
    # One frame, as Kafka reads it: bytes after its end mark are not read.
    mv = memoryview(data)
    if len(mv) >= 5 and mv[4] & 0x20 == 0:
        raise CorruptRecordError("lz4 frames with linked blocks are not supported (Kafka writes independent blocks)")
    declared = 0  # not stated; FLG bit 3 says an 8-byte content size follows FLG and BD
    if len(mv) >= 14 and _UINT_LE.unpack_from(mv)[0] == _LZ4_MAGIC and mv[4] & 0x08:
        declared = int.from_bytes(mv[6:14], "little")
        if declared > limit:
            raise _too_big(limit)
    frame_end_and_bound = _lz4_frame(mv)
    if frame_end_and_bound is not None and frame_end_and_bound[1] <= limit:
        # Its blocks cannot hold more than the limit (nor can its declared size, checked above): decoded
        # in one call, in a sixteenth of the time the stepped reads below take for 1 MB of small records.
        return (lz4 or _lz4()).frame.decompress(mv[: frame_end_and_bound[0]])
    # The decoder allocates max_length up front, so output is pulled in growing steps.
    frame = (lz4 or _lz4()).frame
    ctx = frame.create_decompression_context()
    step = declared + 1 if declared else max(_LZ4_BLOCK, 4 * len(mv))
    out = []
    total = pos = 0
    while True:
        piece, used, end = frame.decompress_chunk(ctx, mv[pos:], max_length=min(limit - total + 1, step))
        pos += used
        total += len(piece)
        if total > limit:
            raise _too_big(limit)
        out.append(piece)
        if end:
            return _joined(out)
        if not piece and not used:
            raise CorruptRecordError("lz4 frame is truncated")
        step *= 2


# zstd contexts carry state and must not be used by two threads at once (doing so corrupts output or
# crashes), so each thread keeps its own compressor per level and its own decompressor.
_ZSTD = threading.local()


def _zstd_compressor(level: int) -> zstandard.ZstdCompressor:
    cache = getattr(_ZSTD, "compressors", None)
    if cache is None:
        cache = _ZSTD.compressors = {}
    c = cache.get(level)
    if c is None:
        import zstandard

        c = cache[level] = zstandard.ZstdCompressor(level=level, write_content_size=False)
    return c


def _zstd_decompressor() -> zstandard.ZstdDecompressor:
    d = getattr(_ZSTD, "decompressor", None)
    if d is None:
        import zstandard

        d = _ZSTD.decompressor = zstandard.ZstdDecompressor()
    return d


def _zstd_compress(data: bytes, level: int) -> bytes:
    return _zstd_compressor(level).compress(data)


def _zstd_decompress(data: bytes, limit: int) -> bytes:
    # One frame at a time, each walked first: a frame that stops before its end is an error (a single
    # decoder reading across frames would return the partial output silently), a declared content size
    # above the room left is refused unread, and output is read with a bound.
    mv = memoryview(data)
    out = []
    total = 0
    pos = 0
    dctx = _zstd_decompressor()
    while pos < len(mv):
        end, declared, bound = _zstd_frame(mv, pos)
        room = limit - total
        if declared is not None and declared > room:
            raise _too_big(limit)
        if bound is not None:
            # Sized by the blocks, not by the declared size: the decoder checks that one at the frame's end,
            # which a read that stopped at the declared size would never reach.
            with dctx.stream_reader(mv[pos:end], read_across_frames=False) as reader:
                piece = reader.read(min(bound, room) + 1)
            total += len(piece)
            if total > limit:
                raise _too_big(limit)
            out.append(piece)
        pos = end
    return _joined(out)


def effective_level(codec: Codec, level: int | None) -> int:
    """The level a compression with ``codec`` at ``level`` (None: the codec's default) is asked for,
    spelled out (the config's own default value, such as gzip's -1); 0 for a codec without levels."""
    lvl = check_level(codec, level)
    if lvl is None:
        return LEVELS[codec].default if codec in LEVELS else 0
    return lvl


def compress(codec: Codec, data: bytes, level: int | None = None) -> bytes:
    """Compress a records section with ``codec`` at ``level`` (None = the codec's default)."""
    if codec is Codec.NONE:
        return data
    if codec is Codec.SNAPPY:
        return _snappy_compress(data)
    lvl = effective_level(codec, level)
    if codec is Codec.GZIP:
        return _gzip_compress(data, lvl)
    if codec is Codec.LZ4:
        return _lz4_compress(data, lvl)
    return _zstd_compress(data, lvl)


def decompress(codec: Codec, data: bytes, max_size: int | None = None) -> bytes:
    """Decompress a records section; any codec failure is a corrupt record.

    The output never exceeds ``max_size`` bytes (None = ``DEFAULT_MAX_DECOMPRESSED_BYTES``, or what
    ``allow_reading_up_to`` raised it to): more is a CorruptRecordError saying so, raised before the
    codec library allocates for it.
    """
    if codec is Codec.NONE:
        return data
    limit = _reader_bound if max_size is None else max_size
    try:
        if codec is Codec.GZIP:
            return _gzip_decompress(data, limit)
        if codec is Codec.SNAPPY:
            return _snappy_decompress(data, limit)
        if codec is Codec.LZ4:
            return _lz4_decompress(data, limit)
        return _zstd_decompress(data, limit)
    except CorruptRecordError:
        raise
    except Exception as exc:
        raise CorruptRecordError(f"cannot decompress {codec.config_name} records: {exc}") from exc
