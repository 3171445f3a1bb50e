"""Fetch: stored batches handed out as they are on disk, with Kafka's long poll.

A fetch asks, per partition, for the batches from an offset on. We return the stored bytes from the
batch holding that offset (it may start before it; clients skip what they did not ask for), never
decoded or re-sliced, up to ``partition_max_bytes`` per partition and ``max_bytes`` in all, except that
the first batch found is always returned whole (KIP-74) so that no consumer is stuck behind a big one.
Over a compacted topic the offsets have holes; a fetch offset inside a hole gets the next batch.

When fewer than ``min_bytes`` are there, the request is parked until an append wakes it or
``max_wait_ms`` passes (Kafka's purgatory). Requests behind it on the same connection wait, as in Kafka.

Fetch sessions (v7+) are not kept: every answer has session id 0, so clients send full fetches, which
Kafka allows. There are no transactions, so the last stable offset is the high watermark and no batch
is aborted; read_committed consumers see everything.

The response is written here rather than by the schema library so that record sections go out as the
bytes read from the segment files, with nothing rebuilt around them.
"""

from __future__ import annotations

import asyncio
import os
import struct

from ..errors import CompactLogError
from ..partition import LEADER_EPOCH
from .broker import Broker, Session
from .metadata import epoch_problem, topic_with_uuid
from .protocol import Frame, Request

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PART_V4 = struct.Struct(">ihqq")  # index, error, high watermark, last stable offset
_I64 = struct.Struct(">q")
INLINE_BYTES = 1024 * 1024
LEADER_MOVED = (6, 74)  # NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH: the client should learn the new leader
ZERO_COPY_BYTES = 256 * 1024
MAX_REGIONS = 64  # file ranges (descriptors) in one answer; further ranges are copied
ZERO_COPY = os.environ.get("COMPACTLOG_ZERO_COPY", "1") != "0"


def _string(s: str) -> bytes:
    b = s.encode()
    return _I16.pack(len(b)) + b


class FileRegion:
    """A range of a segment file sent as it is (sendfile: the bytes never pass through this process).

    It holds a descriptor of its own (``StoredRange.open_handle``), so the range stays readable when
    the cleaner swaps the segment out or retention deletes it before the answer goes out.
    """

    __slots__ = ("fd", "offset", "count")

    def __init__(self, fd: int, offset: int, count: int) -> None:
        self.fd, self.offset, self.count = fd, offset, count

    def __len__(self) -> int:
        return self.count

    async def send(self, transport) -> None:
        """asyncio's sendfile: ``os.sendfile`` on plain sockets, reads and writes through TLS."""
        with os.fdopen(self.fd, "rb", closefd=True) as f:
            self.fd = -1
            await asyncio.get_running_loop().sendfile(transport, f, self.offset, self.count)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    __del__ = close  # an answer dropped unsent (its connection went away mid-read) gives the descriptor back


def release(topics: list) -> None:
    """Close the descriptors of an answer that will not be sent."""
    for _name, rows in topics:
        for row in rows:
            if isinstance(row[4], FileRegion):
                row[4].close()


def read_partitions(broker: Broker, wanted: list, max_bytes: int, zero_copy: bool = False) -> tuple[list, int, bool]:
    """Per topic of ``wanted`` ((name, key, partitions) each), (key, rows) with a row per partition: (index,
    error, high watermark, log start, records); the total bytes; whether any partition has an error.

    With ``zero_copy`` a range of at least ZERO_COPY_BYTES comes back as a FileRegion to send with
    sendfile; smaller ones are read (a copy costs less than a descriptor and the calls around it).
    """
    find = broker.cl.find_partition
    budget = min(max_bytes, broker.config.get("fetch.max.bytes"))
    total = 0
    error = False
    first = True
    regions = 0
    seen: set[tuple[str, int]] = set()
    out: list = []
    rows: list = []
    try:
        for name, key, partitions in wanted:
            rows = []
            for p in partitions:
                part = find(name, p.partition)
                if part is None:
                    rows.append((p.partition, 3, -1, -1, b""))
                    error = True
                    continue
                problem = epoch_problem(getattr(p, "current_leader_epoch", -1))
                if problem:
                    rows.append((p.partition, problem, part.high_watermark, part.log_start_offset, b""))
                    error = True
                    continue
                limit = min(p.partition_max_bytes, budget - total)
                data = b""
                if (name, p.partition) not in seen and (limit > 0 or first):  # a repeat is read once
                    seen.add((name, p.partition))
                    try:
                        found = part.locate(p.fetch_offset, max(limit, 0), min_one_message=first)
                    except CompactLogError as exc:
                        rows.append((p.partition, exc.code, part.high_watermark, part.log_start_offset, b""))
                        error = True
                        continue
                    if found is not None and found.size > 0:
                        if zero_copy and found.size >= ZERO_COPY_BYTES and regions < MAX_REGIONS:
                            data = FileRegion(found.open_handle(), found.position, found.size)
                            regions += 1
                        else:
                            data = found.read()
                if data:
                    first = False
                    total += len(data)
                rows.append((p.partition, 0, part.high_watermark, part.log_start_offset, data))
            out.append((key, rows))
    except BaseException:
        release(out + [("", rows)])
        raise
    return out, total, error


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _count(n: int, flexible: bool) -> bytes:
    """An array's length: int32, or in flexible versions a compact length (uvarint of n + 1)."""
    return _uvarint(n + 1) if flexible else _I32.pack(n)


