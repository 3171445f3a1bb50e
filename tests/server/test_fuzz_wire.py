"""Hostile input against a live ``compactlog serve``: the server must answer or close, never crash.

A seeded fuzzer mutates real requests (built from kio's schemas, record batches from our own builder)
and throws thousands of them at the broker over many connections: bit flips, interesting integers in
every field position, cuts, insertions, lying size fields, random frames, batches damaged with their
CRC recomputed so that the record checks (not only the CRC) are reached, and connections dropped in
the middle of a frame. Meanwhile a well-behaved client keeps producing and fetching, and must never
fail. Afterwards the process is alive, a librdkafka client still works, and the server's log holds no
traceback: every bad request was a bad request, not a bug.

Only the APIs of the protocol layer and the produce/fetch path are fuzzed (the group coordinator,
admin and security APIs belong to their own tests); a mutation that turns a request into one of those
APIs is turned back. API keys no broker knows are fuzzed freely.

The other tests here pin the connection-level limits: an oversized frame closes only its own
connection, a client that never reads its answers slows nobody else (and holds a bounded amount of
server memory), ``max.connections.per.ip``, ``max.connections`` and ``connections.max.idle.ms``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import random
import socket
import struct
import threading
import time
import types
import typing
import uuid
from dataclasses import dataclass, field

import pytest
import wire

from compactlog import api
from compactlog.records import BatchInfo, Codec, build_batch
from compactlog.server.versions import SERVED, request_class

ServeProcess = wire.serve_process_class()
# a longer hunt: COMPACTLOG_FUZZ_SEED=7 COMPACTLOG_FUZZ_CONNECTIONS=20000 COMPACTLOG_FUZZ_SECONDS=300 pytest ...
SEED = int(os.environ.get("COMPACTLOG_FUZZ_SEED", "20240611"))
CONNECTIONS = int(os.environ.get("COMPACTLOG_FUZZ_CONNECTIONS", "1200"))  # about 4 requests each
CONCURRENCY = 32
WALL_BUDGET = float(os.environ.get("COMPACTLOG_FUZZ_SECONDS", "18"))  # seconds of fuzzing at most
SILENCE = 2.0  # how long a connection may stay silent before it counts as parked
MAX_REQUEST_BYTES = 1 << 20
FUZZED_APIS = {0, 1, 2, 3, 10, 18, 22, 23, 60}  # produce, fetch, list offsets, metadata, ..., describe cluster
PROBE_ID = 0x5EED
TRACEBACK_SIGNS = ("Traceback", "failed; closing the connection", "exception was never retrieved",
                   "Exception in callback", "Unhandled error")


def server_log_problems(server: ServeProcess) -> list[str]:
    """Lines of the server's log that show an unexpected exception (network.py logs those with a
    traceback; asyncio reports lost task exceptions and failed callbacks)."""
    return [line for line in server.log_text().splitlines() if any(s in line for s in TRACEBACK_SIGNS)]


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory):
    """A broker with a 1 MiB request cap, no auto-created topics (fuzzed Metadata would otherwise
    create thousands), and two topics with a few records to fetch."""
    data = tmp_path_factory.mktemp("fuzz") / "data"
    cl = api.CompactLog(data)
    cl.create_topic("fuzz", 3)
    cl.create_topic("fuzz-compact", 1, {"cleanup.policy": "compact"})
    for i in range(40):
        cl.produce("fuzz", f"v{i}".encode(), f"k{i % 7}".encode(), partition=i % 3)
        cl.produce("fuzz-compact", f"v{i}".encode(), f"k{i % 7}".encode())
    cl.close()
    s = ServeProcess(data, {"auto.create.topics.enable": "false",
                            "socket.request.max.bytes": str(MAX_REQUEST_BYTES)})
    s.start()
    yield s
    s.kill()


# the corpus ---------------------------------------------------------------------------------------------

def batches(rng: random.Random) -> list[bytes]:
    """Record batches as clients write them: codecs, null values and keys, headers, idempotent ones."""
    now = int(time.time() * 1000)
    out = []
    for codec in Codec:
        n = rng.randint(1, 6)
        out.append(build_batch([f"k{i}".encode() for i in range(n)], [b"v" * rng.randint(0, 40) for _ in range(n)],
                               [now + i for i in range(n)], codec=codec))
    out.append(build_batch([None, b"k"], [b"x", None], [now, now]))
    out.append(build_batch([b"h"], [b"v"], [now], headers=[[("a", b"1"), ("b", None)]]))
    out.append(build_batch([b"i"] * 3, [b"v"] * 3, [now] * 3,
                           info=BatchInfo(producer_id=rng.randint(0, 50), producer_epoch=0,
                                          base_sequence=rng.randint(0, 10))))
    return out


def find_coordinator(version: int):
    mod = wire.module_of("find_coordinator", version, "request")
    extra = {"key_type": 0} if version >= 1 else {}
    return mod.FindCoordinatorRequest(key="group", **extra)


def offset_for_leader_epoch(version: int):
    mod = wire.module_of("offset_for_leader_epoch", version, "request")
    extra = {"replica_id": -1} if version >= 3 else {}
    return mod.OffsetForLeaderEpochRequest(**extra, topics=(mod.OffsetForLeaderTopic(topic="fuzz", partitions=(
        mod.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1, leader_epoch=0),)),))


@dataclass
class Seed:
    body: object
    records_len: int = 0  # a Produce whose last bytes are one record batch


def corpus(rng: random.Random) -> list[Seed]:
    seeds = [Seed(wire.api_versions(v)) for v in range(5)]
    seeds += [Seed(wire.metadata(t, v)) for v in (0, 1, 4, 5, 8) for t in (None, ["fuzz"], ["fuzz", "nope"])]
    for v in (3, 5, 7, 8):
        for b in batches(rng):
            for topic in ("fuzz", "fuzz-compact"):
                seeds.append(Seed(wire.produce(topic, rng.randint(0, 3), b, version=v, acks=rng.choice((-1, 1, 1, 0))),
                                  len(b)))
    for v in (4, 5, 7, 9, 11):
        for off in (0, 5, 13, 40, -1, 10**12):
            seeds.append(Seed(wire.fetch(rng.choice(["fuzz", "fuzz-compact"]), rng.randint(0, 3), off, version=v,
                                         max_wait=rng.choice((0, 0, 100)), max_bytes=rng.choice((1, 100, 1 << 20)))))
    for v in range(1, 6):
        for ts in (-2, -1, 0, int(time.time() * 1000)):
            seeds.append(Seed(wire.list_offsets("fuzz", rng.randint(0, 3), ts, version=v)))
    seeds += [Seed(offset_for_leader_epoch(v)) for v in (2, 3)]
    seeds += [Seed(wire.init_producer_id(v)) for v in (0, 1)]
    seeds += [Seed(find_coordinator(v)) for v in (0, 1, 2)]
    seeds.append(Seed(wire.describe_cluster()))
    return seeds


# well-formed requests with hostile values -------------------------------------------------------------------

TOPICS = ["fuzz", "fuzz-compact", "fuzz", "", "nope", "a" * 249, "../etc", "fu zz", "\u00e9t\u00e9", "__consumer_offsets"]
STRUCTURED_VERSIONS = {"produce": (3, 8), "fetch": (4, 11), "list_offsets": (1, 5), "metadata": (0, 8),
                       "offset_for_leader_epoch": (2, 3), "init_producer_id": (0, 1), "find_coordinator": (0, 2),
                       "api_versions": (0, 4), "describe_cluster": (0, 0)}


def _crc_fixed(batch: bytes | bytearray) -> bytes:
    b = bytearray(batch)
    _fix_crc(b)
    return bytes(b)


def hostile_batches(rng: random.Random) -> list[bytes]:
    """Batches no client should send, each with a correct CRC so that the checks behind it run."""
    now = int(time.time() * 1000)
    plain = build_batch([b"k1", b"k2"], [b"v1", b"v2"], [now, now])
    out = []
    for magic in (0, 1, 3):  # legacy and unknown formats
        b = bytearray(plain)
        b[16] = magic
        out.append(_crc_fixed(b))
    for codec_bits in (5, 6, 7):  # no such codec
        b = bytearray(plain)
        b[22] = (b[22] & ~7) | codec_bits
        out.append(_crc_fixed(b))
    for codec in (Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD):  # a codec bit over bytes of another kind
        b = bytearray(plain)
        b[22] = (b[22] & ~7) | int(codec)
        out.append(_crc_fixed(b))
    out.append(build_batch([b"k"], [b"\0" * (8 << 20)], [now], codec=Codec.GZIP))  # inflates 1000-fold
    out.append(build_batch([b"k"] * 3, [b"v"] * 3, [now] * 3, offset_deltas=[0, 5, 9]))  # gaps inside
    out.append(build_batch([b"k"] * 3, [b"v"] * 3, [now] * 3, offset_deltas=[0, 5, 9], codec=Codec.LZ4))
    out.append(build_batch([b"k"] * 2, [b"v"] * 2, [now] * 2, last_offset_delta=7))
    out.append(build_batch([b"k"], [b"v"], [now], delete_horizon=now))
    out.append(build_batch([], [], []))  # the empty batch the cleaner keeps
    for ts in (-5, -1, 0, 2**62, now + 10**9):
        out.append(build_batch([b"k"], [b"v"], [ts]))
    for info in (BatchInfo(producer_id=7, producer_epoch=0, base_sequence=-1),
                 BatchInfo(producer_id=7, producer_epoch=-1, base_sequence=0),
                 BatchInfo(producer_id=7, producer_epoch=0, base_sequence=2**31 - 1),
                 BatchInfo(producer_id=2**62, producer_epoch=32767, base_sequence=5),
                 BatchInfo(is_transactional=True, producer_id=3, producer_epoch=0, base_sequence=0),
                 BatchInfo(is_control=True),
                 BatchInfo(timestamp_type=1)):
        out.append(build_batch([b"k"] * 2, [b"v"] * 2, [now] * 2, info=info))
    out.append(plain + plain)  # two batches
    out.append(plain[:-1])  # half a batch
    out.append(plain + b"\0" * 7)  # a batch and then junk
    out.append(b"")
    b = bytearray(plain)  # a record count far above what is there
    struct.pack_into(">i", b, 57, 2**31 - 1)
    struct.pack_into(">i", b, 23, 2**31 - 2)
    out.append(_crc_fixed(b))
    b = bytearray(plain)  # record lengths that lie
    b[61] = 0x7F
    out.append(_crc_fixed(b))
    return out


def random_value(rng: random.Random, name: str, kafka_type: str | None, hint, pool: list[bytes]):
    """A value for one field: mostly plausible, often hostile."""
    if kafka_type in ("int8", "int16", "int32", "int64"):
        bits = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}[kafka_type]
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        choices = [0, 1, -1, 2, 3, lo, hi, rng.randint(lo, hi)]
        if "partition" in name or "epoch" in name:
            choices += [0, 0, 1, 2]
        if name == "acks":
            choices += [-1, 0, 1, 1]
        if name == "timestamp":
            choices += [-2, -1, -3, int(time.time() * 1000)]
        if name == "fetch_offset":
            choices += [0, 5, 20, 40, 41]
        if name == "min_bytes":
            choices = [0, 1, 1, -1, 100]  # a long poll is not what is being tested here
        return rng.choice(choices)
    if kafka_type == "timedelta_i64":
        return wire.ms(rng.choice([0, -1, 1000]))
    if kafka_type == "timedelta_i32":
        return wire.ms(rng.choice([0, 0, 1, 50, -1, -(2**31)] + ([2**31 - 1] if name != "max_wait" else [])))
    if kafka_type == "string":
        pool_s = TOPICS if "topic" in name or name == "name" else ["", "x", "fuzzer", "\u2603" * 50, "a" * 3000]
        if typing.get_origin(hint) in (typing.Union, types.UnionType) and rng.random() < 0.2:
            return None
        return rng.choice(pool_s)
    if kafka_type == "bool":
        return rng.random() < 0.5
    if kafka_type == "records":
        return rng.choice(pool + [None])
    if kafka_type == "bytes":
        return rng.randbytes(rng.randint(0, 20))
    if kafka_type == "uuid":
        return uuid.UUID(bytes=rng.randbytes(16))
    if kafka_type == "float64":
        return rng.random()
    raise AssertionError(f"no generator for {name}: {kafka_type} {hint}")


def random_entity(rng: random.Random, cls: type, pool: list[bytes], depth: int = 0):
    hints = typing.get_type_hints(cls)
    values = {}
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        inner = typing.get_args(args[0]) if args and typing.get_origin(args[0]) is tuple else typing.get_args(hint)
        if typing.get_origin(hint) is tuple or (args and typing.get_origin(args[0]) is tuple):
            if len(args) == 1 and type(None) in typing.get_args(hint) and rng.random() < 0.2:
                values[f.name] = None
                continue
            count = rng.choice([0, 1, 1, 1, 2, 3]) if rng.random() < 0.97 else rng.randint(4, 60)
            item = inner[0]
            if dataclasses.is_dataclass(item):
                values[f.name] = tuple(random_entity(rng, item, pool, depth + 1) for _ in range(count))
            else:
                values[f.name] = tuple(random_value(rng, f.name, f.metadata.get("kafka_type"), item, pool)
                                       for _ in range(count))
        else:
            values[f.name] = random_value(rng, f.name, f.metadata.get("kafka_type"), hint, pool)
    return cls(**values)


def structured(rng: random.Random, pool: list[bytes], correlation: int) -> Frame:
    api = rng.choice(sorted(STRUCTURED_VERSIONS))
    lo, hi = STRUCTURED_VERSIONS[api]
    mod = wire.module_of(api, rng.randint(lo, hi), "request")
    cls = next(c for n, c in vars(mod).items() if n.endswith("Request") and dataclasses.is_dataclass(c))
    body = random_entity(rng, cls, pool)
    return Frame(wire.request_frame(body, correlation), correlation, uncertain=api == "fetch", body=body)


# mutations -----------------------------------------------------------------------------------------------

INTERESTING = [0, 1, -1, 2, 127, 128, 255, 256, 0x7FFF, -0x8000, 0xFFFF, 0x7FFFFFFF, -0x80000000, 1 << 20, 61]


@dataclass
class Frame:
    data: bytes
    correlation: int | None  # the id in the bytes sent, when there is one
    uncertain: bool = False  # the server may rightly wait for more (a lying size, a long poll)
    close_after: bool = False  # drop the connection right after sending (half a frame, usually)
    body: object = None  # the request, when the frame is exactly its encoding (its answer must decode)


def _sized(payload: bytes | bytearray) -> bytes:
    return struct.pack(">i", len(payload)) + bytes(payload)


def _fix_crc(batch: bytearray) -> None:
    from compactlog.records.batch import crc32c

    if len(batch) >= 61:
        struct.pack_into(">I", batch, 17, crc32c(memoryview(batch)[21:]))


def mutate(rng: random.Random, seed: Seed, correlation: int) -> Frame:
    payload = bytearray(wire.header_bytes(seed.body, correlation, rng.choice(["fuzzer", "", None, "x" * 300]))
                        + wire.body_bytes(seed.body))
    key_bytes = bytes(payload[:2])
    kind = rng.randrange(12)
    uncertain = False
    if kind == 0:  # bit flips
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(payload))
            payload[i] ^= 1 << rng.randrange(8)
    elif kind == 1:  # an interesting integer anywhere
        width = rng.choice((1, 2, 4, 8))
        i = rng.randrange(max(len(payload) - width, 1))
        value = rng.choice(INTERESTING)
        payload[i:i + width] = (value % (1 << (8 * width))).to_bytes(width, "big")
    elif kind == 2:  # cut
        del payload[rng.randrange(len(payload)):]
    elif kind == 3:  # grow
        payload += rng.randbytes(rng.randint(1, 64))
    elif kind == 4:  # a slice taken out
        i = rng.randrange(len(payload))
        del payload[i:i + rng.randint(1, 16)]
    elif kind == 5:  # bytes put in
        i = rng.randrange(len(payload))
        payload[i:i] = rng.randbytes(rng.randint(1, 16))
    elif kind == 6:  # a well-formed header, then noise
        key = rng.choice(sorted(FUZZED_APIS) + [57, 68, 71, 999, -1])
        payload = bytearray(struct.pack(">hhih", key, rng.randint(-1, 14), correlation, -1) + rng.randbytes(rng.randint(0, 80)))
        key_bytes = bytes(payload[:2])
    elif kind == 7:  # pure noise
        payload = bytearray(rng.randbytes(rng.randint(0, 120)))
        key_bytes = bytes(payload[:2])
    elif kind == 8 and seed.records_len:  # a damaged batch with a good CRC: the record checks must hold
        batch = bytearray(payload[-seed.records_len:])
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(21, len(batch))  # anything the CRC covers: attributes, counts, records
            if rng.random() < 0.5:
                batch[i] ^= 1 << rng.randrange(8)
            else:
                batch[i] = rng.choice((0, 1, 0x7F, 0x80, 0xFF))
        _fix_crc(batch)
        payload[-seed.records_len:] = batch
    elif kind == 9 and seed.records_len:  # record count, lengths and deltas that disagree
        batch = bytearray(payload[-seed.records_len:])
        field_at = rng.choice((8, 23, 57))  # batch length, last offset delta, record count
        struct.pack_into(">i", batch, field_at, rng.choice(INTERESTING))
        _fix_crc(batch)
        payload[-seed.records_len:] = batch
        uncertain = field_at == 8
    elif kind == 10:  # a size field that lies
        frame = bytearray(_sized(payload))
        struct.pack_into(">i", frame, 0, rng.choice([-1, -0x80000000, MAX_REQUEST_BYTES + 1, 0x7FFFFFFF,
                                                      len(payload) + rng.randint(1, 100), max(len(payload) - 3, 0)]))
        # Too long a size swallows the next frames' bytes as this body's tail, which is ignored (as
        # Kafka ignores bytes after a body): this request may be answered, under its own id.
        corr = struct.unpack_from(">i", payload, 4)[0] if len(payload) >= 8 else None
        return Frame(bytes(frame), corr, uncertain=True)
    elif kind == 11:  # half a frame, then the connection drops
        frame = _sized(payload)
        return Frame(frame[:rng.randrange(1, len(frame))], None, close_after=True)
    if len(payload) >= 2 and bytes(payload[:2]) != key_bytes:
        key = struct.unpack_from(">h", payload)[0]
        if key in SERVED and key not in FUZZED_APIS:
            payload[:2] = key_bytes  # keep out of the coordinator's and the admin's APIs
    if len(payload) >= 2 and struct.unpack_from(">h", payload)[0] in SERVED and \
            struct.unpack_from(">h", payload)[0] not in FUZZED_APIS:
        payload[:2] = struct.pack(">h", 999)
    corr = struct.unpack_from(">i", payload, 4)[0] if len(payload) >= 8 else None
    return Frame(_sized(payload), corr, uncertain=uncertain)


# driving -------------------------------------------------------------------------------------------------

@dataclass
class Tally:
    connections: int = 0
    frames: int = 0
    answered: int = 0  # the probe came back
    closed: int = 0  # the server closed the connection
    parked: int = 0  # silent, with a long poll or a lying size in flight
    responses: int = 0
    problems: list = field(default_factory=list)


async def read_answers(reader: asyncio.StreamReader, sent: list[Frame], tally: Tally) -> str:
    """Read answers until the probe's; 'answered', 'closed' or 'silent'. Checks framing and order, and
    that the answer to a well-formed request decodes as its API's response at its version."""
    expected = [f for f in sent if f.correlation is not None]
    pos = 0
    while True:
        try:
            head = await asyncio.wait_for(reader.readexactly(4), SILENCE)
            (size,) = struct.unpack(">i", head)
            assert 4 <= size <= 64 << 20, f"response size {size}"
            payload = await asyncio.wait_for(reader.readexactly(size), SILENCE)
        except (asyncio.IncompleteReadError, ConnectionError):
            return "closed"
        except asyncio.TimeoutError:
            return "silent"
        (corr,) = struct.unpack_from(">i", payload)
        while pos < len(expected) and expected[pos].correlation != corr:
            pos += 1  # requests without an answer (acks=0) or whose id we could not know
        assert pos < len(expected), f"an answer with correlation id {corr} that no request in order carried"
        if expected[pos].body is not None:
            try:
                wire.decode_response(expected[pos].body, payload)
            except Exception as exc:  # noqa: BLE001 - any failure is the finding
                raise AssertionError(f"the answer to {expected[pos].body!r:.300} does not decode: {exc!r}") from None
        pos += 1
        tally.responses += 1
        if corr == PROBE_ID:
            return "answered"


