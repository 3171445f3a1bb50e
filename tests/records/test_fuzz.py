"""Hostile bytes at the batch decoder: whatever arrives, only compactlog's own errors come out.

Valid batches of every codec (headers, null keys, tombstones, LogAppendTime, delete horizons, control
and empty batches) are mutated - bits flipped anywhere, bytes overwritten, cut and extended, header fields
and record counts set to edge values, varints in the records made huge, records sections swapped for
compression bombs - and fed to ``RecordBatch`` and its readers, ``iter_batches`` and ``Chunk.scan``. Any
exception that is not a ``CompactLogError`` fails the test, naming the seed and the iteration, which
replay it exactly. Where the compiled kernels are in use, the Python twin must also agree with them on
every mutated records section: same results, same error texts.

The bomb tests run each codec's bomb (gigabytes from a few kilobytes, or a declared size of terabytes) in
a child process whose address space is capped a few hundred MiB above what it already uses: a decoder
that stops honouring its bound fails the test there instead of exhausting the machine running it.
"""

from __future__ import annotations

import json
import os
import random
import struct
import subprocess
import sys
import textwrap
import zlib
from functools import cache

import cramjam
import lz4.block
import lz4.frame
import numpy as np
import pytest

from compactlog.errors import CompactLogError
from compactlog.records import kernels
from compactlog.records.batch import (
    HEADER,
    LOG_APPEND_TIME,
    BatchInfo,
    Record,
    RecordBatch,
    assemble_batch,
    build_batch,
    build_empty_batch,
    crc32c,
    iter_batches,
)
from compactlog.records.codecs import Codec, compress
from compactlog.records.columns import Chunk

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MAX = 256 * 1024  # the decompression bound the fuzz readers use: bombs below expand well past it
ITERATIONS = 1000  # per codec; the twin run of the suite must stay fast too
TWIN = kernels._py
COMPILED = kernels._impl if kernels.NATIVE else None


# -- valid batches ---------------------------------------------------------------------------------

def _value(rng: random.Random) -> bytes | None:
    kind = rng.random()
    if kind < 0.15:
        return None  # a tombstone, or a null key
    if kind < 0.3:
        return b""
    return rng.randbytes(rng.randrange(1, 40)) if kind < 0.6 else (b"v%d," % rng.randrange(100)) * rng.randrange(1, 30)


def _headers(rng: random.Random) -> list:
    keys = ["trace-id", "ü", "", "content-type", b"\xff\xfe", b"\xed\xa0\x80"]  # two are not UTF-8
    return [(rng.choice(keys), _value(rng)) for _ in range(rng.randrange(3))]


def valid_batch(rng: random.Random, codec: Codec) -> bytes:
    n = rng.randrange(0, 12)
    if n == 0 and rng.random() < 0.5:
        return build_empty_batch(RecordBatch(build_batch([b"k"], [b"v"], [5], info=BatchInfo(base_offset=rng.randrange(1000)))))
    keys = [_value(rng) for _ in range(n)]
    values = [_value(rng) for _ in range(n)]
    base = rng.choice([0, 1_700_000_000_000, -1, INT64_MAX - 1000, INT64_MIN + 1000])
    timestamps = [base + rng.randrange(-500, 500) if base not in (0, -1) else base + rng.randrange(1000) for _ in range(n)]
    info = BatchInfo(
        base_offset=rng.choice([0, 7, 2**40, INT64_MAX - 100]),
        timestamp_type=LOG_APPEND_TIME if rng.random() < 0.2 else 0,
        producer_id=rng.choice([-1, 12]), producer_epoch=rng.choice([-1, 3]), base_sequence=rng.choice([-1, 0, 40]),
        is_transactional=rng.random() < 0.1, is_control=rng.random() < 0.05,
    )
    headers = [_headers(rng) for _ in range(n)] if rng.random() < 0.6 else None
    deltas = sorted(rng.sample(range(3 * n + 1), n)) if n and rng.random() < 0.3 else None
    horizon = None
    if n and rng.random() < 0.3:  # near the first timestamp, so that every delta fits
        horizon = max(INT64_MIN, min(INT64_MAX, timestamps[0] + rng.randrange(-400, 400)))
    return build_batch(keys, values, timestamps, headers=headers, codec=codec, info=info, offset_deltas=deltas,
                       delete_horizon=horizon)


# -- mutations -------------------------------------------------------------------------------------

