"""Kafka's codec framing and levels (spec §1.7, §7): gzip, xerial snappy, lz4 frames with independent
blocks, zstd; and that what does not decode is a corrupt record."""

from __future__ import annotations

import gzip
import random
import struct
import zlib

import cramjam
import lz4.block
import lz4.frame
import pytest
import zstandard

from compactlog.errors import CorruptRecordError, InvalidConfigError, UnsupportedCompressionTypeError
from compactlog.records.framing import decompressed_bound
from compactlog.records.codecs import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    LEVELS,
    Codec,
    check_level,
    codec_from_id,
    codec_from_name,
    compress,
    decompress,
)

COMPRESSED = [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD]
ids = lambda c: c.config_name  # noqa: E731

INCOMPRESSIBLE = random.Random(1).randbytes(1 << 20)


def _json_like(n: int = 20_000) -> bytes:
    rng = random.Random(3)
    return b"".join(
        b'{"sku": "p%05d", "price": %d.%02d, "stock": %d, "tags": ["%s"]}'
        % (rng.randrange(99999), rng.randrange(500), rng.randrange(100), rng.randrange(40),
           rng.choice([b"new", b"sale", b"eu"]))
        for _ in range(n)
    )


COMPRESSIBLE = _json_like()
INPUTS = {
    "empty": b"",
    "one": b"a",
    "small": b"kafka record batch",
    "1MB-repetitive": b"kafka " * ((1 << 20) // 6),
    "1MB-incompressible": INCOMPRESSIBLE,
    "compressible": COMPRESSIBLE,
}


@pytest.mark.parametrize("codec", list(Codec), ids=ids)
@pytest.mark.parametrize("name", list(INPUTS))
def test_round_trip(codec, name):
    data = INPUTS[name]
    out = compress(codec, data)
    assert decompress(codec, out) == data
    assert decompress(codec, memoryview(out)) == data  # batches hand the codecs views of a buffer
    if codec is Codec.NONE:
        assert out == data
    elif name.startswith("1MB-repetitive") or name == "compressible":
        assert len(out) < len(data) / 3


def test_codec_ids_and_names():
    assert [int(c) for c in Codec] == [0, 1, 2, 3, 4]
    assert [codec_from_id(i) for i in range(5)] == list(Codec)
    for bad in (5, 6, 7):
        with pytest.raises(CorruptRecordError, match=f"Unknown compression type id: {bad}"):
            codec_from_id(bad)
    assert codec_from_name("uncompressed") is Codec.NONE and codec_from_name("none") is Codec.NONE
    assert codec_from_name(" ZSTD ") is Codec.ZSTD and codec_from_name("lz4") is Codec.LZ4
    assert [c.config_name for c in Codec] == ["none", "gzip", "snappy", "lz4", "zstd"]
    with pytest.raises(UnsupportedCompressionTypeError, match="Unknown compression name: brotli"):
        codec_from_name("brotli")


# -- gzip ------------------------------------------------------------------------------------------


def test_gzip_writes_a_plain_member():
    out = compress(Codec.GZIP, b"hello" * 100)
    assert out[:4] == bytes.fromhex("1f8b0800")  # magic, deflate, no flags (no name, no extra fields)
    assert out[4:8] == b"\x00\x00\x00\x00"  # mtime 0
    assert struct.unpack("<II", out[-8:]) == (zlib.crc32(b"hello" * 100), 500)
    assert gzip.decompress(out) == b"hello" * 100


def test_gzip_reads_concatenated_members_and_java_style_headers():
    assert decompress(Codec.GZIP, gzip.compress(b"a") + gzip.compress(b"bc", mtime=5) + compress(Codec.GZIP, b"d")) == b"abcd"
    # JDK >= 16 writes OS byte 255; the reader must not care.
    member = bytearray(gzip.compress(b"jdk", mtime=0))
    member[9] = 0xFF
    assert decompress(Codec.GZIP, bytes(member)) == b"jdk"


@pytest.mark.parametrize("cut", [1, 4, 8, 20])
def test_gzip_truncated_member_is_corrupt(cut):
    out = compress(Codec.GZIP, COMPRESSIBLE[:5000])
    with pytest.raises(CorruptRecordError):
        decompress(Codec.GZIP, out[:-cut])


# -- snappy ----------------------------------------------------------------------------------------

XERIAL_MAGIC = bytes.fromhex("82534e4150505900")


def _xerial_blocks(out: bytes) -> list[bytes]:
    assert out[:8] == XERIAL_MAGIC and struct.unpack(">ii", out[8:16]) == (1, 1)
    pos, blocks = 16, []
    while pos < len(out):
        (n,) = struct.unpack_from(">i", out, pos)
        blocks.append(bytes(cramjam.snappy.decompress_raw(out[pos + 4 : pos + 4 + n])))
        pos += 4 + n
    assert pos == len(out)
    return blocks


@pytest.mark.parametrize("name", ["1MB-incompressible", "1MB-repetitive", "small"])
def test_snappy_writes_xerial_framing_with_32k_blocks(name):
    data = INPUTS[name]
    blocks = _xerial_blocks(compress(Codec.SNAPPY, data))
    assert b"".join(blocks) == data
    assert all(len(b) == 32768 for b in blocks[:-1]) and 0 < len(blocks[-1]) <= 32768


def test_snappy_empty_input_is_the_bare_preamble():
    assert compress(Codec.SNAPPY, b"") == XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    assert decompress(Codec.SNAPPY, XERIAL_MAGIC + struct.pack(">ii", 1, 1)) == b""


def test_snappy_reads_a_raw_block_without_preamble():
    assert decompress(Codec.SNAPPY, bytes(cramjam.snappy.compress_raw(b"raw block"))) == b"raw block"
    assert decompress(Codec.SNAPPY, bytes(cramjam.snappy.compress_raw(COMPRESSIBLE))) == COMPRESSIBLE


def test_snappy_reads_concatenated_streams_and_large_blocks():
    two = compress(Codec.SNAPPY, b"first " * 10_000) + compress(Codec.SNAPPY, b"second")
    assert decompress(Codec.SNAPPY, two) == b"first " * 10_000 + b"second"
    # Old snappy-java wrote bigger blocks; any block size must be read.
    big = bytes(cramjam.snappy.compress_raw(COMPRESSIBLE))
    stream = XERIAL_MAGIC + struct.pack(">ii", 1, 1) + struct.pack(">i", len(big)) + big
    assert decompress(Codec.SNAPPY, stream) == COMPRESSIBLE


@pytest.mark.parametrize("cut", [1, 3, 4, 10])
def test_snappy_truncated_stream_is_corrupt(cut):
    out = compress(Codec.SNAPPY, COMPRESSIBLE[:5000])
    with pytest.raises(CorruptRecordError):
        decompress(Codec.SNAPPY, out[:-cut])


@pytest.mark.parametrize("cut", [9, 12, 15])
def test_snappy_preamble_cut_short_is_corrupt(cut):
    with pytest.raises(CorruptRecordError, match="16-byte header"):
        decompress(Codec.SNAPPY, compress(Codec.SNAPPY, b"abc")[:cut])
    with pytest.raises(CorruptRecordError, match="16-byte header"):
        decompress(Codec.SNAPPY, compress(Codec.SNAPPY, b"abc") + XERIAL_MAGIC + b"\x00")


# -- lz4 -------------------------------------------------------------------------------------------


def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32 for short inputs (< 16 bytes), enough to check an LZ4 frame header checksum."""
    assert len(data) < 16
    p1, p2, p3, p4, p5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
    mask = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    h = (seed + p5 + len(data)) & mask
    i = 0
    while i + 4 <= len(data):
        (lane,) = struct.unpack_from("<I", data, i)
        h = (rotl((h + lane * p3) & mask, 17) * p4) & mask
        i += 4
    for byte in data[i:]:
        h = (rotl((h + byte * p5) & mask, 11) * p1) & mask
    h ^= h >> 15
    h = (h * p2) & mask
    h ^= h >> 13
    h = (h * p3) & mask
    h ^= h >> 16
    return h


def _lz4_blocks(out: bytes) -> list[tuple[bool, int]]:
    """Walk a Kafka-style frame (no content size, no checksums): (stored uncompressed, size) per block."""
    pos, blocks = 7, []
    while True:
        (word,) = struct.unpack_from("<I", out, pos)
        pos += 4
        if word == 0:
            break
        size = word & 0x7FFFFFFF
        blocks.append((bool(word & 0x80000000), size))
        pos += size
    assert pos == len(out)  # nothing after the end mark: no content checksum
    return blocks


def test_xxh32_reference():
    assert xxh32(b"") == 0x02CC5D05  # the published XXH32 of the empty input, seed 0


@pytest.mark.parametrize("level", [None, 1, 2, 9, 12, 17])
@pytest.mark.parametrize("name", ["empty", "small", "1MB-incompressible", "compressible"])
def test_lz4_frame_is_kafkas(level, name):
    data = INPUTS[name]
    out = compress(Codec.LZ4, data, level)
    assert out[:4] == bytes.fromhex("04224d18")
    assert out[4] == 0x60 and out[5] == 0x40
    assert out[6] == (xxh32(out[4:6]) >> 8) & 0xFF == 0x82
    blocks = _lz4_blocks(out)
    assert len(blocks) == -(-len(data) // 65536)
    if name == "1MB-incompressible":
        assert all(stored and size == 65536 for stored, size in blocks)
    if name == "compressible":
        assert not any(stored for stored, _ in blocks) and all(size < 65536 for _, size in blocks)
    # Other LZ4 frame readers agree.
    assert lz4.frame.decompress(out) == data
    assert bytes(cramjam.lz4.decompress(out)) == data


def test_lz4_reads_frames_other_writers_make():
    data = COMPRESSIBLE
    # kafka-python style: content size stored; block and content checksums; 4 MiB blocks (cramjam's default).
    for kwargs in ({"store_size": True}, {"content_checksum": True, "block_checksum": True},
                   {"block_size": lz4.frame.BLOCKSIZE_MAX4MB}, {"compression_level": 12}):
        assert decompress(Codec.LZ4, lz4.frame.compress(data, block_linked=False, **kwargs)) == data
    cj = cramjam.lz4.Compressor(level=9, content_checksum=False, block_linked=False)  # aiokafka's writer
    cj.compress(data)
    assert decompress(Codec.LZ4, bytes(cj.finish())) == data
    # cramjam's default frame links its blocks: Kafka cannot read that, neither do we.
    with pytest.raises(CorruptRecordError, match="linked blocks"):
        decompress(Codec.LZ4, bytes(cramjam.lz4.compress(data)))
    # A hand-made frame with one compressed and one stored block, as Java's Lz4BlockOutputStream writes them.
    a, b = data[:65536], data[65536:70000]
    ca = lz4.block.compress(a, store_size=False)
    frame = (bytes.fromhex("04224d18604082") + struct.pack("<I", len(ca)) + ca
             + struct.pack("<I", len(b) | 0x80000000) + b + struct.pack("<I", 0))
    assert decompress(Codec.LZ4, frame) == a + b


def test_lz4_linked_blocks_are_rejected():
    linked = lz4.frame.compress(b"z" * 200_000, block_linked=True)
    assert linked[4] & 0x20 == 0
    with pytest.raises(CorruptRecordError, match="linked blocks"):
        decompress(Codec.LZ4, linked)


def test_lz4_bad_header_checksum_and_truncation_are_corrupt():
    out = bytearray(compress(Codec.LZ4, COMPRESSIBLE[:100_000]))
    for cut in (1, 4, 5, 100):
        with pytest.raises(CorruptRecordError):
            decompress(Codec.LZ4, bytes(out[:-cut]))
    out[6] ^= 0x01
    with pytest.raises(CorruptRecordError):
        decompress(Codec.LZ4, bytes(out))


# -- zstd ------------------------------------------------------------------------------------------


def test_zstd_writes_frames_without_content_size():
    out = compress(Codec.ZSTD, b"abc" * 1000)
    assert out[:4] == bytes.fromhex("28b52ffd")
    assert zstandard.frame_content_size(out) == -1
    assert zstandard.ZstdDecompressor().decompressobj().decompress(out) == b"abc" * 1000


def test_zstd_streams_without_content_size_and_across_frames():
    c = zstandard.ZstdCompressor(write_content_size=False)
    assert decompress(Codec.ZSTD, c.compress(b"one")) == b"one"
    assert decompress(Codec.ZSTD, c.compress(b"one") + c.compress(b"two")) == b"onetwo"
    # A frame that does carry its content size (kafka-python writes those) and a large streamed one.
    sized = zstandard.ZstdCompressor().compress(COMPRESSIBLE)
    assert decompress(Codec.ZSTD, sized + c.compress(INCOMPRESSIBLE)) == COMPRESSIBLE + INCOMPRESSIBLE
    assert decompress(Codec.ZSTD, bytes(cramjam.zstd.compress(b"cramjam"))) == b"cramjam"


@pytest.mark.parametrize("cut", [1, 3, 10, 1000])
def test_zstd_truncated_frame_is_corrupt(cut):
    out = compress(Codec.ZSTD, INCOMPRESSIBLE[:100_000])
    with pytest.raises(CorruptRecordError):
        decompress(Codec.ZSTD, out[:-cut])
    with pytest.raises(CorruptRecordError):
        decompress(Codec.ZSTD, compress(Codec.ZSTD, b"whole frame") + out[:-cut])


# -- levels ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec, ok, bad", [
    (Codec.GZIP, [1, 5, 9, -1], [0, 10, -2, 100]),
    (Codec.LZ4, [1, 9, 17], [0, 18, -1]),
    (Codec.ZSTD, [-131072, -1, 0, 1, 3, 22], [23, -131073]),
])
def test_levels_follow_kip_390(codec, ok, bad):
    assert LEVELS[codec][:2] == {Codec.GZIP: (1, 9), Codec.LZ4: (1, 17), Codec.ZSTD: (-131072, 22)}[codec]
    assert check_level(codec, None) is None
    for level in ok:
        assert check_level(codec, level) == level
        assert decompress(codec, compress(codec, COMPRESSIBLE[:20_000], level)) == COMPRESSIBLE[:20_000]
    for level in bad:
        msg = rf"Invalid value {level} for configuration compression\.{codec.config_name}\.level: Value must be"  # Kafka's words
        with pytest.raises(InvalidConfigError, match=msg):  # typed, so the CLI prints it as an error
            check_level(codec, level)
        with pytest.raises(InvalidConfigError, match=msg):
            compress(codec, b"abc", level)


def test_defaults_are_kafkas():
    assert {c: LEVELS[c][2] for c in LEVELS} == {Codec.GZIP: -1, Codec.LZ4: 9, Codec.ZSTD: 3}
    for codec in LEVELS:
        assert compress(codec, COMPRESSIBLE) == compress(codec, COMPRESSIBLE, LEVELS[codec][2])
    assert compress(Codec.GZIP, COMPRESSIBLE, -1) == compress(Codec.GZIP, COMPRESSIBLE, 6)


def test_every_user_of_the_levels_reads_them_from_one_table():
    """The topic configs, their checks, the advisor and the commands' help take each codec's range and
    default from ``codecs.LEVELS``: changing a number there changes all of them."""
    from click.testing import CliRunner

    from compactlog.cli import main as cli
    from compactlog.errors import InvalidConfigError as ConfigError
    from compactlog.records import levels
    from compactlog.advisor import DEFAULT_LEVEL
    from compactlog.storage.topic_config import TOPIC_CONFIGS

    for codec, r in LEVELS.items():
        key = TOPIC_CONFIGS[f"compression.{codec.config_name}.level"]
        assert key.default == r.default and r is levels.LEVEL_RANGES[codec.config_name]
        for level in (r.lo, r.hi, r.default):
            key.parse(level)
        for level in (r.lo - 1, r.hi + 1):
            with pytest.raises(ConfigError):
                key.parse(level)
        assert DEFAULT_LEVEL[codec] == r.effective_default
    assert compress(Codec.GZIP, COMPRESSIBLE, LEVELS[Codec.GZIP].effective_default) == compress(Codec.GZIP, COMPRESSIBLE)
    produce_help = CliRunner().invoke(cli, ["produce", "--help"], terminal_width=400).output
    assert levels.levels_text() == "gzip 1..9 or -1, lz4 1..17, zstd -131072..22"
    assert levels.levels_text() in " ".join(produce_help.split())
    recompress_help = " ".join(CliRunner().invoke(cli, ["spark", "recompress", "--help"], terminal_width=400).output.split())
    assert all(f"{name} level ({r.text})" in recompress_help for name, r in levels.LEVEL_RANGES.items())


def test_codecs_without_levels_ignore_them():
    assert check_level(Codec.SNAPPY, 99) is None and check_level(Codec.NONE, 99) is None
    assert compress(Codec.SNAPPY, COMPRESSIBLE, 99) == compress(Codec.SNAPPY, COMPRESSIBLE)


@pytest.mark.parametrize("codec, low, high", [(Codec.GZIP, 1, 9), (Codec.ZSTD, 1, 19), (Codec.ZSTD, -50, 1)])
def test_level_changes_the_output(codec, low, high):
    small, large = compress(codec, COMPRESSIBLE, high), compress(codec, COMPRESSIBLE, low)
    assert len(small) < len(large)
    assert decompress(codec, small) == decompress(codec, large) == COMPRESSIBLE


def test_lz4_levels_other_than_the_default_use_the_hc_compressor():
    """Kafka: level 9 (the default) is LZ4's fast compressor; any other level 1..17 is the HC one."""
    fast = len(compress(Codec.LZ4, COMPRESSIBLE, 9))
    sizes = {level: len(compress(Codec.LZ4, COMPRESSIBLE, level)) for level in (1, 2, 3, 8, 10, 12, 17)}
    assert all(size < fast for size in sizes.values()), (fast, sizes)
    assert sizes[12] < sizes[1]


# -- garbage ---------------------------------------------------------------------------------------

GARBAGE = [
    b"garbage bytes here",
    b"\x00" * 40,
    bytes(range(256)),
    XERIAL_MAGIC + struct.pack(">ii", 1, 1) + struct.pack(">i", 9) + b"garbage!!",
    bytes.fromhex("04224d18604082") + struct.pack("<I", 20) + b"\xff" * 20 + struct.pack("<I", 0),
    bytes.fromhex("28b52ffd") + b"\x00" * 20,
    bytes.fromhex("1f8b0800000000000003") + b"\xff" * 20,
]


@pytest.mark.parametrize("codec", COMPRESSED, ids=ids)
@pytest.mark.parametrize("data", GARBAGE, ids=range(len(GARBAGE)))
def test_garbage_is_a_corrupt_record(codec, data):
    with pytest.raises(CorruptRecordError):
        decompress(codec, data)


# -- threads ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", COMPRESSED, ids=ids)
def test_codecs_are_safe_to_use_from_many_threads(codec):
    """The cleaner, appenders and readers compress and decompress at the same time."""
    from concurrent.futures import ThreadPoolExecutor

    inputs = [random.Random(i).randbytes(40_000) + bytes(60_000) for i in range(8)]
    frames = [compress(codec, d) for d in inputs]

    def work(i: int) -> bool:
        return all(
            decompress(codec, frames[i]) == inputs[i] and decompress(codec, compress(codec, inputs[i])) == inputs[i]
            for _ in range(40)
        )

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(work, range(8)))


