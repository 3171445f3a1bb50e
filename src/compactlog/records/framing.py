"""The framing of compressed records sections, read without decoding them.

Walking a stream's frame and block headers tells where it ends and the most it can decompress to, in
microseconds. The decoders use it to refuse a stream that would exceed its limit before the codec
library allocates for it, and to decode in one call a stream whose blocks cannot; a server uses it to
decide where a batch is decompressed (``decompressed_bound``): a few kilobytes can inflate to megabytes.
"""

from __future__ import annotations

import struct
from typing import Any, Iterator

from ..errors import CorruptRecordError

# codec ids, as a batch's attributes hold them (``codecs.Codec``, which imports this module)
NONE, SNAPPY, LZ4, ZSTD = 0, 2, 3, 4

SNAPPY_MAGIC = b"\x82SNAPPY\x00"
SNAPPY_HEADER = SNAPPY_MAGIC + struct.pack(">ii", 1, 1)
LZ4_MAGIC = 0x184D2204
LZ4_UNCOMPRESSED = 0x80000000
_INT = struct.Struct(">i")
_UINT_LE = struct.Struct("<I")


class TooManyBlocks(Exception):
    """A walk met more blocks than its ``Budget`` allows."""


class Budget:
    """How many blocks (and frames) one walk may look at: a hostile stream of tiny blocks makes a walk
    cost a Python step per few bytes, which a caller on an event loop bounds this way."""

    def __init__(self, blocks: int) -> None:
        self.left = blocks

    def spend(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise TooManyBlocks


def snappy_raw_length(block: memoryview) -> int:
    """The uncompressed length a raw snappy block declares in its varint preamble (at most 2**32 - 1)."""
    n = shift = 0
    for b in block[:5]:
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            if n > 0xFFFFFFFF:
                break
            return n
        shift += 7
    raise CorruptRecordError("snappy block has no valid length preamble")


def snappy_blocks(mv: memoryview, budget: Budget | None = None) -> Iterator[memoryview]:
    """The raw blocks of a snappy-java stream (or of concatenated streams), without decoding them."""
    if len(mv) < len(SNAPPY_HEADER):
        raise CorruptRecordError("snappy stream ends inside its 16-byte header")
    pos = len(SNAPPY_HEADER)
    end = len(mv)
    while pos < end:
        if budget is not None:
            budget.spend()
        if end - pos >= 8 and bytes(mv[pos : pos + 8]) == SNAPPY_MAGIC:
            if end - pos < len(SNAPPY_HEADER):
                raise CorruptRecordError("snappy stream ends inside its 16-byte header")
            pos += len(SNAPPY_HEADER)  # a concatenated stream starts here
            continue
        if end - pos < 4:
            raise CorruptRecordError("snappy stream ends inside a block length")
        (n,) = _INT.unpack_from(mv, pos)
        pos += 4
        if n < 0 or pos + n > end:
            raise CorruptRecordError(f"snappy block of {n} bytes runs past the end of the batch")
        yield mv[pos : pos + n]
        pos += n


def lz4_frame(mv: memoryview, budget: Budget | None = None) -> tuple[int, int] | None:
    """(end, the most its blocks can decompress to) of the lz4 frame at the start of ``mv``, from its
    header and block sizes without decoding it; None when the walk meets anything odd (another magic,
    a truncated header or block), which the decoder then reports as it reads."""
    n = len(mv)
    if n < 7 or _UINT_LE.unpack_from(mv)[0] != LZ4_MAGIC:
        return None
    flags, descriptor = mv[4], mv[5]
    block_max = 1 << (8 + 2 * (descriptor >> 4 & 7))  # 4: 64 KiB, 5: 256 KiB, 6: 1 MiB, 7: 4 MiB
    checksum = 4 if flags & 0x10 else 0
    p = 7 + (8 if flags & 0x08 else 0) + (4 if flags & 0x01 else 0)
    bound = 0
    while p + 4 <= n:
        if budget is not None:
            budget.spend()
        (head,) = _UINT_LE.unpack_from(mv, p)
        p += 4
        if head == 0:  # the end mark, then the content checksum if the frame has one
            p += 4 if flags & 0x04 else 0
            return (p, bound) if p <= n else None
        size = head & ~LZ4_UNCOMPRESSED
        bound += size if head & LZ4_UNCOMPRESSED else block_max
        p += size + checksum
    return None


_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_SKIPPABLE = 0x184D2A50  # 0x184D2A50..0x184D2A5F: a skippable frame (no output)
_ZSTD_BLOCK_MAX = 128 * 1024  # the most one block decompresses to
_ZSTD_FCS_SIZES = (0, 2, 4, 8)
_ZSTD_DICT_ID_SIZES = (0, 1, 2, 4)


def zstd_frame(mv: memoryview, pos: int, budget: Budget | None = None) -> tuple[int, int | None, int | None]:
    """Walk the frame at ``pos`` (RFC 8878 section 3.1) without decoding it.

    Returns (end, declared content size or None, the most its blocks can decompress to); the bound is
    None for a skippable frame, which holds no data. A frame whose blocks or checksum run past the data
    is truncated.
    """
    n = len(mv)
    if n - pos < 4:
        raise CorruptRecordError("zstd frame is truncated")
    (magic,) = _UINT_LE.unpack_from(mv, pos)
    if magic & 0xFFFFFFF0 == _ZSTD_SKIPPABLE:
        if n - pos < 8:
            raise CorruptRecordError("zstd frame is truncated")
        end = pos + 8 + _UINT_LE.unpack_from(mv, pos + 4)[0]
        if end > n:
            raise CorruptRecordError("zstd frame is truncated")
        return end, None, None
    if magic != _ZSTD_MAGIC:
        raise CorruptRecordError(f"zstd frame has an unknown magic number {magic:#010x}")
    if n - pos < 5:
        raise CorruptRecordError("zstd frame is truncated")
    descriptor = mv[pos + 4]
    if descriptor & 0x08:
        raise CorruptRecordError("zstd frame header has its reserved bit set")
    single_segment = descriptor & 0x20
    fcs_size = 1 if descriptor >> 6 == 0 and single_segment else _ZSTD_FCS_SIZES[descriptor >> 6]
    header = 5 + (0 if single_segment else 1) + _ZSTD_DICT_ID_SIZES[descriptor & 3] + fcs_size
    if n - pos < header:
        raise CorruptRecordError("zstd frame is truncated")
    declared = None
    if fcs_size:
        declared = int.from_bytes(mv[pos + header - fcs_size : pos + header], "little") + (256 if fcs_size == 2 else 0)
    p = pos + header
    bound = 0
    while True:
        if budget is not None:
            budget.spend()
        if n - p < 3:
            raise CorruptRecordError("zstd frame is truncated")
        block = mv[p] | mv[p + 1] << 8 | mv[p + 2] << 16
        kind, size = block >> 1 & 3, block >> 3
        p += 3
        if kind == 0:  # raw
            p += size
            bound += size
        elif kind == 1:  # RLE: one byte, repeated size times
            p += 1
            bound += size
        elif kind == 2:  # compressed
            p += size
            bound += _ZSTD_BLOCK_MAX
        else:
            raise CorruptRecordError("zstd block has the reserved type 3")
        if p > n:
            raise CorruptRecordError("zstd frame is truncated")
        if block & 1:  # the last block
            break
    if descriptor & 0x04:  # content checksum
        p += 4
        if p > n:
            raise CorruptRecordError("zstd frame is truncated")
    return p, declared, bound


def decompressed_bound(codec_id: int, data: Any, max_blocks: int | None = None) -> int | None:
    """The most ``data``, a records section compressed with codec ``codec_id``, can decompress to, read
    from its framing without decoding it (lz4 and zstd block sizes, snappy's length preambles), or None
    where the framing does not tell (gzip, an unknown codec, framing the decoder would refuse) or holds
    more than ``max_blocks`` blocks and frames (a walk's cost: a Python step per block).

    Lets a caller choose where to decompress: a few kilobytes can inflate to megabytes, and a server's
    event loop must not be stopped for that, while a batch known to be small costs less than the hop
    to a worker thread."""
    mv = memoryview(data)
    budget = None if max_blocks is None else Budget(max_blocks)
    try:
        if codec_id == NONE:
            return len(mv)
        if codec_id == LZ4:
            found = lz4_frame(mv, budget)
            return None if found is None else found[1]
        if codec_id == ZSTD:
            total = pos = 0
            while pos < len(mv):
                if budget is not None:
                    budget.spend()
                pos, _, bound = zstd_frame(mv, pos, budget)
                total += bound or 0
            return total
        if codec_id == SNAPPY:
            if bytes(mv[:8]) != SNAPPY_MAGIC:
                return snappy_raw_length(mv)
            return sum(snappy_raw_length(block) for block in snappy_blocks(mv, budget))
    except (CorruptRecordError, TooManyBlocks):
        return None
    return None
