"""The log cleaner's broker settings (``log.cleaner.*``), as Kafka's ``CleanerConfig`` declares them.

They join the broker settings table (``broker_config.py``); the cleaner reads them from the broker's
``BrokerConfig``. The cleaner's per-topic settings (``min.cleanable.dirty.ratio``,
``delete.retention.ms``, ...) are topic configs (``topic_config.py``), whose broker defaults are
``log.cleaner.min.cleanable.ratio`` and the like.
"""

from __future__ import annotations

from .configdef import DOUBLE_MAX, ConfigKey, at_least, between, setting

CLEANER_CONFIGS: list[ConfigKey] = [
    setting("log.cleaner.enable", "boolean", True, None, "Run the log cleaner; without it compacted topics only grow."),
    setting("log.cleaner.threads", "int", 1, at_least(0), "Cleaner threads."),
    setting("log.cleaner.dedupe.buffer.size", "long", 134217728, at_least(0),
            "Memory of the cleaner's offset maps, split between its threads (and between the runs of Pulsar-style "
            "compaction, log.compaction.threads); a bigger map covers more keys per pass."),
    setting("log.cleaner.io.buffer.size", "int", 524288, at_least(0),
            "Read and write buffer memory of the cleaner, split between its threads."),
    setting("log.cleaner.io.buffer.load.factor", "double", 0.9, between(0, 1),
            "How full the cleaner's offset map may get before a pass stops (it is the dedupe buffer's load factor)."),
    setting("log.cleaner.backoff.ms", "long", 15000, at_least(0), "Sleep of a cleaner thread that found nothing to do."),
    setting("log.cleaner.io.max.bytes.per.second", "double", DOUBLE_MAX, None,
            "Throttle on the cleaner's reads plus writes, all threads together."),
]