HUGE_VARINTS = [b"\xfe\xff\xff\xff\x0f", b"\xff\xff\xff\xff\x0f", b"\xff" * 9 + b"\x01", b"\x80" * 10,
                b"\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01", b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f", b"\x80" * 4]
INT32_EDGES = [-(2**31), -2, -1, 0, 1, 2, 48, 49, 2**31 - 1]
INT64_EDGES = [INT64_MIN, INT64_MIN + 1, -2, -1, 0, INT64_MAX - 1, INT64_MAX]
HEADER_FIELDS = {  # offset, struct format, edge values
    "batchLength": (8, ">i", INT32_EDGES),
    "magic": (16, ">b", [0, 1, 3, -1]),
    "attributes": (21, ">h", [0, 5, 6, 7, 0x08, 0x20, 0x40, 0x48, -1]),
    "lastOffsetDelta": (23, ">i", INT32_EDGES),
    "baseTimestamp": (27, ">q", INT64_EDGES),
    "maxTimestamp": (35, ">q", INT64_EDGES),
    "recordsCount": (57, ">i", INT32_EDGES + [2**20, 2**31 - 2]),
}


def varint_starts(payload: bytes, count: int) -> list[int]:
    """Where each varint of each record begins (length, timestamp delta, offset delta, field lengths)."""
    starts: list[int] = []
    pos = 0
    try:
        for _ in range(count):
            starts.append(pos)
            length, body = TWIN.read_varint(payload, pos, len(payload), 5)
            end = min(body + length, len(payload))
            pos = body + 1  # attributes
            for n in (10, 5):
                starts.append(pos)
                _, pos = TWIN.read_varint(payload, pos, end, n)
            for _ in range(2):  # key, value
                starts.append(pos)
                n, pos = TWIN.read_varint(payload, pos, end, 5)
                pos += max(n, 0)
            starts.append(pos)
            hcount, pos = TWIN.read_varint(payload, pos, end, 5)
            for _ in range(hcount * 2):
                starts.append(pos)
                n, pos = TWIN.read_varint(payload, pos, end, 5)
                pos += max(n, 0)
            pos = end
    except ValueError:
        pass
    return [s for s in starts if s < len(payload)]


def _varint_len(data: bytes, pos: int) -> int:
    n = 1
    while pos + n - 1 < len(data) and data[pos + n - 1] & 0x80 and n < 10:
        n += 1
    return n


def mutate_payload(rng: random.Random, payload: bytes, count: int) -> tuple[str, bytes]:
    data = bytearray(payload)
    starts = varint_starts(payload, count)
    kind = rng.randrange(6)
    if kind == 0 and starts:
        at = rng.choice(starts)
        data[at : at + _varint_len(data, at)] = rng.choice(HUGE_VARINTS)
        return "huge varint", bytes(data)
    if kind == 1 and starts:
        at = rng.choice(starts)
        out = bytearray()
        TWIN.write_varint(out, rng.choice([-2, -1, 0, 1, 3, 7, 64, 300, 2**31 - 1, -(2**31)]))
        data[at : at + _varint_len(data, at)] = out
        return "edge varint", bytes(data)
    if kind == 2 and data:
        for _ in range(rng.randrange(1, 4)):
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
        return "payload bit flips", bytes(data)
    if kind == 3:
        return "payload cut", bytes(data[: rng.randrange(len(data) + 1)])
    if kind == 4:
        return "payload extended", bytes(data) + rng.randbytes(rng.randrange(1, 30))
    if starts:  # a few bytes from a varint on, repeated in place
        at = rng.choice(starts)
        return "payload spliced", bytes(data[:at] + data[at : at + rng.randrange(1, 40)] + data[at:])
    return "payload unchanged", bytes(data)


def _zstd_rle(blocks: int, declared: int | None = None) -> bytes:
    header = struct.pack("<I", 0xFD2FB528) + (b"\x00\x38" if declared is None else b"\xc0\x38" + struct.pack("<Q", declared))
    return header + b"".join(struct.pack("<I", (128 << 10) << 3 | 2 | (i == blocks - 1))[:3] + b"\x00" for i in range(blocks))


def _lz4_frame(block: bytes, repeat: int, declared: int | None = None) -> bytes:
    """An lz4 frame of ``block`` compressed once and stored ``repeat`` times (the blocks are independent)."""
    c = lz4.frame.LZ4FrameCompressor(block_size=lz4.frame.BLOCKSIZE_MAX4MB, block_linked=False)
    header = c.begin(source_size=declared or 0)  # a size given is stored in the header
    data = lz4.block.compress(block, store_size=False)
    return header + (struct.pack("<I", len(data)) + data) * repeat + struct.pack("<I", 0)


@cache
def small_bombs(codec: Codec) -> list[bytes]:
    """Records sections that decompress (or claim to) to well past ``MAX``."""
    zeros = bytes(4 * MAX)
    if codec is Codec.GZIP:
        return [compress(codec, zeros), compress(codec, zeros[:MAX]) * 5]
    if codec is Codec.SNAPPY:
        xerial = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
        preamble = b"\xff\xff\xff\xff\x0f" + b"\x00" * 16
        return [compress(codec, zeros), preamble, xerial + struct.pack(">i", len(preamble)) + preamble]
    if codec is Codec.LZ4:
        return [compress(codec, zeros), _lz4_frame(bytes(100), 1, declared=2**40)]
    if codec is Codec.ZSTD:
        return [compress(codec, zeros), _zstd_rle(8), _zstd_rle(1, declared=2**40)]
    return []


def with_body(raw: bytes, body: bytes, count: int | None = None, codec: Codec | None = None) -> bytes:
    """The batch with another records section (and, optionally, record count or codec), its length and CRC
    made right."""
    f = HEADER.unpack_from(raw, 0)
    info = BatchInfo(f[0], 0, f[9], f[10], f[11], f[2])
    attributes = f[5] if codec is None else f[5] & ~7 | int(codec)
    return assemble_batch(info, attributes, f[6], f[7], f[8], f[12] if count is None else count, body)


def mutate(rng: random.Random, raw: bytes, codec: Codec) -> tuple[str, bytes]:
    buf = bytearray(raw)
    kind = rng.randrange(10)
    if kind == 0:
        for _ in range(rng.randrange(1, 5)):
            i = rng.randrange(len(buf))
            buf[i] ^= 1 << rng.randrange(8)
        name = "bit flips"
    elif kind == 1:
        for _ in range(rng.randrange(1, 8)):
            buf[rng.randrange(len(buf))] = rng.choice([0, 0x7F, 0x80, 0xFF, rng.randrange(256)])
        name = "byte overwrites"
    elif kind == 2:
        buf = buf[: rng.randrange(len(buf) + 1)]
        name = "truncation"
    elif kind == 3:
        buf += rng.randbytes(rng.randrange(1, 100)) if rng.random() < 0.5 else buf[61:]
        name = "extension"
    elif kind in (4, 5):
        field = rng.choice(list(HEADER_FIELDS))
        offset, fmt, edges = HEADER_FIELDS[field]
        value = rng.choice(edges) if rng.random() < 0.7 else struct.unpack_from(fmt, buf, offset)[0] + rng.randrange(-3, 4)
        try:
            struct.pack_into(fmt, buf, offset, value)
        except struct.error:
            struct.pack_into(fmt, buf, offset, edges[0])
        name = f"{field} set"
    elif kind in (6, 7):
        try:
            payload = bytes(RecordBatch(raw).payload(MAX))
        except CompactLogError:
            payload = b""
        name, body = mutate_payload(rng, payload, RecordBatch(raw).record_count)
        if codec is not Codec.NONE and RecordBatch(raw).record_count:
            body = compress(codec, body)
        buf = bytearray(with_body(raw, body))
    elif kind == 8 and small_bombs(codec):
        count = rng.choice([1, 10, RecordBatch(raw).record_count])
        buf = bytearray(with_body(raw, rng.choice(small_bombs(codec)), count=count, codec=codec))
        name = "bomb"
    else:
        count = rng.choice([-1, 0, 1, 2**31 - 1, RecordBatch(raw).record_count + rng.choice([-1, 1])])
        count = max(-(2**31), min(2**31 - 1, count))
        buf = bytearray(with_body(raw, raw[61:], count=count))
        name = "recordsCount changed, crc right"
    if len(buf) >= 21 and rng.random() < 0.5:  # make the CRC right, so what follows it is read further
        struct.pack_into(">I", buf, 17, crc32c(memoryview(buf)[21:]))
        name += ", crc fixed"
    return name, bytes(buf)


# -- what the readers must do --------------------------------------------------------------------

def read_everything(buf: bytes) -> None:
    """Every reader over one buffer; CompactLogError is allowed, and what they return must be sound."""
    try:
        b = RecordBatch(buf)
    except CompactLogError:
        return
    for call in (b.ensure_valid, b.is_valid, lambda: b.codec, lambda: repr(b), lambda: b.first_timestamp):
        try:
            call()
        except CompactLogError:
            pass
    try:
        assert len(b.payload(MAX)) <= MAX
    except CompactLogError:
        pass
    try:
        _, cols = b.scan(MAX)
        assert len(cols) == b.record_count
    except CompactLogError:
        pass
    try:
        s = b.summarize(MAX)
        assert INT64_MIN <= s.min_timestamp <= s.max_timestamp <= INT64_MAX
        assert 0 <= s.null_keys <= b.record_count and 0 <= s.invalid_header_keys <= b.record_count
    except CompactLogError:
        pass
    try:
        for r in b.records("t", 0, MAX):
            assert INT64_MIN <= r.timestamp <= INT64_MAX
            assert all(type(k) is str for k, _ in r.headers)
    except CompactLogError:
        pass


def read_as_a_log(buf: bytes, rng: random.Random) -> None:
    """iter_batches over the buffer between valid batches, then one chunk of what it yields."""
    log = VALID_LOG + buf + VALID_LOG
    batches = []
    try:
        for _, b in iter_batches(log):
            batches.append(b)
    except CompactLogError:
        pass
    try:
        chunk = Chunk.scan(batches, verify=rng.random() < 0.3, max_size=MAX)
        ts = chunk.timestamps()
    except CompactLogError:
        return
    assert len(chunk.data) <= MAX * len(batches)
    for b, lo, hi in zip(chunk.batches, chunk.rows[:-1].tolist(), chunk.rows[1:].tolist()):
        for row in range(lo, hi):  # no silent int64 wrap
            delta = int(chunk.cols[row, kernels.C_TS_DELTA])
            want = b.max_timestamp if b.timestamp_type == LOG_APPEND_TIME else b.base_timestamp + delta
            assert int(ts[row]) == want


def _outcome(call):
    try:
        result = call()
    except ValueError as exc:
        return "error", type(exc).__name__, str(exc)
    return "ok", result.tolist() if isinstance(result, np.ndarray) else result


def kernels_agree(buf: bytes) -> None:
    """The twin and the compiled kernels: same results, same error texts, on whatever the batch holds."""
    try:
        b = RecordBatch(buf)
        data = bytes(b.payload(MAX))
    except CompactLogError:
        return
    n = b.record_count
    if n < 0:
        return
    for name in ("summarize_records", "decode_records", "scan_records"):
        got = []
        for impl in (TWIN, COMPILED):
            if name == "summarize_records":
                got.append(_outcome(lambda: impl.summarize_records(data, n)))
            elif name == "decode_records":
                got.append(_outcome(lambda: impl.decode_records(Record, "t", 0, 0, data, n, b.base_offset,
                                                                b.base_timestamp, None)))
            elif n <= len(data) // 7:
                cols = np.zeros((n, kernels.NCOLS), dtype=np.int64)
                got.append(_outcome(lambda: (impl.scan_records(data, n, cols), cols.copy())[1]))
        assert len(set(map(repr, got))) <= 1, (name, got)


VALID_LOG = build_batch([b"a", None], [b"1", None], [3, 4], info=BatchInfo(base_offset=0))


def _replay_hint(seed: int, iteration: int, name: str, buf: bytes) -> str:
    return f"seed {seed} iteration {iteration} ({name}; {len(buf)} bytes, starting {buf[:80].hex()})"


@pytest.mark.parametrize("codec", list(Codec), ids=lambda c: c.config_name)
def test_hostile_batches_raise_only_compactlog_errors(codec):
    seed = 20240 + int(codec)
    rng = random.Random(seed)
    templates = [valid_batch(rng, codec) for _ in range(24)]
    for raw in templates:  # unmutated, every batch reads whole, whatever its header keys hold
        b = RecordBatch(raw)
        b.ensure_valid()
        assert len(b.records()) == b.record_count == len(b.scan()[1]) and b.summarize().null_keys >= 0
        Chunk.scan([b], verify=True).timestamps()
    for i in range(ITERATIONS):
        name, buf = mutate(rng, rng.choice(templates), codec)
        if rng.random() < 0.25:  # a second mutation on top of the first
            more, buf = mutate(rng, buf, codec) if len(buf) >= 61 else ("", buf)
            name += f" + {more}"
        try:
            read_everything(buf)
            read_as_a_log(buf, rng)
            if COMPILED is not None:
                kernels_agree(buf)
        except AssertionError as exc:
            pytest.fail(f"{_replay_hint(seed, i, name, buf)}: {exc!r}")
        except Exception as exc:  # noqa: BLE001 - anything that is not compactlog's own is the failure
            pytest.fail(f"{_replay_hint(seed, i, name, buf)}: {type(exc).__name__}: {exc}")


RECORD_ERRORS = ("premature EOF", "still remaining", "invalid", "varint", "does not match", "int64 range")


def test_the_mutations_reach_every_layer_of_the_decoder():
    """The fuzz is worth little if every mutation stops at the same check: count where they stop."""
    for codec in Codec:
        seen = {"decoded": 0, "records": 0, "codec": 0, "bound": 0, "header": 0}
        rng = random.Random(20240 + int(codec))
        templates = [valid_batch(rng, codec) for _ in range(24)]
        for _ in range(200):
            _, buf = mutate(rng, rng.choice(templates), codec)
            try:
                RecordBatch(buf).records("t", 0, MAX)
                seen["decoded"] += 1
            except CompactLogError as exc:
                msg = str(exc)
                seen["bound" if "decompress to more than" in msg else "records" if any(e in msg for e in RECORD_ERRORS)
                     else "header" if "61-byte header" in msg or "compression type" in msg else "codec"] += 1
        assert seen["decoded"] >= 40 and seen["records"] >= 40, (codec, seen)
        if codec is not Codec.NONE:
            assert seen["codec"] >= 10 and seen["bound"] >= 10, (codec, seen)


# -- bombs, under a capped address space ---------------------------------------------------------

GIB = 1 << 30


def _gzip_bomb() -> bytes:
    """One gzip member of 1 GiB of zeros, about 1 MB: full flushes make every later MiB the same bytes."""
    co = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    mib = bytes(1 << 20)
    first = co.compress(mib) + co.flush(zlib.Z_FULL_FLUSH)
    repeat = co.compress(mib) + co.flush(zlib.Z_FULL_FLUSH)
    assert co.compress(mib) + co.flush(zlib.Z_FULL_FLUSH) == repeat
    return first + repeat * 1022 + co.compress(mib) + co.flush()


def _lz4_bomb(declared: int | None) -> bytes:
    """An lz4 frame of independent 4 MiB blocks of zeros (1 GiB), or one claiming ``declared`` bytes."""
    return _lz4_frame(bytes(4 << 20), 256 if declared is None else 1, declared)


def _snappy_bomb(xerial: bool) -> bytes:
    """A raw snappy block whose length preamble claims 4 GiB - 1, bare or in xerial framing."""
    block = b"\xff\xff\xff\xff\x0f" + bytes(cramjam.snappy.compress_raw(bytes(1000)))[2:]
    if not xerial:
        return block
    return b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", len(block)) + block


# Each holds (or claims) 1 GiB or more: far past what the child's address space may grow by, so a decoder
# that ignored its bound would fail there rather than pass.
BOMBS = {
    "gzip": (Codec.GZIP, _gzip_bomb),
    "snappy-raw": (Codec.SNAPPY, lambda: _snappy_bomb(False)),
    "snappy-xerial": (Codec.SNAPPY, lambda: _snappy_bomb(True)),
    "lz4-frame": (Codec.LZ4, lambda: _lz4_bomb(None)),
    "lz4-declared": (Codec.LZ4, lambda: _lz4_bomb(2**40)),
    "zstd-streamed": (Codec.ZSTD, lambda: _zstd_rle(8 * 1024)),
    "zstd-declared": (Codec.ZSTD, lambda: _zstd_rle(8 * 1024, declared=GIB)),
}

CHILD = textwrap.dedent('''
    import json, resource, sys
    from compactlog.errors import CorruptRecordError
    from compactlog.records.batch import RecordBatch
    from compactlog.records.columns import Chunk

    data = open(sys.argv[1], "rb").read()
    with open("/proc/self/status") as f:
        size = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
    resource.setrlimit(resource.RLIMIT_AS, (size + (400 << 20), resource.RLIM_INFINITY))
    results = {}
    b = RecordBatch(data)
    b.ensure_valid()
    for name, read in (("summarize", b.summarize), ("records", b.records), ("chunk", lambda: Chunk.scan([b]))):
        try:
            read()
            results[name] = "accepted"
        except CorruptRecordError as exc:
            results[name] = str(exc)
    print(json.dumps(results))
''')


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs Linux's /proc to size the address space")
@pytest.mark.parametrize("bomb", list(BOMBS))
def test_a_compression_bomb_is_refused_within_bounded_memory(bomb, tmp_path):
    codec, make = BOMBS[bomb]
    body = make()
    assert len(body) < 8 << 20
    path = tmp_path / "batch"
    path.write_bytes(assemble_batch(BatchInfo(base_offset=77), int(codec), 0, 0, 0, 1, body))
    child = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, f"the child died ({child.returncode}): {child.stderr[-2000:]}"
    results = json.loads(child.stdout)
    limit = 64 * 1024 * 1024
    expected = f"batch at offset 77: records decompress to more than {limit} bytes (the limit for one batch)"
    assert results == {"summarize": expected, "records": expected, "chunk": expected}
