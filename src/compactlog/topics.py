"""Kafka's internal topics, as the layers above the embedded API name them.

``__consumer_offsets`` (the group coordinator's) and ``__transaction_state`` are Kafka's own: clients may
not write to them or delete them, Metadata marks them ``is_internal``, and the console shows them apart.
The set is defined once, with the configs Kafka forces on them, where the storage keeps topics
(``storage.topics``); the broker, the console and the CLI find it here, so none of them reaches under
the API for it.
"""

from __future__ import annotations

from .storage.files import validate_topic_name
from .storage.topics import INTERNAL_TOPICS


def is_internal(topic: str) -> bool:
    """Whether ``topic`` is one of Kafka's internal topics."""
    return topic in INTERNAL_TOPICS


def check_deletable(topic: str) -> None:
    """Kafka's internal topics are not deleted by request (DeleteTopics answers INVALID_REQUEST): the
    broker and the command line over a data directory refuse them in the same words."""
    if topic in INTERNAL_TOPICS:
        from .errors import InvalidRequestError, shown

        raise InvalidRequestError(f"Topic {shown(topic)} is internal to the broker (it holds consumer groups' state); "
                                  "it cannot be deleted.")


def replication_refusal(replication_factor: int) -> str:
    """What Kafka's controller answers a replication factor above its broker count, here one, in the words
    operators search for; the broker's CreateTopics and the command line's check both say it."""
    return (f"Unable to replicate the partition {replication_factor} time(s): The target replication factor of "
            f"{replication_factor} cannot be reached because only 1 broker(s) are registered.")


def check_topic_name(topic: str) -> None:
    """Kafka's rules for a topic name (length, characters, not "." or ".."); InvalidTopicError, with
    Kafka's message, when ``topic`` breaks one. For answers about names no topic has (Kafka tells an
    illegal name from an unknown one)."""
    validate_topic_name(topic)


__all__ = ["INTERNAL_TOPICS", "check_deletable", "check_topic_name", "is_internal", "replication_refusal"]