async def fuzz_connection(port: int, frames: list[Frame], tally: Tally, rng: random.Random) -> None:
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError as exc:
        tally.problems.append(f"cannot connect: {exc}")
        return
    tally.connections += 1
    probe = Frame(wire.request_frame(wire.api_versions(0), PROBE_ID), PROBE_ID, body=wire.api_versions(0))
    close_after = any(f.close_after for f in frames)
    if close_after:
        frames = frames[:[f.close_after for f in frames].index(True) + 1]
    else:
        frames = frames + [probe]
    data = b"".join(f.data for f in frames)
    tally.frames += len(frames) - (0 if close_after else 1)
    try:
        # sometimes in pieces, so that frames straddle reads
        i = 0
        while i < len(data):
            step = rng.choice((len(data), len(data), 1, 7, 64))
            writer.write(data[i:i + step])
            await writer.drain()
            i += step
        if close_after:
            if rng.random() < 0.5:  # a reset rather than a FIN
                writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.close()
            tally.closed += 1
            return
        outcome = await read_answers(reader, frames, tally)
    except ConnectionError:
        outcome = "closed"
    except AssertionError as exc:
        tally.problems.append(str(exc))
        outcome = "bad"
    finally:
        writer.close()
    if outcome == "answered":
        tally.answered += 1
    elif outcome == "closed":
        tally.closed += 1
    elif outcome == "silent":
        if any(f.uncertain or f.data[4:6] == b"\x00\x01" for f in frames):
            tally.parked += 1  # a long poll or a frame still waiting for its bytes: Kafka waits too
        else:
            tally.problems.append(f"neither answered nor closed after {SILENCE}s: {[f.data[4:8] for f in frames]}")


