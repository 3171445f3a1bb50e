"""Fetch: stored batches handed out as they are on disk, with Kafka's long poll.

A fetch asks, per partition, for the batches from an offset on. We return the stored bytes from the
batch holding that offset (it may start before it; clients skip what they did not ask for), never
decoded or re-sliced, up to ``partition_max_bytes`` per partition and ``max_bytes`` in all, except that
the first batch found is always returned whole (KIP-74) so that no consumer is stuck behind a big one.
Over a compacted topic the offsets have holes; a fetch offset inside a hole gets the next batch.

When fewer than ``min_bytes`` are there, the request is parked until an append wakes it or
``max_wait_ms`` passes (Kafka's purgatory). Requests behind it on the same connection wait, as in Kafka.

Isolation (v4+): every answer carries the partition's last stable offset (LSO), whatever the level, as
Kafka's does. A read_committed fetch (isolation level 1) hands out bytes only below the LSO, ending at the
last whole batch before it (Kafka bounds the read by the LSO's position in its segment), and lists the
aborted transactions (producer id, first offset) overlapping what it hands out, from the ``.txnindex``
files (``Partition.aborted_transactions``); the client drops those producers' batches from each first
offset up to the ABORT marker, and never hands out control records. A read_uncommitted fetch reads up to
the high watermark and its aborted list is null (not looked for), as in Kafka.

A read_committed fetch parked for ``min_bytes`` wakes as any fetch does, on ``Broker.data_arrived``,
which every writer calls (appends and transaction markers alike): a marker that moves the LSO makes the
held-back data readable at once, not at ``max_wait_ms``.

Fetch sessions (v7+) are not kept: every answer has session id 0, so clients send full fetches, which
Kafka allows, and every partition asked for is in every answer (a session would return one whose LSO
moved; a full answer returns them all).

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
_ABORTED = struct.Struct(">qq")  # producer id, first offset
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
            if isinstance(row[-1], FileRegion):
                row[-1].close()


def error_row(index: int, code: int, hw: int = -1, start: int = -1, aborted: list | None = None) -> tuple:
    """A partition's row in an answer that hands out nothing: its LSO unknown (-1), as Kafka's are."""
    return (index, code, hw, -1, start, aborted, b"")


def read_partitions(broker: Broker, wanted: list, max_bytes: int, zero_copy: bool = False,
                    read_committed: bool = False) -> tuple[list, int, bool]:
    """Per topic of ``wanted`` ((name, key, partitions) each), (key, rows) with a row per partition: (index,
    error, high watermark, last stable offset, log start, aborted transactions, records); the total bytes;
    whether any partition has an error. ``read_committed`` ends each read below the LSO and lists the
    aborted transactions in what is read (else the list is None: null on the wire).

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
                    rows.append(error_row(p.partition, 3, aborted=[]))  # as Kafka answers a partition it has not
                    error = True
                    continue
                problem = epoch_problem(getattr(p, "current_leader_epoch", -1))
                if problem:
                    rows.append(error_row(p.partition, problem, part.high_watermark, part.log_start_offset))
                    error = True
                    continue
                # the watermarks before the read, as Kafka takes them (an append meanwhile only adds above);
                # the LSO first, so that it is never above the high watermark read after it. Finding the
                # LSO may load the producer state, which can meet damage: this partition answers with it
                try:
                    lso = part.last_stable_offset
                except CompactLogError as exc:
                    rows.append(error_row(p.partition, exc.code))
                    error = True
                    continue
                hw, start = part.high_watermark, part.log_start_offset
                limit = min(p.partition_max_bytes, budget - total)
                data = b""
                aborted = [] if read_committed else None
                if (name, p.partition) not in seen and (limit > 0 or first):  # a repeat is read once
                    seen.add((name, p.partition))
                    try:
                        found = part.locate(p.fetch_offset, max(limit, 0), min_one_message=first,
                                            max_offset=lso if read_committed else None)
                        if read_committed and found is not None and found.size > 0:
                            aborted = part.aborted_transactions(p.fetch_offset, part.fetch_upper_bound(found))
                    except CompactLogError as exc:
                        rows.append(error_row(p.partition, exc.code, hw, start))
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
                rows.append((p.partition, 0, hw, lso, start, aborted, data))
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
                          leader: tuple[int, str, int] | None = None) -> Frame:
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
    for key, rows in topics:
        pending += _topic_key(key, version) + _count(len(rows), flexible)
        for index, err, hw, lso, start, aborted, data in rows:
            fields = _PART_V4.pack(index, err, hw, lso)
            if version >= 5:
                fields += _I64.pack(start)
            fields += _aborted(aborted, flexible)
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


def _aborted(aborted: list | None, flexible: bool) -> bytes:
    """The aborted transactions field: null (None: not looked for, as for read_uncommitted) or
    (producer id, first offset) pairs."""
    if aborted is None:
        return _count(-1, flexible)
    return _count(len(aborted), flexible) + b"".join(
        _ABORTED.pack(pid, first) + (b"\0" if flexible else b"") for pid, first in aborted)


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
    if body.isolation_level not in (0, 1):  # Kafka fails such a request whole; we name the field instead
        return encode_fetch_response(req.correlation_id, req.api_version, [
            (key, [error_row(p.partition, 42, aborted=[]) for p in parts]) for _n, key, parts in asked])
    committed = body.isolation_level == 1
    while True:
        if inline:
            topics, total, error = read_partitions(broker, wanted, body.max_bytes, False, committed)
        else:
            topics, total, error = await broker.blocking(read_partitions, broker, wanted, body.max_bytes, ZERO_COPY,
                                                         committed)
        remaining = deadline - loop.time()
        if refused or error or total >= body.min_bytes or remaining <= 0 or broker.stopping:
            if refused:
                read = iter(topics)
                # as Kafka answers a refused or unknown topic: no watermarks, and an empty aborted list
                topics = [next(read) if code == 0 else (key, [error_row(p.partition, code, aborted=[]) for p in parts])
                          for (_name, key, parts), code in zip(asked, verdict)]
            return encode_fetch_response(req.correlation_id, req.api_version, topics,
                                         (broker.node_id, *broker.address(session)))
        release(topics)
        await broker.wait_for_data(remaining)


HANDLERS = {1: fetch}
