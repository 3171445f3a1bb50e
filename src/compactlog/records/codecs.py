"""Batch compression codecs with Kafka's framing and level rules.

Kafka compresses the records section of a batch (everything after the 61-byte header) as one stream:

* gzip  - an RFC 1952 member; readers accept concatenated members.
* snappy - snappy-java's "xerial" stream framing (16-byte preamble, then int32-length-prefixed raw
  blocks of at most 32 KiB). Readers also accept a bare raw snappy block and concatenated streams.
* lz4   - the LZ4 frame format with independent 64 KiB blocks (Kafka rejects linked blocks).
* zstd  - ordinary zstd frames, usually without a content size, so decoding is streamed.

Levels follow KIP-390: ``compression.gzip.level`` 1..9 or -1 (zlib's default, 6),
``compression.lz4.level`` 1..17 (default 9), ``compression.zstd.level`` -131072..22 (default 3).
"""

from __future__ import annotations

import struct
import threading
import zlib
from enum import IntEnum

import cramjam
import lz4.block
import lz4.frame
import zstandard

from ..errors import CorruptRecordError, InvalidConfigError, UnsupportedCompressionTypeError


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


# (min, max, default) per codec, as Kafka's compression.<codec>.level configs define them.
LEVELS: dict[Codec, tuple[int, int, int]] = {
    Codec.GZIP: (1, 9, -1),
    Codec.LZ4: (1, 17, 9),
    Codec.ZSTD: (-131072, 22, 3),
}


def codec_from_name(name: str) -> Codec:
    """Map a producer or topic codec name (``none``/``uncompressed``/``gzip``/...) to its id."""
    lowered = name.strip().lower()
    if lowered in ("none", "uncompressed"):
        return Codec.NONE
    try:
        return Codec[lowered.upper()]
    except KeyError:
        raise UnsupportedCompressionTypeError(
            f"Unknown compression name: {name}. Valid names are none, gzip, snappy, lz4, zstd"
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
    lo, hi, default = LEVELS[codec]
    if level == default or lo <= level <= hi:
        return level
    raise InvalidConfigError(f"compression.{codec.config_name}.level must be in [{lo}, {hi}]" +
                             (" or -1" if codec is Codec.GZIP else "") + f", got {level}")


_SNAPPY_MAGIC = b"\x82SNAPPY\x00"
_SNAPPY_HEADER = _SNAPPY_MAGIC + struct.pack(">ii", 1, 1)
_SNAPPY_BLOCK = 32 * 1024
_INT = struct.Struct(">i")


def _snappy_compress(data: bytes) -> bytes:
    out = [_SNAPPY_HEADER]
    mv = memoryview(data)
    for start in range(0, len(data), _SNAPPY_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(mv[start : start + _SNAPPY_BLOCK]))
        out.append(_INT.pack(len(block)))
        out.append(block)
    return b"".join(out)


def _snappy_decompress(data: bytes) -> bytes:
    mv = memoryview(data)
    if bytes(mv[:8]) != _SNAPPY_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(mv))
    if len(mv) < len(_SNAPPY_HEADER):
        raise CorruptRecordError("snappy stream ends inside its 16-byte header")
    out = []
    pos = len(_SNAPPY_HEADER)
    end = len(mv)
    while pos < end:
        if end - pos >= 8 and bytes(mv[pos : pos + 8]) == _SNAPPY_MAGIC:
            if end - pos < len(_SNAPPY_HEADER):
                raise CorruptRecordError("snappy stream ends inside its 16-byte header")
            pos += len(_SNAPPY_HEADER)  # a concatenated stream starts here
            continue
        if end - pos < 4:
            raise CorruptRecordError("snappy stream ends inside a block length")
        (n,) = _INT.unpack_from(mv, pos)
        pos += 4
        if n < 0 or pos + n > end:
            raise CorruptRecordError(f"snappy block of {n} bytes runs past the end of the batch")
        out.append(bytes(cramjam.snappy.decompress_raw(mv[pos : pos + n])))
        pos += n
    return b"".join(out)


