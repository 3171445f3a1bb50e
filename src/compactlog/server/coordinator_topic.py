"""A coordinator's own compacted topic: ``__consumer_offsets`` for the group coordinator
(``coordinator/manager.py``), ``__transaction_state`` for the transaction coordinator (``txn_log.py``).

Both are made the same way, the first time a client looks for its coordinator, with Kafka's settings
for them: a partition count and a segment size from the broker's config, ``cleanup.policy=compact``,
and the compression Kafka gives each. Once made, the topic's own partition count wins over a changed
config (as in Kafka: moving ids between partitions would lose them).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Coroutine

from ..errors import TopicAlreadyExistsError, UnknownTopicOrPartitionError

log = logging.getLogger(__name__)


class CoordinatorTopic:
    """Where a coordinator's records go, and the topic's creation. Subclasses name the topic and the
    broker settings it is made with."""

    TOPIC: str
    PARTITIONS_SETTING: str  # e.g. offsets.topic.num.partitions
    SEGMENT_BYTES_SETTING: str  # e.g. offsets.topic.segment.bytes
    COMPRESSION_TYPE: str  # the topic's compression.type

    def __init__(self, cl, config) -> None:
        self.cl = cl  # the broker's CompactLog: it holds the topic
        self.config = config
        self._creating = threading.Lock()  # one creator; appenders wait until every partition exists
        self._preparing: asyncio.Task | None = None

    def partitions(self) -> int:
        """The topic's partition count once it exists, else the config's."""
        if self.cl.has_topic(self.TOPIC):
            return self.cl.partitions_for(self.TOPIC)
        return self.config.get(self.PARTITIONS_SETTING)

    def has_topic(self) -> bool:
        """The topic exists with every partition (its creation registers it before making them)."""
        cl = self.cl
        if not cl.has_topic(self.TOPIC):
            return False
        try:
            count = cl.partitions_for(self.TOPIC)
        except UnknownTopicOrPartitionError:  # deleted meanwhile
            return False
        return all(cl.find_partition(self.TOPIC, p) is not None for p in range(count))

    def ensure_topic(self) -> None:
        """Create the topic unless it exists (blocking: the coordinators run it in a worker thread)."""
        if self.has_topic():
            return
        with self._creating:
            if not self.cl.has_topic(self.TOPIC):
                try:
                    self.cl.create_topic(self.TOPIC, self.config.get(self.PARTITIONS_SETTING), {
                        "cleanup.policy": "compact",
                        "segment.bytes": str(self.config.get(self.SEGMENT_BYTES_SETTING)),
                        "compression.type": self.COMPRESSION_TYPE,
                    })
                    log.info("created %s with %d partitions", self.TOPIC, self.cl.partitions_for(self.TOPIC))
                except TopicAlreadyExistsError:
                    pass
        with self.cl.admin_lock:  # whoever else is creating it holds this until every partition exists
            pass

    def prepare(self, spawn: Callable[[Coroutine], asyncio.Task]) -> None:
        """Start creating the topic in the background if it is missing (a client looked for its
        coordinator: something will be stored soon); ``spawn`` runs the coroutine as the coordinator's
        task. A failure is logged; the first write tries again and reports it."""
        if self.has_topic() or (self._preparing is not None and not self._preparing.done()):
            return

        async def create() -> None:
            try:
                await asyncio.to_thread(self.ensure_topic)
            except Exception as exc:  # noqa: BLE001 - the first write tries again and reports it
                log.warning("cannot create %s yet: %s", self.TOPIC, exc)
        self._preparing = spawn(create())