def _topic_key(key, version: int) -> bytes:
    """How a topic is named in the response: its id (16 bytes) from v13, else its name (a compact string
    in the flexible v12)."""
    if version >= 13:
        return key.bytes if key is not None else bytes(16)  # kio reads the zero UUID as None
    if version >= 12:
        b = key.encode()
        return _uvarint(len(b) + 1) + b
    return _string(key)


def _leader_tags(version: int, err: int, leader: tuple[int, str, int] | None) -> bytes | None:
    """A partition's tagged fields when its error says the leader moved (KIP-951, v16): the current
    leader (tag 1: id and epoch); None when there is nothing to say."""
    if version < 16 or err not in LEADER_MOVED or leader is None:
        return None
    return b"\x01\x01\x09" + _I32.pack(leader[0]) + _I32.pack(LEADER_EPOCH) + b"\0"


def _node_endpoints(leader: tuple[int, str, int]) -> bytes:
    """The body's tagged fields naming the leader's endpoint (tag 0, KIP-951)."""
    host = leader[1].encode()
    node = _I32.pack(leader[0]) + _uvarint(len(host) + 1) + host + _I32.pack(leader[2]) + b"\0\0"  # rack null
    field = _uvarint(2) + node
    return b"\x01\x00" + _uvarint(len(field)) + field


def encode_fetch_response(correlation_id: int, version: int, topics: list,
                          leader: tuple[int, str, int] | None = None, read_committed: bool = False) -> Frame:
    """The whole response frame, record sections as they were read (bytes or FileRegions).

    From v12 the layout is flexible: response header v1 (a tagged-field section after the correlation
    id), compact lengths (uvarint of n + 1) for arrays, strings and record sections, and a tagged-field
    section closing each partition, each topic and the body. Those sections are empty but in one case:
    from v16, a partition whose error says its leader moved (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH)
    names the current leader, and the body its endpoint (KIP-951; ``leader`` is (node id, host, port)).
    On one node that cannot happen today, as the leader never changes; diverging epochs and snapshots
    are a follower's concerns and never sent.
    """
    flexible = version >= 12
    moved = False
    head = [_I32.pack(correlation_id)]
    if flexible:
        head.append(b"\0")  # response header v1: no tagged fields
    head.append(_I32.pack(0))  # throttle time
    if version >= 7:
        head.append(b"\0\0" + _I32.pack(0))  # no error, session id 0 (no fetch session)
    head.append(_count(len(topics), flexible))
    parts: list = []
    pending = b"".join(head)  # small fields gathered until the next record section
    tags = b"\0" if flexible else b""
    # aborted transactions: none (there are no transactions); as in Kafka, an empty list for read_committed
    # and null (no list looked for) for read_uncommitted
    aborted = _count(0 if read_committed else -1, flexible)
    for key, rows in topics:
        pending += _topic_key(key, version) + _count(len(rows), flexible)
        for index, err, hw, start, data in rows:
            fields = _PART_V4.pack(index, err, hw, hw)
            if version >= 5:
                fields += _I64.pack(start)
            fields += aborted
            if version >= 11:
                fields += _I32.pack(-1)  # no preferred read replica
            fields += _uvarint(len(data) + 1) if flexible else _I32.pack(len(data))
            closing = _leader_tags(version, err, leader)
            moved = moved or closing is not None
            closing = tags if closing is None else closing
            if data:
                parts.append(pending + fields)
                parts.append(data)
                pending = closing
            else:
                pending += fields + closing
        pending += tags
    parts.append(pending + (_node_endpoints(leader) if moved else tags))  # (an empty part is skipped by the writer)
    size = sum(map(len, parts))
    parts.insert(0, _I32.pack(size))
    return Frame(parts)


def _wanted(broker: Broker, req: Request) -> list:
    """(name, key, partitions) per topic asked for: the key is what the response names it by (its name,
    or from v13 its id); the name is None for an id no topic has."""
    if req.api_version < 13:
        return [(t.topic, t.topic, t.partitions) for t in req.body.topics]
    return [(topic_with_uuid(broker, t.topic_id), t.topic_id, t.partitions) for t in req.body.topics]


async def fetch(broker: Broker, req: Request, session: Session):
    body = req.body
    asked = _wanted(broker, req)
    # a topic id nobody has: UNKNOWN_TOPIC_ID (100); a topic without READ: TOPIC_AUTHORIZATION_FAILED (29);
    # the others are read, at once when one of those errors is in the answer
    verdict = [100 if name is None else 0 if broker.authorize(session, "READ", "TOPIC", name) else 29
               for name, _key, _parts in asked]
    wanted = [t for t, code in zip(asked, verdict) if code == 0]
    refused = len(wanted) < len(asked)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(body.max_wait.total_seconds(), 0)
    size = sum(p.partition_max_bytes for _n, _k, parts in wanted for p in parts)
    inline = min(size, body.max_bytes) <= INLINE_BYTES  # a small read costs less than the hop to a thread
    while True:
        if inline:
            topics, total, error = read_partitions(broker, wanted, body.max_bytes)
        else:
            topics, total, error = await broker.blocking(read_partitions, broker, wanted, body.max_bytes, ZERO_COPY)
        remaining = deadline - loop.time()
        if refused or error or total >= body.min_bytes or remaining <= 0 or broker.stopping:
            if refused:
                read = iter(topics)
                topics = [next(read) if code == 0 else (key, [(p.partition, code, -1, -1, b"") for p in parts])
                          for (_name, key, parts), code in zip(asked, verdict)]
            return encode_fetch_response(req.correlation_id, req.api_version, topics,
                                         (broker.node_id, *broker.address(session)), body.isolation_level == 1)
        release(topics)
        await broker.wait_for_data(remaining)


HANDLERS = {1: fetch}
