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
import dataclasses
import os
import struct

from ..errors import CompactLogError
from .broker import Broker, Session
from .metadata import epoch_problem
from .protocol import Frame, Request

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PART_V4 = struct.Struct(">ihqq")  # index, error, high watermark, last stable offset
_I64 = struct.Struct(">q")
INLINE_BYTES = 1024 * 1024
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


def read_partitions(broker: Broker, body, version: int, zero_copy: bool = False) -> tuple[list, int, bool]:
    """Per topic, per partition: (index, error, high watermark, log start, records); total bytes; any error.

    With ``zero_copy`` a range of at least ZERO_COPY_BYTES comes back as a FileRegion to send with
    sendfile; smaller ones are read (a copy costs less than a descriptor and the calls around it).
    """
    find = broker.cl.find_partition
    budget = min(body.max_bytes, broker.config.get("fetch.max.bytes"))
    total = 0
    error = False
    first = True
    regions = 0
    seen: set[tuple[str, int]] = set()
    out: list = []
    rows: list = []
    try:
        for t in body.topics:
            rows = []
            for p in t.partitions:
                part = find(t.topic, p.partition)
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
                if (t.topic, p.partition) not in seen and (limit > 0 or first):  # a repeat is read once
                    seen.add((t.topic, p.partition))
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
            out.append((t.topic, rows))
    except BaseException:
        release(out + [("", rows)])
        raise
    return out, total, error


def encode_fetch_response(correlation_id: int, version: int, topics: list) -> Frame:
    head = [_I32.pack(correlation_id), _I32.pack(0)]  # correlation id, throttle time
    if version >= 7:
        head.append(b"\0\0" + _I32.pack(0))  # no error, session id 0 (no fetch session)
    head.append(_I32.pack(len(topics)))
    parts: list = [b"".join(head)]
    for name, rows in topics:
        parts.append(_string(name) + _I32.pack(len(rows)))
        for index, err, hw, start, data in rows:
            fields = _PART_V4.pack(index, err, hw, hw)
            if version >= 5:
                fields += _I64.pack(start)
            fields += _I32.pack(0)  # aborted transactions: none
            if version >= 11:
                fields += _I32.pack(-1)  # no preferred read replica
            parts.append(fields + _I32.pack(len(data)))
            if data:
                parts.append(data)
    size = sum(map(len, parts))
    parts.insert(0, _I32.pack(size))
    return Frame(parts)


async def fetch(broker: Broker, req: Request, session: Session):
    body = req.body
    allowed = [broker.authorize(session, "READ", "TOPIC", t.topic) for t in body.topics]
    refused = not all(allowed)
    if refused:  # topics without READ get TOPIC_AUTHORIZATION_FAILED; the others are read, at once
        body = dataclasses.replace(body, topics=tuple(t for t, ok in zip(body.topics, allowed) if ok))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(body.max_wait.total_seconds(), 0)
    asked = sum(p.partition_max_bytes for t in body.topics for p in t.partitions)
    inline = min(asked, body.max_bytes) <= INLINE_BYTES  # a small read costs less than the hop to a thread
    while True:
        if inline:
            topics, total, error = read_partitions(broker, body, req.api_version)
        else:
            topics, total, error = await broker.blocking(read_partitions, broker, body, req.api_version,
                                                         ZERO_COPY)
        remaining = deadline - loop.time()
        if refused or error or total >= body.min_bytes or remaining <= 0 or broker.stopping:
            if refused:
                read = iter(topics)
                topics = [next(read) if ok else (t.topic, [(p.partition, 29, -1, -1, b"") for p in t.partitions])
                          for t, ok in zip(req.body.topics, allowed)]
            return encode_fetch_response(req.correlation_id, req.api_version, topics)
        release(topics)
        await broker.wait_for_data(remaining)


HANDLERS = {1: fetch}