# -- bounds ----------------------------------------------------------------------------------------
# A hostile batch may claim or hold any amount of output: decompress never returns more than its bound
# and refuses a declared size above it before the codec library allocates for it.

LIMIT = 100_000


def too_big(limit: int) -> str:
    return f"^records decompress to more than {limit} bytes \\(the limit for one batch\\)$"


def test_the_default_bound_is_64_mib():
    assert DEFAULT_MAX_DECOMPRESSED_BYTES == 64 * 1024 * 1024


@pytest.mark.parametrize("codec", COMPRESSED, ids=ids)
@pytest.mark.parametrize("data", [COMPRESSIBLE[:LIMIT], INCOMPRESSIBLE[:LIMIT]], ids=["compressible", "incompressible"])
def test_output_up_to_the_bound_is_read_and_one_byte_more_is_refused(codec, data):
    out = compress(codec, data)
    assert decompress(codec, out, LIMIT) == data
    assert decompress(codec, memoryview(out), LIMIT) == data
    with pytest.raises(CorruptRecordError, match=too_big(LIMIT - 1)):
        decompress(codec, out, LIMIT - 1)
    with pytest.raises(CorruptRecordError, match=too_big(1)):
        decompress(codec, out, 1)
    assert decompress(Codec.NONE, data, 1) == data  # nothing to decompress, nothing to bound


