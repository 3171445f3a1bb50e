"""Kafka's internal topics, as the layers above the embedded API name them.

``__consumer_offsets`` (the group coordinator's) and ``__transaction_state`` are Kafka's own: clients may
not write to them or delete them, Metadata marks them ``is_internal``, and the console shows them apart.
The set is defined once, with the configs Kafka forces on them, where the storage keeps topics
(``storage.topics``); the broker, the console and the CLI find it here, so none of them reaches under
the API for it.
"""

from __future__ import annotations

from .storage.topics import INTERNAL_TOPICS


def is_internal(topic: str) -> bool:
    """Whether ``topic`` is one of Kafka's internal topics."""
    return topic in INTERNAL_TOPICS


__all__ = ["INTERNAL_TOPICS", "is_internal"]
