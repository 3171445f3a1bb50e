"""The settings of ``compactlog serve`` beyond the storage's: the network (listeners, limits), the group
coordinator (``group.*``, ``offsets.*``), the transaction coordinator (``transaction.*``), security
(``ssl.*``, ``sasl.*``, ACLs) and the web console's listeners, with Kafka's names and defaults.

``ServerConfig`` is the broker config ``serve`` reads from ``server.properties`` and ``--override``: the
storage's ``BrokerConfig`` widened with these, as Kafka's ``KafkaConfig`` gathers the configs of every
part of the broker. The storage never sees them, so they live here, with the part that reads them;
DescribeConfigs describes the whole table.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import ClassVar, Mapping

from ..storage.broker_config import BROKER_CONFIGS, BrokerConfig
from ..storage.configdef import INT_MAX, Check, ConfigKey, at_least, between, list_of, one_of, setting


def _principals(text: str | None) -> bool:
    """``super.users``' form: a principal without its type (``admin``) would never match anyone, so is
    refused at start, as Kafka's authorizer refuses it."""
    items = [p.strip() for p in (text or "").split(";") if p.strip()]
    return all(kind.strip() and sep and name.strip() for kind, sep, name in (p.partition(":") for p in items))


SERVER_CONFIGS: Mapping[str, ConfigKey] = MappingProxyType({k.name: k for k in [
    setting("node.id", "int", 1, at_least(0),
            "This broker's id, shown to clients in Metadata as leader of every partition.", "high"),
    setting("auto.create.topics.enable", "boolean", True, None,
            "Create a topic when a producer writes to one that does not exist.", "high"),
    setting("listeners", "list", ["PLAINTEXT://127.0.0.1:9092"], None,
            "Where the broker listens: NAME://host:port, comma-separated; names map to protocols through "
            "listener.security.protocol.map. Port 0 picks a free port. Loopback unless told otherwise.", "high"),
    setting("http.listeners", "list", None, None,
            "Where the web console listens: http://host:port, comma-separated (https:// serves it with the ssl.* "
            "settings). Unset: no console. Port 0 picks a free port; bind loopback unless the ACLs and SASL users "
            "are in place (the console asks for a login once SASL users exist).", "medium"),
    setting("advertised.listeners", "list", None, None,
            "Addresses given to clients in Metadata, per listener name; the bound address when unset.", "high"),
    setting("listener.security.protocol.map", "list",
            ["PLAINTEXT:PLAINTEXT", "SSL:SSL", "SASL_PLAINTEXT:SASL_PLAINTEXT", "SASL_SSL:SASL_SSL"], None,
            "Listener name to security protocol.", "low"),
    setting("socket.request.max.bytes", "int", 104857600, at_least(1),
            "Largest request frame; a bigger one closes its connection.", "high"),
    setting("fetch.max.bytes", "int", 57671680, at_least(0),
            "Most record bytes in one fetch answer, whatever the client asks (the first batch is whole even "
            "when larger, so consumers are never stuck behind it)."),
    setting("max.connections", "int", INT_MAX, at_least(0), "Most open client connections; more are closed at once."),
    setting("max.connections.per.ip", "int", INT_MAX, at_least(0),
            "Most open connections from one address; more are closed at once."),
    setting("connections.max.idle.ms", "long", 600000, None, "Close connections idle this long."),
    setting("max.request.partition.size.limit", "int", 2000, at_least(1),
            "Most partitions in one DescribeTopicPartitions answer; the client pages through the rest."),
    setting("queued.max.requests", "int", 500, at_least(1),
            "Requests read ahead on one connection before the broker stops reading from it."),
    setting("group.initial.rebalance.delay.ms", "int", 3000, at_least(0),
            "How long the first rebalance of an empty group waits for more members to join."),
    setting("group.min.session.timeout.ms", "int", 6000, None, "Shortest session timeout a group member may ask for."),
    setting("group.max.session.timeout.ms", "int", 1800000, None,
            "Longest session timeout a group member may ask for."),
    setting("group.max.size", "int", INT_MAX, at_least(1), "Most members in one consumer group."),
    setting("offsets.topic.num.partitions", "int", 50, at_least(1),
            "Partitions of __consumer_offsets, where committed offsets and group metadata are kept.", "high"),
    setting("offsets.topic.segment.bytes", "int", 104857600, at_least(1), "segment.bytes of __consumer_offsets.",
            "high"),
    setting("offsets.retention.minutes", "int", 10080, at_least(1),
            "Committed offsets of a group expire this long after the group became empty."),
    setting("offsets.retention.check.interval.ms", "long", 600000, at_least(1),
            "How often expired offsets are removed."),
    setting("offset.metadata.max.bytes", "int", 4096, None, "Largest metadata string of one committed offset."),
    # The transaction coordinator's (Kafka's TransactionLogConfig and TransactionStateManagerConfig), with
    # Kafka's defaults and rules (server/txn_coordinator.py, server/txn_log.py).
    setting("transaction.state.log.num.partitions", "int", 50, at_least(1),
            "Partitions of __transaction_state, where each transactional id's state is kept in the partition its "
            "hash names; do not change it once ids are stored.", "high"),
    setting("transaction.state.log.segment.bytes", "int", 104857600, at_least(1),
            "segment.bytes of __transaction_state; small segments compact sooner and load faster.", "high"),
    setting("transaction.state.log.replication.factor", "int", 3, between(1, 32767),
            "Replicas of __transaction_state (a Java short in Kafka); accepted, but one node holds the one replica.",
            "high"),
    setting("transaction.state.log.min.isr", "int", 2, at_least(1),
            "Replicas that must take a write to __transaction_state before it counts; accepted, but one node holds "
            "the one replica.", "high"),
    setting("transaction.max.timeout.ms", "int", 900000, at_least(1),
            "Longest transaction timeout a producer may ask for in InitProducerId; a longer one is refused "
            "(INVALID_TRANSACTION_TIMEOUT), since an open transaction holds back read_committed consumers.", "high"),
    setting("transactional.id.expiration.ms", "int", 604800000, at_least(1),
            "A transactional id with no transaction open and no state change for this long is forgotten (a "
            "tombstone in __transaction_state).", "high"),
    setting("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10000, at_least(1),
            "How often the coordinator looks for transactions open past their timeout and aborts them.", "low"),
    setting("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3600000, at_least(1),
            "How often the coordinator forgets transactional ids past transactional.id.expiration.ms.", "low"),
    # Security: TLS listeners, SASL logins, ACLs (compactlog/security, server/security.py, server/sasl.py).
    setting("ssl.keystore.type", "string", "PEM", one_of("PEM"),
            "Format of the broker's certificate and key; only PEM here (Kafka's default is JKS).", "medium"),
    setting("ssl.keystore.location", "string", None, None,
            "A PEM file with the broker's certificate chain and its private key, for SSL and SASL_SSL listeners.",
            "high"),
    setting("ssl.keystore.certificate.chain", "string", None, None,
            "The certificate chain in PEM, inline, instead of ssl.keystore.location.", "high"),
    setting("ssl.keystore.key", "string", None, None,
            "The private key in PEM, inline (with ssl.keystore.certificate.chain). Sensitive.", "high"),
    setting("ssl.key.password", "string", None, None, "Password of an encrypted private key. Sensitive.", "high"),
    setting("ssl.truststore.type", "string", "PEM", one_of("PEM"), "Format of the trusted CA certificates; only PEM.",
            "medium"),
    setting("ssl.truststore.location", "string", None, None,
            "A PEM bundle of the CA certificates client certificates are checked against.", "high"),
    setting("ssl.truststore.certificates", "string", None, None,
            "The trusted CA certificates in PEM, inline, instead of ssl.truststore.location.", "high"),
    setting("ssl.client.auth", "string", "none", one_of("required", "requested", "none"),
            "Client certificates on SSL listeners: none, requested (checked when sent) or required. With one, "
            "the client's principal is User:<the certificate's subject DN>.", "medium"),
    setting("ssl.enabled.protocols", "list", ["TLSv1.2", "TLSv1.3"], list_of("TLSv1.2", "TLSv1.3"),
            "TLS versions accepted on SSL and SASL_SSL listeners.", "medium"),
    setting("sasl.server.max.receive.size", "int", 524288, at_least(1),
            "Largest request frame taken from a client on a SASL listener before it has logged in."),
    setting("sasl.enabled.mechanisms", "list", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"],
            list_of("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
            "SASL mechanisms offered on SASL_PLAINTEXT and SASL_SSL listeners (Kafka's default is GSSAPI, which "
            "compactlog does not have). Users and their SCRAM credentials: compactlog configs --entity-type users.",
            "medium"),
    setting("connection.failed.authentication.delay.ms", "int", 100, at_least(0),
            "How long a failed SASL login waits before its answer and the close, to slow down password guessing.",
            "low"),
    setting("super.users", "string", None, Check(_principals, "expected principals in format principalType:principalName "
                                                  "separated by ';', as in User:admin;User:bob", "User:name;..."),
            "Principals allowed everything whatever the ACLs say, separated by ';' (User:admin;User:bob).", "medium"),
    setting("allow.everyone.if.no.acl.found", "boolean", False, None,
            "Once ACLs exist, whether a resource no ACL names is open to everyone (while no ACL exists at all, "
            "everything is allowed).", "medium"),
]})

# Secrets among them: describe them without their value (Kafka's sensitive configs).
SENSITIVE_CONFIGS = frozenset({"ssl.keystore.key", "ssl.key.password", "ssl.keystore.password",
                               "ssl.truststore.password"})


class ServerConfig(BrokerConfig):
    """The settings of ``compactlog serve``: the storage's and the server's (``SERVER_CONFIGS``), from one
    ``server.properties``. Immutable; unknown names are kept and warned about, as ``BrokerConfig`` does."""

    TABLE: ClassVar[Mapping[str, ConfigKey]] = MappingProxyType(
        dict(sorted({**BROKER_CONFIGS, **SERVER_CONFIGS}.items())))