def _concatenated(codec: Codec, parts: list[bytes]) -> bytes:
    if codec is Codec.ZSTD:
        return b"".join(zstandard.ZstdCompressor(write_content_size=False).compress(p) for p in parts)
    return b"".join(compress(codec, p) for p in parts)


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.ZSTD], ids=ids)
def test_the_bound_holds_across_concatenated_members_streams_and_frames(codec):
    parts = [COMPRESSIBLE[:60_000], COMPRESSIBLE[60_000:100_000], COMPRESSIBLE[100_000:100_001]]
    out = _concatenated(codec, parts)
    assert decompress(codec, out, 100_001) == COMPRESSIBLE[:100_001]
    for limit in (100_000, 60_000, 59_999):
        with pytest.raises(CorruptRecordError, match=too_big(limit)):
            decompress(codec, out, limit)


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


@pytest.mark.parametrize("declared", [LIMIT + 1, 2**31, 2**32 - 1])
def test_a_snappy_length_preamble_above_the_bound_is_refused_unread(declared):
    """snappy allocates what the preamble says before it reads a byte: 4 GiB would abort the process."""
    block = _varint(declared) + b"\x00" * 8
    with pytest.raises(CorruptRecordError, match=too_big(LIMIT)):
        decompress(Codec.SNAPPY, block, LIMIT)
    xerial = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    small = bytes(cramjam.snappy.compress_raw(b"x" * 1000))
    for stream in (xerial + struct.pack(">i", len(block)) + block,
                   xerial + struct.pack(">i", len(small)) + small + xerial + struct.pack(">i", len(block)) + block):
        with pytest.raises(CorruptRecordError, match=too_big(LIMIT)):
            decompress(Codec.SNAPPY, stream, LIMIT)


