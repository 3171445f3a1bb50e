"""OffsetDelete (API 47) for ``consumer-groups --delete-offsets``, sent by hand.

librdkafka's Python admin client has no call for it, so this module writes the one request with kio's
schemas (the broker's own codec library) over a plain connection to the bootstrap broker, which on a
single node is every group's coordinator. The command line speaks PLAINTEXT only (``wire.client_config``
sets no security either), so nothing more than a socket is needed.
"""

from __future__ import annotations

import io
import socket
import struct

from ..errors import CompactLogError
from .wire import CONNECT_TIMEOUT_S, TIMEOUT_S, TopicPartitionKey

_I32 = struct.Struct(">i")
MAX_RESPONSE_BYTES = 16 << 20  # an answer naming a few thousand partitions is far smaller


def delete_offsets(bootstrap: str, group: str, partitions: list[TopicPartitionKey]) -> tuple[int, dict[TopicPartitionKey, int]]:
    """Ask the broker to forget ``group``'s committed offsets of ``partitions``: the answer's error code
    for the group, and one per partition (0: deleted)."""
    from kio.schema.offset_delete.v0 import request, response
    from kio.serial import entity_reader, entity_writer

    by_topic: dict[str, list[int]] = {}
    for topic, p in partitions:
        by_topic.setdefault(topic, []).append(p)
    body = request.OffsetDeleteRequest(group_id=group, topics=tuple(
        request.OffsetDeleteRequestTopic(name=t, partitions=tuple(
            request.OffsetDeleteRequestPartition(partition_index=p) for p in sorted(set(ps))))
        for t, ps in by_topic.items()))
    out = io.BytesIO()
    header = request.RequestHeader(request_api_key=body.__api_key__, request_api_version=body.__version__,
                                   correlation_id=1, client_id="compactlog-cli")
    entity_writer(request.RequestHeader)(out, header)
    entity_writer(request.OffsetDeleteRequest)(out, body)
    payload = _ask(bootstrap, out.getvalue())
    (correlation,) = _I32.unpack_from(payload, 0)
    if correlation != 1:
        raise CompactLogError(f"the broker at {bootstrap} answered another request (correlation id {correlation})")
    answer, _ = entity_reader(response.OffsetDeleteResponse)(memoryview(payload), 4)
    codes = {(t.name, p.partition_index): int(p.error_code) for t in answer.topics for p in t.partitions}
    return int(answer.error_code), codes


def _ask(bootstrap: str, payload: bytes) -> bytes:
    """One request frame to the first broker of ``bootstrap`` that takes a connection; its answer's bytes."""
    last: OSError | None = None
    for entry in bootstrap.split(","):
        host, _, port = entry.strip().rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S) as sock:
                sock.settimeout(TIMEOUT_S)
                sock.sendall(_I32.pack(len(payload)) + payload)
                (size,) = _I32.unpack(_read(sock, 4))
                if not 4 <= size <= MAX_RESPONSE_BYTES:
                    raise CompactLogError(f"the broker at {entry.strip()} sent a {size}-byte answer")
                return _read(sock, size)
        except OSError as exc:
            last = exc
    raise CompactLogError(f"no broker answered at {bootstrap}: {last}")


def _read(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)
