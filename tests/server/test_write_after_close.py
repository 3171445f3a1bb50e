"""An answer of many parts (a fetch over many partitions, or a large one in slices) stops being written once
its connection is closing: each write to a lost socket after the fifth made asyncio log 'socket.send()
raised exception.', and a file range handed to sendfile on a closing transport raised."""

from __future__ import annotations

import asyncio

from compactlog.server.network import WRITE_SLICE, ClientConnection


class ClosingTransport:
    """Takes one write, then is closing, as a transport is after the peer reset the connection."""

    def __init__(self) -> None:
        self.writes = 0

    def is_closing(self) -> bool:
        return self.writes >= 1

    def write(self, data) -> None:
        self.writes += 1


class FileRange:
    def __init__(self) -> None:
        self.sent = self.closed = False

    async def send(self, transport) -> None:
        self.sent = True

    def close(self) -> None:
        self.closed = True


def test_no_write_after_the_transport_closes():
    async def run() -> tuple[ClosingTransport, FileRange]:
        conn = ClientConnection.__new__(ClientConnection)  # only what _write_parts uses
        conn.transport = ClosingTransport()
        conn.writable = asyncio.Event()
        conn.writable.set()
        region = FileRange()
        await conn._write_parts([b"x" * (WRITE_SLICE * 3)] + [b"part"] * 20 + [region])
        return conn.transport, region

    transport, region = asyncio.run(run())
    assert transport.writes == 1
    assert not region.sent and region.closed  # its descriptor given back, as for any answer not sent