def test_snappy_blocks_are_bounded_by_what_is_left_of_the_budget():
    block = bytes(cramjam.snappy.compress_raw(b"y" * 30_000))
    stream = XERIAL_MAGIC + struct.pack(">ii", 1, 1) + (struct.pack(">i", len(block)) + block) * 4
    assert decompress(Codec.SNAPPY, stream, 120_000) == b"y" * 120_000
    with pytest.raises(CorruptRecordError, match=too_big(119_999)):
        decompress(Codec.SNAPPY, stream, 119_999)


@pytest.mark.parametrize("preamble", [b"", b"\x80", b"\xff\xff\xff\xff\xff", b"\xff\xff\xff\xff\x10", b"\x80\x80\x80\x80\x80\x01"])
def test_a_snappy_block_without_a_valid_length_preamble_is_corrupt(preamble):
    with pytest.raises(CorruptRecordError, match="snappy block has no valid length preamble"):
        decompress(Codec.SNAPPY, preamble)


def _lz4_frame_declaring(size: int, body: bytes = b"x" * 10) -> bytes:
    """A frame with independent blocks and an 8-byte content size, its header checksum made to match."""
    descriptor = bytes([0x68, 0x40]) + struct.pack("<Q", size)  # FLG: version 01, independent, content size
    block = lz4.block.compress(body, store_size=False)
    return (bytes.fromhex("04224d18") + descriptor + bytes([(xxh32(descriptor) >> 8) & 0xFF])
            + struct.pack("<I", len(block)) + block + struct.pack("<I", 0))


