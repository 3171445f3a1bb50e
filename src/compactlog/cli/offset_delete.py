"""OffsetDelete (API 47) for ``consumer-groups --delete-offsets``, sent by hand.

librdkafka's Python admin client has no call for it, so this module writes the one request with kio's
schemas (the broker's own codec library) over a connection of ours to the bootstrap broker, which on a
single node is every group's coordinator; ``sasl_client.connect`` logs it in as ``--command-config`` says.
"""

from __future__ import annotations

from ..errors import CompactLogError
from .wire import CONNECT_TIMEOUT_S, TIMEOUT_S, TopicPartitionKey, addresses

MAX_RESPONSE_BYTES = 16 << 20  # an answer naming a few thousand partitions is far smaller


def delete_offsets(bootstrap: str, group: str, partitions: list[TopicPartitionKey]) -> tuple[int, dict[TopicPartitionKey, int]]:
    """Ask the broker to forget ``group``'s committed offsets of ``partitions``: the answer's error code
    for the group, and one per partition (0: deleted)."""
    from kio.schema.offset_delete.v0 import request, response

    by_topic: dict[str, list[int]] = {}
    for topic, p in partitions:
        by_topic.setdefault(topic, []).append(p)
    body = request.OffsetDeleteRequest(group_id=group, topics=tuple(
        request.OffsetDeleteRequestTopic(name=t, partitions=tuple(
            request.OffsetDeleteRequestPartition(partition_index=p) for p in sorted(set(ps))))
        for t, ps in by_topic.items()))
    answer = _ask(bootstrap, body, response.OffsetDeleteResponse)
    codes = {(t.name, p.partition_index): int(p.error_code) for t in answer.topics for p in t.partitions}
    return int(answer.error_code), codes


def _ask(bootstrap: str, body, response_cls):
    """``body`` to the first broker of ``bootstrap`` that takes a connection; its answer."""
    from .sasl_client import ask, connect

    last: OSError | None = None
    for entry, host, port in addresses(bootstrap):
        try:
            with connect(host, port, CONNECT_TIMEOUT_S) as sock:
                sock.settimeout(TIMEOUT_S)
                return ask(sock, body, response_cls, MAX_RESPONSE_BYTES, entry)
        except OSError as exc:
            last = exc
    raise CompactLogError(f"no broker answered at {bootstrap}: {last}")