def _gzip_compress(data: bytes, level: int) -> bytes:
    # A plain gzip member with mtime 0, as Java's GZIPOutputStream writes it.
    co = zlib.compressobj(6 if level == -1 else level, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return co.compress(data) + co.flush()


def _gzip_decompress(data: bytes) -> bytes:
    out = []
    rest = data
    while rest:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        out.append(d.decompress(rest))
        if not d.eof:
            raise CorruptRecordError("gzip stream is truncated")
        rest = d.unused_data
    return b"".join(out)


# Kafka's Lz4BlockOutputStream frame header: magic, FLG 0x60 (version 01, independent blocks, no checksums,
# no content size), BD 0x40 (64 KiB blocks), HC = (xxh32(FLG, BD) >> 8) & 0xFF.
_LZ4_FRAME_HEADER = bytes.fromhex("04224d18604082")
_LZ4_BLOCK = 64 * 1024
_LZ4_UNCOMPRESSED = 0x80000000
_UINT_LE = struct.Struct("<I")


def _lz4_compress(data: bytes, level: int) -> bytes:
    # Framed by hand because the frame API cannot do what Kafka does: level 9 (the default) is the fast
    # compressor and every other level 1..17 the HC compressor (the frame API silently uses the fast one
    # below level 3). Blocks that do not shrink are stored uncompressed, as Kafka's writer stores them.
    if level == LEVELS[Codec.LZ4][2]:
        kwargs = {"mode": "default"}
    else:
        kwargs = {"mode": "high_compression", "compression": level}
    out = [_LZ4_FRAME_HEADER]
    mv = memoryview(data)
    for start in range(0, len(mv), _LZ4_BLOCK):
        chunk = mv[start : start + _LZ4_BLOCK]
        block = lz4.block.compress(chunk, store_size=False, **kwargs)
        if len(block) >= len(chunk):
            out.append(_UINT_LE.pack(len(chunk) | _LZ4_UNCOMPRESSED))
            out.append(bytes(chunk))
        else:
            out.append(_UINT_LE.pack(len(block)))
            out.append(block)
    out.append(_UINT_LE.pack(0))
    return b"".join(out)


def _lz4_decompress(data: bytes) -> bytes:
    if len(data) >= 5 and data[4] & 0x20 == 0:
        raise CorruptRecordError("lz4 frames with linked blocks are not supported (Kafka writes independent blocks)")
    return lz4.frame.decompress(data)


# zstd contexts carry state and must not be used by two threads at once (doing so corrupts output or
# crashes), so each thread keeps its own compressor per level and its own decompressor.
_ZSTD = threading.local()


def _zstd_compressor(level: int) -> zstandard.ZstdCompressor:
    cache = getattr(_ZSTD, "compressors", None)
    if cache is None:
        cache = _ZSTD.compressors = {}
    c = cache.get(level)
    if c is None:
        c = cache[level] = zstandard.ZstdCompressor(level=level, write_content_size=False)
    return c


def _zstd_decompressor() -> zstandard.ZstdDecompressor:
    d = getattr(_ZSTD, "decompressor", None)
    if d is None:
        d = _ZSTD.decompressor = zstandard.ZstdDecompressor()
    return d


def _zstd_compress(data: bytes, level: int) -> bytes:
    return _zstd_compressor(level).compress(data)


def _zstd_decompress(data: bytes) -> bytes:
    # One frame at a time: a frame that stops before its end is an error (a single decompressobj reading
    # across frames would return the partial output silently).
    out = []
    rest = data
    dctx = _zstd_decompressor()
    while len(rest):
        d = dctx.decompressobj()
        out.append(d.decompress(rest))
        if not d.eof:
            raise CorruptRecordError("zstd frame is truncated")
        rest = d.unused_data
    return b"".join(out)


def compress(codec: Codec, data: bytes, level: int | None = None) -> bytes:
    """Compress a records section with ``codec`` at ``level`` (None = the codec's default)."""
    if codec is Codec.NONE:
        return data
    if codec is Codec.SNAPPY:
        return _snappy_compress(data)
    lvl = check_level(codec, level)
    if lvl is None:
        lvl = LEVELS[codec][2]
    if codec is Codec.GZIP:
        return _gzip_compress(data, lvl)
    if codec is Codec.LZ4:
        return _lz4_compress(data, lvl)
    return _zstd_compress(data, lvl)


def decompress(codec: Codec, data: bytes) -> bytes:
    """Decompress a records section; any codec failure is a corrupt record."""
    if codec is Codec.NONE:
        return data
    try:
        if codec is Codec.GZIP:
            return _gzip_decompress(data)
        if codec is Codec.SNAPPY:
            return _snappy_decompress(data)
        if codec is Codec.LZ4:
            return _lz4_decompress(data)
        return _zstd_decompress(data)
    except CorruptRecordError:
        raise
    except Exception as exc:
        raise CorruptRecordError(f"cannot decompress {codec.config_name} records: {exc}") from exc