def test_an_lz4_frame_declaring_more_than_the_bound_is_refused_unread():
    assert decompress(Codec.LZ4, _lz4_frame_declaring(10), LIMIT) == b"x" * 10  # the hand-made frame is valid
    for declared in (LIMIT + 1, 2**40, 2**64 - 1):
        with pytest.raises(CorruptRecordError, match=too_big(LIMIT)):
            decompress(Codec.LZ4, _lz4_frame_declaring(declared), LIMIT)


def test_an_lz4_frame_declaring_less_than_it_holds_is_corrupt():
    with pytest.raises(CorruptRecordError):
        decompress(Codec.LZ4, _lz4_frame_declaring(5), LIMIT)


ZSTD_MAGIC = struct.pack("<I", 0xFD2FB528)


def zstd_rle_frame(blocks: int, declared: int | None = None, block_size: int = 128 * 1024, byte: bytes = b"\x00") -> bytes:
    """A hand-made zstd frame of RLE blocks: 4 bytes of input for each 128 KiB of output."""
    header = ZSTD_MAGIC + (b"\x00\x38" if declared is None else b"\xc0\x38" + struct.pack("<Q", declared))
    body = b"".join(struct.pack("<I", block_size << 3 | 1 << 1 | (i == blocks - 1))[:3] + byte for i in range(blocks))
    return header + body


