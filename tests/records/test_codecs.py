"""Kafka's codec framing and levels: xerial snappy, lz4 frames with independent blocks, gzip, zstd."""

from __future__ import annotations

import gzip
import os
import struct

import cramjam
import lz4.frame
import pytest
import zstandard

from compactlog.errors import CorruptRecordError, UnsupportedCompressionTypeError
from compactlog.records.codecs import Codec, check_level, codec_from_name, compress, decompress

INPUTS = [b"", b"a", b"kafka " * 20_000, os.urandom(1 << 20)]


@pytest.mark.parametrize("codec", list(Codec), ids=lambda c: c.config_name)
@pytest.mark.parametrize("data", INPUTS, ids=["empty", "one", "compressible", "random"])
def test_round_trip(codec, data):
    assert decompress(codec, compress(codec, data)) == data


def test_snappy_writes_xerial_framing_with_32k_blocks():
    out = compress(Codec.SNAPPY, b"x" * 100_000)
    assert out[:8] == b"\x82SNAPPY\x00" and struct.unpack(">ii", out[8:16]) == (1, 1)
    pos, blocks = 16, []
    while pos < len(out):
        (n,) = struct.unpack_from(">i", out, pos)
        blocks.append(len(cramjam.snappy.decompress_raw(out[pos + 4 : pos + 4 + n])))
        pos += 4 + n
    assert blocks == [32768, 32768, 32768, 100_000 - 3 * 32768]


def test_snappy_reads_raw_blocks_and_concatenated_streams():
    assert decompress(Codec.SNAPPY, bytes(cramjam.snappy.compress_raw(b"raw block"))) == b"raw block"
    two = compress(Codec.SNAPPY, b"first ") + compress(Codec.SNAPPY, b"second")
    assert decompress(Codec.SNAPPY, two) == b"first second"


def test_gzip_reads_concatenated_members_and_is_standard_gzip():
    assert decompress(Codec.GZIP, gzip.compress(b"a") + gzip.compress(b"b")) == b"ab"
    assert gzip.decompress(compress(Codec.GZIP, b"hello")) == b"hello"


def test_lz4_frame_is_kafkas_and_linked_blocks_are_rejected():
    out = compress(Codec.LZ4, b"y" * 200_000)
    assert out[:4] == bytes.fromhex("04224d18") and out[4] == 0x60 and out[5] == 0x40
    linked = lz4.frame.compress(b"z" * 200_000, block_linked=True)
    with pytest.raises(CorruptRecordError, match="linked blocks"):
        decompress(Codec.LZ4, linked)


def test_zstd_streams_without_content_size_and_across_frames():
    c = zstandard.ZstdCompressor(write_content_size=False)
    assert decompress(Codec.ZSTD, c.compress(b"one") + c.compress(b"two")) == b"onetwo"
    assert zstandard.frame_content_size(compress(Codec.ZSTD, b"abc")) == -1


@pytest.mark.parametrize("codec, ok, bad", [
    (Codec.GZIP, [1, 9, -1], [0, 10, -2]),
    (Codec.LZ4, [1, 17], [0, 18]),
    (Codec.ZSTD, [-131072, 22, 1], [23, -131073]),
])
def test_levels_follow_kip_390(codec, ok, bad):
    for level in ok:
        check_level(codec, level)
        assert decompress(codec, compress(codec, b"abc" * 1000, level)) == b"abc" * 1000
    for level in bad:
        with pytest.raises(ValueError, match=f"compression.{codec.config_name}.level"):
            check_level(codec, level)


def test_level_changes_the_output():
    import random

    rng = random.Random(3)
    data = b"".join(
        b'{"sku": "p%05d", "price": %d.%02d, "stock": %d, "tags": ["%s"]}' %
        (rng.randrange(99999), rng.randrange(500), rng.randrange(100), rng.randrange(40), rng.choice([b"new", b"sale", b"eu"]))
        for _ in range(20_000)
    )
    assert len(compress(Codec.ZSTD, data, 19)) < len(compress(Codec.ZSTD, data, 1))
    assert len(compress(Codec.GZIP, data, 9)) < len(compress(Codec.GZIP, data, 1))


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD], ids=lambda c: c.config_name)
def test_garbage_is_a_corrupt_record(codec):
    with pytest.raises(CorruptRecordError):
        decompress(codec, b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x09garbage!!" if codec is Codec.SNAPPY else b"garbage bytes here")


def test_codec_names():
    assert codec_from_name("uncompressed") is Codec.NONE and codec_from_name("ZSTD") is Codec.ZSTD
    with pytest.raises(UnsupportedCompressionTypeError, match="Unknown compression name: brotli"):
        codec_from_name("brotli")
