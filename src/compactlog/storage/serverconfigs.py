"""Broker settings of the network server and the group coordinator (``compactlog serve``).

Kafka's names and defaults; they join the broker config table in ``config.py`` so that
``server.properties`` files, ``--override`` and DescribeConfigs treat them like every other setting.
"""

from __future__ import annotations

from .configdef import INT_MAX, ConfigKey, at_least


def _key(name: str, typ: str, default, validator, doc: str, importance: str = "medium") -> ConfigKey:
    return ConfigKey(name, typ, default, doc, validator, importance)


SERVER_CONFIGS = [
    _key("node.id", "int", 1, at_least(0), "This broker's id, shown to clients in Metadata as leader of every partition.",
         "high"),
    _key("listeners", "list", "PLAINTEXT://127.0.0.1:9092", None,
         "Where the broker listens: NAME://host:port, comma-separated; names map to protocols through "
         "listener.security.protocol.map. Port 0 picks a free port. Loopback unless told otherwise.", "high"),
    _key("advertised.listeners", "list", None, None,
         "Addresses given to clients in Metadata, per listener name; the bound address when unset.", "high"),
    _key("listener.security.protocol.map", "list",
         "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", None,
         "Listener name to security protocol.", "low"),
    _key("socket.request.max.bytes", "int", 104857600, at_least(1),
         "Largest request frame; a bigger one closes its connection.", "high"),
    _key("max.connections", "int", INT_MAX, at_least(0), "Most open client connections; more are closed at once."),
    _key("max.connections.per.ip", "int", INT_MAX, at_least(0),
         "Most open connections from one address; more are closed at once."),
    _key("connections.max.idle.ms", "long", 600000, None, "Close connections idle this long."),
    _key("queued.max.requests", "int", 500, at_least(1),
         "Requests read ahead on one connection before the broker stops reading from it."),
    _key("group.initial.rebalance.delay.ms", "int", 3000, at_least(0),
         "How long the first rebalance of an empty group waits for more members to join."),
    _key("group.min.session.timeout.ms", "int", 6000, None, "Shortest session timeout a group member may ask for."),
    _key("group.max.session.timeout.ms", "int", 1800000, None, "Longest session timeout a group member may ask for."),
    _key("group.max.size", "int", INT_MAX, at_least(1), "Most members in one consumer group."),
    _key("offsets.topic.num.partitions", "int", 50, at_least(1),
         "Partitions of __consumer_offsets, where committed offsets and group metadata are kept.", "high"),
    _key("offsets.topic.segment.bytes", "int", 104857600, at_least(1), "segment.bytes of __consumer_offsets.", "high"),
    _key("offsets.retention.minutes", "int", 10080, at_least(1),
         "Committed offsets of a group expire this long after the group became empty."),
    _key("offsets.retention.check.interval.ms", "long", 600000, at_least(1), "How often expired offsets are removed."),
    _key("offset.metadata.max.bytes", "int", 4096, None, "Largest metadata string of one committed offset."),
    _key("transactional.id.expiration.ms", "int", 604800000, at_least(1),
         "Kept for Kafka's tools; compactlog has no transactions."),
    _key("producer.id.expiration.ms", "int", 86400000, at_least(1),
         "Kept for Kafka's tools: idempotent producer state lives as long as the log's last two segments here."),
]