def test_hand_made_zstd_rle_frames_are_read():
    assert decompress(Codec.ZSTD, zstd_rle_frame(3)) == bytes(3 * 128 * 1024)
    assert decompress(Codec.ZSTD, zstd_rle_frame(2, declared=256 * 1024, byte=b"z")) == b"z" * 256 * 1024


def test_a_zstd_frame_declaring_more_than_the_bound_is_refused_unread():
    for declared in (LIMIT + 1, 2**40, 2**64 - 2):
        with pytest.raises(CorruptRecordError, match=too_big(LIMIT)):
            decompress(Codec.ZSTD, zstd_rle_frame(1, declared=declared), LIMIT)
    sized = zstandard.ZstdCompressor().compress(COMPRESSIBLE[:60_000])
    assert zstandard.frame_content_size(sized) == 60_000
    with pytest.raises(CorruptRecordError, match=too_big(100_000)):  # the second frame's size is over what is left
        decompress(Codec.ZSTD, sized + sized, 100_000)


def test_a_zstd_frame_without_a_content_size_stops_at_the_bound():
    frame = zstd_rle_frame(4)  # 512 KiB
    assert decompress(Codec.ZSTD, frame, 4 * 128 * 1024) == bytes(4 * 128 * 1024)
    for limit in (4 * 128 * 1024 - 1, 3 * 128 * 1024, 1):
        with pytest.raises(CorruptRecordError, match=too_big(limit)):
            decompress(Codec.ZSTD, frame, limit)


