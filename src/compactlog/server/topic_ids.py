"""Topic ids on the wire: the storage's text form and kio's ``uuid.UUID``.

The storage keeps a topic's id as Kafka writes it in ``partition.metadata`` (URL-safe base64 of the 16
bytes, no padding; ``CompactLog.topic_id``); the wire carries the 16 bytes, which kio gives as a UUID.
Kafka's "no id" is the all-zero UUID (``ZERO_UUID``). Looking topics up by either form is
``metadata.topic_uuid`` and ``metadata.topic_with_uuid``.
"""

from __future__ import annotations

import base64
import binascii
import uuid

ZERO_UUID = uuid.UUID(int=0)


def topic_uuid(text: str | None) -> uuid.UUID:
    """The UUID of a stored topic id; ZERO_UUID for None or a text that is not one."""
    if not text:
        return ZERO_UUID
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return ZERO_UUID
    return uuid.UUID(bytes=raw) if len(raw) == 16 else ZERO_UUID


def topic_text(value: uuid.UUID) -> str:
    """The stored form of a wire topic id."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")