async def fuzz(port: int, rng: random.Random) -> Tally:
    seeds = corpus(rng)
    pool = batches(rng) + hostile_batches(rng)
    tally = Tally()
    deadline = time.monotonic() + WALL_BUDGET
    queue: asyncio.Queue = asyncio.Queue()
    correlation = 1000
    for _ in range(CONNECTIONS):
        frames = []
        for _ in range(rng.randint(1, 6)):
            correlation += 1
            roll = rng.random()
            if roll < 0.45:
                frames.append(mutate(rng, rng.choice(seeds), correlation))
            elif roll < 0.9:
                frames.append(structured(rng, pool, correlation))
            else:
                body = rng.choice(seeds).body
                frames.append(Frame(wire.request_frame(body, correlation), correlation, uncertain=True, body=body))
        queue.put_nowait((frames, random.Random(rng.random())))

    async def worker() -> None:
        while not queue.empty() and time.monotonic() < deadline:
            frames, crng = queue.get_nowait()
            await fuzz_connection(port, frames, tally, crng)

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return tally


class GoodClient(threading.Thread):
    """A client that does everything right, round after round, and notes how long each took."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.stop = threading.Event()
        self.rounds: list[float] = []
        self.errors: list[str] = []

    def run(self) -> None:
        batch = build_batch([b"good"], [b"value"], [int(time.time() * 1000)])
        try:
            with wire.RawClient("127.0.0.1", self.port, timeout=15) as c:
                while not self.stop.is_set():
                    t = time.monotonic()
                    assert c.call(wire.api_versions(3)).error_code == 0
                    md = c.call(wire.metadata(["fuzz"]))
                    assert md.topics[0].error_code == 0 and len(md.topics[0].partitions) == 3
                    resp = c.call(wire.produce("fuzz", 1, batch))
                    p = resp.responses[0].partition_responses[0]
                    assert p.error_code == 0, p
                    f = c.call(wire.fetch("fuzz", 1, p.base_offset))
                    assert f.responses[0].partitions[0].records, "the record just produced is not fetched"
                    self.rounds.append(time.monotonic() - t)
                    time.sleep(0.02)
        except Exception as exc:  # noqa: BLE001 - reported by the test
            self.errors.append(repr(exc))


def test_thousands_of_hostile_requests_never_break_the_broker(fuzz_server):
    good = GoodClient(fuzz_server.port)
    good.start()
    started = time.monotonic()
    tally = asyncio.run(fuzz(fuzz_server.port, random.Random(SEED)))
    elapsed = time.monotonic() - started
    time.sleep(0.3)
    good.stop.set()
    good.join(20)

    assert not tally.problems, tally.problems[:10]
    assert tally.connections == tally.answered + tally.closed + tally.parked
    assert tally.frames >= 1000 or elapsed >= WALL_BUDGET, tally
    assert tally.answered > 100 and tally.closed > 100 and tally.responses > 1000, tally  # all really happened
    assert fuzz_server.proc.poll() is None, "the server died"
    assert not good.errors, good.errors
    assert good.rounds, "the well-behaved client never completed a round"
    assert max(good.rounds) < 10, f"a good client's round took {max(good.rounds):.1f}s"
    assert not server_log_problems(fuzz_server), "\n".join(server_log_problems(fuzz_server)[:20])

    # afterwards, a real client
    confluent_kafka = pytest.importorskip("confluent_kafka")
    p = confluent_kafka.Producer({"bootstrap.servers": fuzz_server.bootstrap, "linger.ms": 0})
    p.produce("fuzz", key=b"after", value=b"fuzzing", partition=2)
    assert p.flush(20) == 0
    c = confluent_kafka.Consumer({"bootstrap.servers": fuzz_server.bootstrap, "group.id": "unused",
                                  "enable.auto.commit": False})
    c.assign([confluent_kafka.TopicPartition("fuzz", 2, confluent_kafka.OFFSET_BEGINNING)])
    seen = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and b"fuzzing" not in seen:
        m = c.poll(1)
        if m is not None and not m.error():
            seen.append(m.value())
    c.close()
    assert b"fuzzing" in seen


# connection-level limits ---------------------------------------------------------------------------------

def test_an_oversized_frame_closes_only_its_own_connection(fuzz_server):
    with wire.RawClient.to(fuzz_server) as good, wire.RawClient.to(fuzz_server) as bad:
        assert good.call(wire.api_versions(0)).error_code == 0
        bad.sock.sendall(struct.pack(">i", MAX_REQUEST_BYTES + 1) + b"\0" * 1000)
        assert bad.closed_by_peer(), "the connection with an oversized frame stayed open"
        assert good.call(wire.metadata(["fuzz"])).topics[0].error_code == 0
    with wire.RawClient.to(fuzz_server) as again:  # and the broker still takes new connections
        assert again.call(wire.api_versions(3)).error_code == 0
    assert not server_log_problems(fuzz_server)


def test_an_api_without_a_handler_closes_the_connection_quietly(fuzz_server):
    """An API in the version table whose handler is not installed is not served: the connection
    closes as for an unknown key, with no traceback in the log."""
    with wire.RawClient.to(fuzz_server) as c:
        advertised = {k.api_key for k in c.call(wire.api_versions(0)).api_keys}
    missing = sorted(set(SERVED) - advertised)
    if not missing:
        pytest.skip("every API in the version table has a handler")
    key = missing[0]
    body = random_entity(random.Random(1), request_class(key, SERVED[key].min_version), [])
    with wire.RawClient.to(fuzz_server) as c:
        c.send(body)
        assert c.closed_by_peer()
    assert not server_log_problems(fuzz_server)


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_a_client_that_never_reads_slows_nobody_else(fuzz_server, tmp_path):
    """A client pipelines big fetches and never reads an answer. Others' round trips stay fast (a
    generous bound: this is about not waiting on the stalled client, not about speed), and the broker
    holds about one answer for it, not all of them."""
    big = build_batch([b"k"], [b"x" * 500_000], [int(time.time() * 1000)])
    with wire.RawClient.to(fuzz_server) as c:
        for _ in range(2):
            assert c.call(wire.produce("fuzz", 0, big)).responses[0].partition_responses[0].error_code == 0
    before = rss_kib(fuzz_server.proc.pid)
    staller = socket.create_connection(("127.0.0.1", fuzz_server.port))
    staller.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    request = wire.request_frame(wire.fetch("fuzz", 0, 0, max_bytes=2 << 20), 1)
    staller.setblocking(False)
    sent = 0
    try:
        rounds = []
        with wire.RawClient.to(fuzz_server) as good:
            t_end = time.monotonic() + 3
            while time.monotonic() < t_end:
                try:
                    sent += staller.send(request * 20)
                except BlockingIOError:
                    pass
                t = time.monotonic()
                assert good.call(wire.api_versions(0)).error_code == 0
                fetched = good.call(wire.fetch("fuzz", 1, 0))
                assert fetched.responses[0].partitions[0].error_code == 0
                rounds.append(time.monotonic() - t)
        assert sent > 50 * len(request), "the stalled client could not even send its requests"
        assert max(rounds) < 2.0, f"a round trip took {max(rounds):.2f}s while another client stalled"
        grown = rss_kib(fuzz_server.proc.pid) - before
        # each answer is ~1 MB; had the broker queued the answers of the requests read, it would be far more
        assert grown < 150_000, f"the broker grew by {grown} KiB for a client that does not read"
    finally:
        staller.close()


IDLE_MS = 2500


@pytest.fixture(scope="module")
def limits_server(tmp_path_factory):
    s = ServeProcess(tmp_path_factory.mktemp("limits") / "data", {
        "max.connections": "5", "max.connections.per.ip": "3", "connections.max.idle.ms": str(IDLE_MS)})
    s.start()
    yield s
    s.kill()


def connect_from(server, source_ip: str) -> wire.RawClient:
    """A connection from another loopback address (all of 127/8 is this host on Linux)."""
    c = wire.RawClient.__new__(wire.RawClient)
    c.sock = socket.create_connection(("127.0.0.1", server.port), timeout=10, source_address=(source_ip, 0))
    c.correlation = 0
    return c


def served(c: wire.RawClient) -> bool:
    try:
        return c.call(wire.api_versions(0)).error_code == 0
    except (TimeoutError, ConnectionError):
        return False


def eventually_admitted(server, source_ip: str, timeout: float = 10.0) -> wire.RawClient:
    """A new connection, retried while the broker still counts ones just closed."""
    deadline = time.monotonic() + timeout
    while True:
        c = connect_from(server, source_ip)
        if served(c):
            return c
        c.close()
        assert time.monotonic() < deadline, f"no connection from {source_ip} admitted"
        time.sleep(0.1)


def test_max_connections_per_ip_refuses_the_extra_ones(limits_server):
    held = [eventually_admitted(limits_server, "127.0.0.1")]
    held += [connect_from(limits_server, "127.0.0.1") for _ in range(2)]
    try:
        assert all(served(c) for c in held)
        extra = connect_from(limits_server, "127.0.0.1")
        assert extra.closed_by_peer(), "a fourth connection from one address was served"
        extra.close()
        other = connect_from(limits_server, "127.0.0.2")  # another address is still welcome
        assert served(other)
        other.close()
        held.pop().close()  # a slot frees when a connection closes
        held.append(eventually_admitted(limits_server, "127.0.0.1"))
    finally:
        for c in held:
            c.close()


def test_max_connections_refuses_the_extra_ones(limits_server):
    held = [eventually_admitted(limits_server, "127.0.0.3")]
    held += [connect_from(limits_server, "127.0.0.3") for _ in range(2)]
    held += [eventually_admitted(limits_server, "127.0.0.4"), connect_from(limits_server, "127.0.0.4")]
    try:
        assert all(served(c) for c in held)
        extra = connect_from(limits_server, "127.0.0.5")
        assert extra.closed_by_peer(), "a sixth connection was served with max.connections=5"
        extra.close()
    finally:
        for c in held:
            c.close()


def test_idle_connections_are_closed_and_busy_ones_kept(limits_server):
    idle = eventually_admitted(limits_server, "127.0.0.6")
    busy = connect_from(limits_server, "127.0.0.6")
    try:
        t0 = time.monotonic()
        while time.monotonic() - t0 < IDLE_MS / 1000 * 2.5:
            assert served(busy), "a connection used every few hundred ms was closed"
            time.sleep(IDLE_MS / 1000 / 6)
        assert idle.closed_by_peer(timeout=0.1), "an idle connection outlived connections.max.idle.ms"
    finally:
        idle.close()
        busy.close()


def test_clients_that_never_read_are_closed_once_nothing_moves(limits_server):
    """Clients that stop reading leave their answers unsent and the broker stops reading them: neither
    side moves. After connections.max.idle.ms the broker drops them, and their slots are free again
    (max.connections.per.ip=3 here, so a fourth connection from their address is the evidence; reading
    from them to see the close would make them move again)."""
    with wire.RawClient.to(limits_server) as c:  # big answers, so that the socket buffers fill at once
        assert c.call(wire.metadata(["stalled"], auto_create=True)).topics[0].error_code in (0, 5)
        big = build_batch([b"k"], [b"s" * 900_000], [int(time.time() * 1000)])
        deadline = time.monotonic() + 10
        while c.call(wire.produce("stalled", 0, big)).responses[0].partition_responses[0].error_code:
            assert time.monotonic() < deadline
            time.sleep(0.1)
    stallers = [connect_from(limits_server, "127.0.0.7") for _ in range(3)]
    request = wire.request_frame(wire.fetch("stalled", 0, 0, max_bytes=1 << 20), 1)
    try:
        for s in stallers:
            s.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.sock.setblocking(False)
            t0 = time.monotonic()
            while time.monotonic() - t0 < 2:
                try:
                    s.sock.send(request * 50)
                except BlockingIOError:
                    break
        time.sleep(IDLE_MS / 1000 * 1.5)
        c = eventually_admitted(limits_server, "127.0.0.7", timeout=IDLE_MS / 1000 * 4)
        c.close()
    finally:
        for s in stallers:
            s.close()


def test_a_fetch_parked_longer_than_the_idle_limit_is_answered(limits_server):
    """A long poll is the broker's wait, not the client's idleness: the connection stays for it."""
    with wire.RawClient.to(limits_server, timeout=30) as c:
        md = c.call(wire.metadata(["parked"], auto_create=True))
        assert md.topics[0].error_code in (0, 5)
        deadline = time.monotonic() + 10
        while c.call(wire.metadata(["parked"])).topics[0].error_code and time.monotonic() < deadline:
            time.sleep(0.1)
        wait_ms = int(IDLE_MS * 1.6)
        t = time.monotonic()
        part = c.call(wire.fetch("parked", 0, 0, max_wait=wait_ms)).responses[0].partitions[0]
        assert part.error_code == 0
        assert time.monotonic() - t >= wait_ms / 1000 * 0.9
        assert served(c)


@pytest.mark.parametrize("codec, n", [(Codec.GZIP, 1700), (Codec.ZSTD, 1700), (Codec.LZ4, 450)], ids=str)
def test_small_requests_that_inflate_a_lot_do_not_stall_other_clients(fuzz_server, codec, n):
    """Under 64 KB of gzip or zstd that inflates to 50 MB, or of lz4 to 13 MB (refused at the end: one
    record of a compacted topic has no key), costs the broker up to about a second each. Small
    compressed requests are appended on the event loop only when their framing bounds them to 1 MiB;
    these are not, and other clients must not wait for them: their round trips stay far below that work
    (a generous bound, about not waiting, not about speed)."""
    now = int(time.time() * 1000)
    bomb = build_batch([b"k"] * (n - 1) + [None], [b"\0" * 30_000] * n, [now] * n, codec=codec)
    assert len(bomb) < 64 * 1024
    stop = threading.Event()
    codes: list[int] = []

    def bomber() -> None:
        with wire.RawClient.to(fuzz_server, timeout=60) as c:
            while not stop.is_set():
                codes.append(c.call(wire.produce("fuzz-compact", 0, bomb)).responses[0].partition_responses[0].error_code)

    bombers = [threading.Thread(target=bomber, daemon=True) for _ in range(2)]
    for b in bombers:
        b.start()
    rounds = []
    try:
        time.sleep(0.2)
        with wire.RawClient.to(fuzz_server) as good:
            t_end = time.monotonic() + 3
            while time.monotonic() < t_end:
                t = time.monotonic()
                assert good.call(wire.api_versions(0)).error_code == 0
                rounds.append(time.monotonic() - t)
    finally:
        stop.set()
        for b in bombers:
            b.join(60)
    assert codes and set(codes) == {87}, codes
    rounds.sort()
    assert rounds[len(rounds) // 2] < 0.25, f"median round trip {rounds[len(rounds) // 2]:.2f}s while others inflate"


def test_shutdown_is_prompt_and_clean_with_a_client_that_never_reads(serve_factory):
    server = serve_factory()
    with wire.RawClient.to(server) as c:
        assert c.call(wire.metadata(["t"], auto_create=True)).topics[0].error_code in (0, 5)
    staller = socket.create_connection(("127.0.0.1", server.port))
    staller.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    staller.setblocking(False)
    request = wire.request_frame(wire.metadata(None), 1)
    try:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 2:
            try:
                staller.send(request * 50)
            except BlockingIOError:
                break
        t = time.monotonic()
        assert server.stop(timeout=30) == 0
        assert time.monotonic() - t < 15
        assert not server_log_problems(server)
    finally:
        staller.close()