def test_zstd_frames_are_walked_by_the_spec():
    c = zstandard.ZstdCompressor(write_checksum=True, write_content_size=True)
    skippable = struct.pack("<II", 0x184D2A5E, 5) + b"skip!"
    assert decompress(Codec.ZSTD, skippable + c.compress(b"one") + skippable + c.compress(b"two")) == b"onetwo"
    with pytest.raises(CorruptRecordError, match="zstd frame is truncated"):
        decompress(Codec.ZSTD, c.compress(b"one")[:-1])  # inside the checksum
    with pytest.raises(CorruptRecordError, match="zstd frame is truncated"):
        decompress(Codec.ZSTD, skippable[:-1])
    for cut in (3, 4, 5, 6):
        with pytest.raises(CorruptRecordError, match="zstd frame is truncated"):
            decompress(Codec.ZSTD, zstd_rle_frame(1, declared=1 << 17)[:cut])
    with pytest.raises(CorruptRecordError, match="unknown magic number 0x00000000"):
        decompress(Codec.ZSTD, c.compress(b"one") + bytes(8))
    reserved = bytearray(zstd_rle_frame(1))
    reserved[4] |= 0x08
    with pytest.raises(CorruptRecordError, match="reserved bit"):
        decompress(Codec.ZSTD, bytes(reserved))
    bad_block = bytearray(zstd_rle_frame(1))
    bad_block[6] |= 0x06  # block type 3
    with pytest.raises(CorruptRecordError, match="reserved type"):
        decompress(Codec.ZSTD, bytes(bad_block))


@pytest.mark.parametrize("declared", [0, 1000, (128 << 10) - 1, (128 << 10) + 1])
def test_a_zstd_frame_declaring_another_size_than_it_holds_is_corrupt(declared):
    with pytest.raises(CorruptRecordError, match="^cannot decompress zstd records: .*corruption"):
        decompress(Codec.ZSTD, zstd_rle_frame(1, declared=declared), 1 << 20)


def test_a_gzip_member_stops_at_the_bound_and_truncation_is_still_seen():
    member = gzip.compress(bytes(1 << 20))  # about 1 KB in, 1 MiB out
    assert len(member) < 2000
    with pytest.raises(CorruptRecordError, match=too_big(LIMIT)):
        decompress(Codec.GZIP, member, LIMIT)
    with pytest.raises(CorruptRecordError, match="gzip stream is truncated"):
        decompress(Codec.GZIP, member[:-1], 1 << 20)


