"""OffsetDelete (API 47) for ``consumer-groups --delete-offsets``, sent by hand.

librdkafka's Python admin client has no call for it, so this module writes the one request with kio's
schemas (the broker's own codec library) over a connection of ours to the bootstrap broker, which on a
single node is every group's coordinator; ``sasl_client.connect`` logs it in as ``--command-config`` says.
"""

from __future__ import annotations

import io
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
    from .sasl_client import connect, exchange

    last: OSError | None = None
    for entry in bootstrap.split(","):
        host, _, port = entry.strip().rpartition(":")
        try:
            with connect(host.strip("[]"), int(port), CONNECT_TIMEOUT_S) as sock:
                sock.settimeout(TIMEOUT_S)
                return exchange(sock, payload, MAX_RESPONSE_BYTES, entry.strip())
        except OSError as exc:
            last = exc
    raise CompactLogError(f"no broker answered at {bootstrap}: {last}")