@pytest.mark.parametrize("block_size", [lz4.frame.BLOCKSIZE_MAX64KB, lz4.frame.BLOCKSIZE_MAX256KB,
                                        lz4.frame.BLOCKSIZE_MAX1MB, lz4.frame.BLOCKSIZE_MAX4MB])
@pytest.mark.parametrize("checksums", [False, True])
@pytest.mark.parametrize("content_size", [False, True])
def test_lz4_frames_of_every_block_size_and_checksum_decode_whole(block_size, checksums, content_size):
    # small records (compressible) and random bytes (stored blocks) across several blocks, then trailing bytes
    rng = random.Random(block_size)
    data = b"".join(b"price=12.50;" * 8 + rng.randbytes(rng.randrange(0, 300)) for _ in range(20_000))
    frame = lz4.frame.compress(data, block_size=block_size, block_checksum=checksums, content_checksum=checksums,
                               store_size=content_size, block_linked=False)
    assert decompress(Codec.LZ4, frame + b"after the end mark") == data
    # a limit below what its blocks could hold but above what it holds: still read whole (in steps)
    assert decompress(Codec.LZ4, frame, len(data)) == data
    with pytest.raises(CorruptRecordError, match=too_big(len(data) - 1)):
        decompress(Codec.LZ4, frame, len(data) - 1)


def test_an_lz4_block_larger_than_its_frame_allows_is_corrupt():
    frame = bytearray(lz4.frame.compress(b"x" * 100, block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False,
                                         store_size=False, content_checksum=False))
    head = 7
    size = struct.unpack_from("<I", frame, head)[0] & 0x7FFFFFFF
    struct.pack_into("<I", frame, head, size + 70_000)  # the block now claims to run past the frame
    with pytest.raises(CorruptRecordError):
        decompress(Codec.LZ4, bytes(frame))


@pytest.mark.parametrize("codec", [Codec.NONE, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
@pytest.mark.parametrize("size", [0, 1, 65_535, 65_536, 300_000, 2_000_001])
def test_the_decompressed_bound_read_from_the_framing_holds_what_decompresses(codec, size):
    rng = random.Random(size)
    data = b"".join(b"p3:%d;" % rng.randrange(1000) + rng.randbytes(rng.randrange(20)) for _ in range(size // 12 + 1))[:size]
    packed = compress(codec, data)
    bound = decompressed_bound(codec, packed)
    assert len(decompress(codec, packed)) == size <= bound
    if codec is not Codec.ZSTD:  # (zstd's counts each compressed block at its most, 128 KiB)
        assert bound <= size + {Codec.NONE: 0, Codec.SNAPPY: 0, Codec.LZ4: 64 * 1024}[codec]


def test_the_decompressed_bound_of_other_writers_frames():
    data = b"price=12.50;" * 100_000
    for block_size, most in ((lz4.frame.BLOCKSIZE_MAX64KB, 64 << 10), (lz4.frame.BLOCKSIZE_MAX4MB, 4 << 20)):
        frame = lz4.frame.compress(data, block_size=block_size, block_linked=False, block_checksum=True,
                                   content_checksum=True, store_size=True)
        assert len(data) <= decompressed_bound(Codec.LZ4, frame) < len(data) + most
    frames = zstandard.ZstdCompressor(write_content_size=True).compress(data) * 2  # two frames
    assert 2 * len(data) <= decompressed_bound(Codec.ZSTD, frames)
    assert decompressed_bound(Codec.SNAPPY, cramjam.snappy.compress_raw(data)) == len(data)  # a bare raw block


@pytest.mark.parametrize("codec, data", [
    (Codec.GZIP, gzip.compress(b"x" * 1000)),  # deflate says nothing of its output's size
    (Codec.LZ4, b"\x00" * 40),  # no lz4 magic
    (Codec.LZ4, bytes.fromhex("04224d18604082") + struct.pack("<I", 1000)),  # a block running past the end
    (Codec.ZSTD, b"\x28\xb5\x2f\xfd\x00"),  # a truncated frame
    (Codec.SNAPPY, b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01" + struct.pack(">i", 500)),
    (5, b"anything"),  # no such codec
])
def test_no_bound_where_the_framing_does_not_tell(codec, data):
    assert decompressed_bound(codec, data) is None
