"""The command line's way to a running broker (``--bootstrap-server HOST:PORT``), as Kafka's tools have.

While ``compactlog serve`` owns a data directory, no other process may open it, so the commands talk to
the server instead, through Kafka's protocol and a real Kafka client (librdkafka, by confluent-kafka).
``WireClient`` offers the methods of :class:`compactlog.CompactLog` the commands call, under the same
names and with the same arguments and results (``create_topic``, ``describe_topic``,
``alter_topic_config``, ``produce_batch``, ``consume``...), so each command has one body for both
targets and prints the same lines either way.

Errors from the broker keep their Kafka code and message and become our typed errors
(``CompactLogError`` subclasses), so the CLI prints them as ``Error: <message>`` with exit status 1.
confluent-kafka is imported only here, inside the calls, so local commands never load it; librdkafka's
own log lines go to the ``compactlog.wire`` logger at debug level (``compactlog -vv`` shows them).
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping, Sequence

from ..api import PartitionInfo, TopicDescription
from ..errors import (
    CompactLogError,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidRecordError,
    InvalidTopicError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    UnknownTopicOrPartitionError,
    error_for,
    shown,
)
from ..producer import DEFAULT_BATCH_BYTES
from ..records.batch import Record
from ..storage.log_config import DescribeRow

log = logging.getLogger("compactlog.wire")

TIMEOUT_S = 30.0  # the longest one call to the broker may take before the command gives up
CONNECT_TIMEOUT_S = 10.0  # the first answer: a broker that is not there is reported this soon
POLL_S = 0.2  # a consumer's poll; bounds how late --timeout-ms and the end of a log are noticed

MAX_REQUEST_SIZE = 1048576  # Kafka's producer's max.request.size default: the largest record it sends
BATCH_OVERHEAD = 61  # a record batch's header, which a record sent alone carries

TopicPartitionKey = tuple[str, int]
_AUTHENTICATION = -169  # librdkafka's RD_KAFKA_RESP_ERR__AUTHENTICATION: the broker refused the SASL login


class _DebugLogger:
    """librdkafka logs connection troubles at error level while it retries; the command reports what
    finally failed, so its lines are debug detail here."""

    def log(self, level: int, fmt: str, *args: Any) -> None:
        log.debug(fmt, *args)


def client_config(bootstrap: str, **extra: Any) -> dict[str, Any]:
    """librdkafka's settings for a client of ``bootstrap``: the command's own, then ``--command-config``'s
    (``client_properties.py``: the Java client's names mapped to librdkafka's)."""
    from .client_properties import current

    return {"bootstrap.servers": bootstrap, "logger": _DebugLogger(), "client.id": "compactlog-cli",
            "error_cb": _note_error, **extra, **current().librdkafka}


_refused_logins: list[Any] = []  # librdkafka reports a refused SASL login only to error_cb; kept for the report


def _note_error(err: Any) -> None:
    if err.code() == _AUTHENTICATION:
        _refused_logins.append(err)


def as_error(err: Any, doing: str = "") -> CompactLogError:
    """Our typed error for a librdkafka ``KafkaError`` (or the ``KafkaException`` holding one): the
    class of its Kafka code when we have one, with the broker's message."""
    if hasattr(err, "args") and err.args and hasattr(err.args[0], "code"):
        err = err.args[0]
    if not hasattr(err, "code"):
        return CompactLogError(f"{doing}{err}")
    message = err.str()  # "(null)": the broker sent no message (librdkafka prints the null string)
    return error_for(err.code(), None if message in ("", "(null)") else message, doing)


def result(future, doing: str = "", timeout: float = TIMEOUT_S) -> Any:
    """A librdkafka future's result, its failure as our typed error; no answer within ``timeout`` seconds
    is one too."""
    from concurrent.futures import TimeoutError as FutureTimeout

    from confluent_kafka import KafkaException

    try:
        return future.result(timeout)
    except KafkaException as exc:
        raise as_error(exc, doing) from None
    except FutureTimeout:
        raise CompactLogError(f"{doing}no answer from the broker within {timeout:g} s") from None


@dataclass(frozen=True)
class WireConfig:
    """A topic's config as the broker describes it: what ``LogConfig`` gives the local commands."""

    overrides: Mapping[str, str]
    rows: tuple[DescribeRow, ...]

    def describe(self) -> list[DescribeRow]:
        return list(self.rows)


def addresses(bootstrap: str) -> list[tuple[str, str, int]]:
    """The entries of a ``--bootstrap-server`` list as (entry, host, port), an IPv6 host without its
    brackets; an entry without an ASCII port of at most five digits is left out."""
    out = []
    for entry in (e.strip() for e in bootstrap.split(",")):
        host, _, port = entry.rpartition(":")
        if port.isascii() and port.isdigit() and len(port) <= 5:
            out.append((entry, host.strip("[]"), int(port)))
    return out


def _takes_connections(bootstrap: str) -> bool:
    """Whether any address of ``bootstrap`` accepts a TCP connection: told apart from a broker that is not
    there, a listener that wants SASL or TLS closes the connection librdkafka opened, which it reports
    as the same transport failure."""
    import socket

    for _entry, host, port in addresses(bootstrap):
        try:
            with socket.create_connection((host, port), timeout=2.0):
                return True
        except (OSError, UnicodeError, ValueError):
            continue
    return False


class WireClient:
    """A broker behind ``bootstrap`` with the part of CompactLog's API the commands use."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka.admin import AdminClient

        self.bootstrap = bootstrap
        _refused_logins.clear()
        self.admin = AdminClient(client_config(bootstrap))
        self.node_id = self._metadata(timeout=CONNECT_TIMEOUT_S).controller_id

    def __enter__(self) -> "WireClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.admin = None  # librdkafka closes its admin handle when the last reference goes

    def _metadata(self, timeout: float = TIMEOUT_S):
        """Every topic's metadata (asking for one topic by name could create it: librdkafka's admin
        handle allows auto-creation)."""
        from confluent_kafka import KafkaException

        try:
            return self.admin.list_topics(timeout=timeout)
        except KafkaException as exc:
            from .client_properties import current

            self.admin.poll(0)  # serves error_cb
            if _refused_logins:
                raise as_error(_refused_logins.pop(), f"the broker at {self.bootstrap} refused the login: ") from None
            protocol = current().protocol
            if _takes_connections(self.bootstrap):  # something listens, but not a listener of this protocol
                raise as_error(exc, f"the listener at {self.bootstrap} took the connection but answered no {protocol} "
                                    "request (a listener of another security protocol? give its client settings "
                                    "with --command-config FILE): ") from None
            raise as_error(exc, f"no broker answered at {self.bootstrap}: ") from None

    def brokers(self) -> list:
        """The cluster's brokers (id, host, port), as Metadata lists them."""
        return sorted(self._metadata().brokers.values(), key=lambda b: b.id)

    def partitions_for(self, topic: str) -> int:
        meta = self._metadata().topics.get(topic)
        if meta is None or meta.error is not None and meta.error.code() == 3:
            raise UnknownTopicOrPartitionError(f"Topic {shown(topic)} does not exist.")
        if meta.error is not None:
            raise as_error(meta.error)
        return len(meta.partitions)

    def topic_partitions(self, topic: str, only: Iterable[int] | None = None) -> list[TopicPartitionKey]:
        """``topic``'s partitions (all, or ``only`` those), each checked to exist."""
        count = self.partitions_for(topic)
        parts = list(range(count)) if only is None else list(only)
        missing = [p for p in parts if not 0 <= p < count]
        if missing:
            raise UnknownTopicOrPartitionError(
                f"Partition {missing[0]} of topic {shown(topic)} does not exist (the topic has {count}).")
        return [(topic, p) for p in parts]

    # topics -------------------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int | None = None, config: Mapping[str, str] | None = None) -> None:
        from confluent_kafka.admin import NewTopic

        try:  # librdkafka refuses counts beyond its own range with a ValueError, before asking
            new = NewTopic(name, -1 if partitions is None else partitions, -1, config=dict(config or {}))
            future = self.admin.create_topics([new], request_timeout=TIMEOUT_S)[name]
        except ValueError as exc:
            raise InvalidPartitionsError(str(exc)) from None
        result(future)

    def delete_topic(self, name: str) -> None:
        result(self.admin.delete_topics([name], request_timeout=TIMEOUT_S)[name])

    def list_topics(self) -> list[str]:
        return sorted(self._metadata().topics)

    def create_partitions(self, name: str, count: int) -> None:
        from confluent_kafka.admin import NewPartitions

        try:
            future = self.admin.create_partitions([NewPartitions(name, count)], request_timeout=TIMEOUT_S)[name]
        except ValueError as exc:
            raise InvalidPartitionsError(str(exc)) from None
        result(future)

    def describe_topic(self, name: str) -> TopicDescription:
        """Partitions from Metadata, offsets from ListOffsets, the config from DescribeConfigs. Sizes and
        segment counts are not on the wire (None); the topic id is "" from a broker without one."""
        count = self.partitions_for(name)
        earliest = self.list_offsets(name, range(count), "earliest")
        latest = self.list_offsets(name, range(count), "latest")
        parts = [PartitionInfo(p, earliest[p], latest[p], None, None) for p in range(count)]
        return TopicDescription(name, self.topic_id(name), parts, self.topic_config(name))

    def topic_id(self, name: str) -> str:
        """The topic's id (Metadata v10+) as Kafka writes it, URL-safe base64 without padding; "" when the
        broker sends none. (librdkafka prints the same 128 bits in standard base64.)"""
        import base64

        from confluent_kafka import TopicCollection

        d = result(self.admin.describe_topics(TopicCollection([name]), request_timeout=TIMEOUT_S)[name])
        mask = 2**64 - 1  # the halves come as Java's signed longs
        bits = (d.topic_id.get_most_significant_bits() & mask) << 64 | d.topic_id.get_least_significant_bits() & mask
        return base64.urlsafe_b64encode(bits.to_bytes(16, "big")).rstrip(b"=").decode() if bits else ""

    def topic_config(self, name: str) -> WireConfig:
        from confluent_kafka.admin import ConfigResource, ResourceType

        res = ConfigResource(ResourceType.TOPIC, name)
        entries = result(self.admin.describe_configs([res], request_timeout=TIMEOUT_S)[res])
        rows = tuple(DescribeRow(e.name, e.value, _source_name(e.source), e.is_read_only, "")
                     for e in sorted(entries.values(), key=lambda e: e.name))
        return WireConfig({r.name: r.value for r in rows if r.source == "DYNAMIC_TOPIC_CONFIG"}, rows)

    def alter_topic_config(self, name: str, set: Mapping[str, str] | None = None,  # noqa: A002 - kafka-configs' words
                           delete: Sequence[str] | None = None) -> None:
        """IncrementalAlterConfigs: SET and DELETE. Deleting a config the topic does not override is
        refused before anything is sent, as kafka-configs refuses it (and as the local command does)."""
        from confluent_kafka.admin import (
            AlterConfigOpType,
            ConfigEntry,
            ConfigResource,
            ResourceType,
        )

        delete = list(delete or [])
        if delete:
            missing = [n for n in delete if n not in self.topic_config(name).overrides]
            if missing:
                raise InvalidConfigError(f"Invalid config(s): {','.join(missing)}")
        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in (set or {}).items()]
        entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in delete]
        res = ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries)
        result(self.admin.incremental_alter_configs([res], request_timeout=TIMEOUT_S)[res])

    def list_offsets(self, topic: str, partitions: Iterable[int], spec: str | int) -> dict[int, int]:
        """Per partition: the earliest or latest offset, or (an int) the first offset at or after that
        timestamp, -1 when no record is that recent (ListOffsets)."""
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec

        how = (OffsetSpec.earliest() if spec == "earliest" else OffsetSpec.latest() if spec == "latest"
               else OffsetSpec.for_timestamp(spec))
        asked = {TopicPartition(topic, p): how for p in partitions}
        if not asked:
            return {}
        futures = self.admin.list_offsets(asked, request_timeout=TIMEOUT_S)
        return {tp.partition: result(f).offset for tp, f in futures.items()}

    # produce and consume --------------------------------------------------------------------------
    def produce_batch(self, topic: str, records: Iterable[tuple], *, compression: str = "none",
                      level: int | None = None, batch_bytes: int = DEFAULT_BATCH_BYTES, partition: int | None = None,
                      settings: Mapping[str, Any] | None = None, sync: bool = False,
                      max_block_ms: int | None = None) -> int:
        """Send (key, value[, headers]) records with acks=all and wait for every acknowledgement; the
        first refusal is raised. Keys pick partitions with murmur2, as Java's producer and the local
        command do. Returns the records sent.

        ``settings``: librdkafka producer settings over these defaults (the console producer's flags);
        ``sync``: wait for each record's acknowledgement before sending the next; ``max_block_ms``: how
        long one send may wait for room in the producer's queue (Kafka's max.block.ms)."""
        from confluent_kafka import KafkaException, Producer

        conf = client_config(self.bootstrap, **{
            "acks": "all", "compression.type": compression, "partitioner": "murmur2_random",
            "batch.size": max(batch_bytes, 1), "message.timeout.ms": int(TIMEOUT_S * 1000),
            "message.max.bytes": MAX_REQUEST_SIZE, **(settings or {})})
        if batch_bytes == 0:
            conf["batch.num.messages"] = 1  # Kafka's batch.size=0: one record per batch
        if level is not None:
            conf["compression.level"] = level
        try:
            producer = Producer(conf)
        except KafkaException as exc:
            raise as_error(exc, "producer settings refused: ") from None
        failures: list = []

        def delivered(err, msg) -> None:
            if err is not None and not failures:
                failures.append((err, msg))

        sent = 0
        for row in records:
            key, value = row[0], row[1]
            headers = list(row[2]) if len(row) > 2 and row[2] else None
            extra = {} if partition is None else {"partition": partition}
            blocked_since = None
            while not failures:
                try:
                    producer.produce(topic, value=value, key=key, headers=headers, on_delivery=delivered, **extra)
                    break
                except BufferError:  # the local queue is full: let deliveries drain it
                    blocked_since = blocked_since or time.monotonic()
                    if max_block_ms is not None and (time.monotonic() - blocked_since) * 1000 >= max_block_ms:
                        raise CompactLogError("Failed to allocate memory within the configured max blocking time "
                                              f"{max_block_ms} ms.") from None
                    producer.poll(POLL_S if max_block_ms is None else min(POLL_S, max_block_ms / 1000))
                except KafkaException as exc:
                    raise self._refused_at_send(exc, key, value, headers) from None
            if failures:
                break
            sent += 1
            if sync:  # the console producer's --sync: this record acknowledged before the next is sent
                producer.flush(TIMEOUT_S)
            producer.poll(0)
        left = producer.flush(TIMEOUT_S)
        if failures:
            raise self._delivery_error(topic, *failures[0])
        if left:
            raise CompactLogError(f"{left} records were not acknowledged by {self.bootstrap} within {TIMEOUT_S:.0f} s")
        return sent

    @staticmethod
    def _refused_at_send(exc, key, value, headers) -> CompactLogError:
        """A record the producer refuses before sending; one too large in the words of Kafka's producer
        (its ensureValidRecordSize), with the size a batch of it alone would have."""
        err = exc.args[0] if exc.args and hasattr(exc.args[0], "code") else None
        from confluent_kafka import KafkaError

        if err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE:
            from ..producer import one_record_size

            size = BATCH_OVERHEAD + one_record_size(key, value, headers)
            return RecordTooLargeError(f"RecordTooLargeException: The message is {size} bytes when serialized which "
                                       f"is larger than {MAX_REQUEST_SIZE}, which is the value of the "
                                       "max.request.size configuration.")
        return as_error(exc)

    def _delivery_error(self, topic: str, err, msg) -> CompactLogError:
        """A refused delivery as our typed error. librdkafka reports the broker's error code without the
        broker's message; a keyless record refused by a compacted topic gets the broker's words back."""
        if err.code() == RecordTooLargeError.code:  # the broker's MESSAGE_TOO_LARGE: the topic's own limit
            limit = next((r.value for r in self.topic_config(topic).rows if r.name == "max.message.bytes"), "?")
            where = f"{topic}-{msg.partition()}" if msg is not None else topic
            return RecordTooLargeError("RecordTooLargeException: The request included a message larger than the max "
                                       f"message size the server will accept ({where} takes batches of at most "
                                       f"{limit} bytes: max.message.bytes).")
        if err.code() == InvalidTopicError.code:  # librdkafka's 'Broker: Invalid topic' names neither topic nor rule
            from ..topics import check_topic_name, is_internal

            check_topic_name(topic)  # Kafka's words for the rule the name breaks
            if is_internal(topic):  # the broker's own words (Produce v8+'s message, which librdkafka drops)
                return InvalidTopicError(f"Cannot append to internal topic {topic}")
        if err.code() == InvalidRecordError.code and msg is not None and msg.key() is None:
            policy = next((r.value for r in self.topic_config(topic).rows if r.name == "cleanup.policy"), "")
            if "compact" in (policy or ""):
                return InvalidRecordError("Compacted topic cannot accept message without key in topic partition "
                                          f"{topic}-{msg.partition()}.")
        return as_error(err)

    def consume(self, topic: str, partition: int | None = None, *, from_beginning: bool = False,
                offset: int | None = None, max_records: int | None = None, group: str | None = None,
                timeout_ms: int | None = None, check_crcs: bool = True,
                isolation_level: str = "read_uncommitted") -> Iterator[Record]:
        """Records of ``topic``, as ``CompactLog.consume`` yields them, at Kafka's ``isolation_level``
        (read_committed: committed transactions only, each partition ending at its last stable offset).

        Without ``group`` the partitions are read directly (no group, nothing committed), from
        ``offset`` (one partition), the beginning, or the end. With ``group`` the consumer joins it,
        starts at the group's committed offsets (else the beginning or the end), and commits what it
        read when it stops. It stops at the end of every partition it reads, or, with ``timeout_ms``,
        once no record came for that long (-1: never), or after ``max_records``.
        """
        from confluent_kafka import (
            OFFSET_BEGINNING,
            OFFSET_END,
            Consumer,
            KafkaError,
            TopicPartition,
        )

        parts = [p for _, p in self.topic_partitions(topic, None if partition is None else [partition])]
        if offset is not None:  # refused as the local command refuses it, before a consumer starts
            low, high = self.list_offsets(topic, [partition], "earliest")[partition], \
                self.list_offsets(topic, [partition], "latest")[partition]
            if not low <= offset <= high:
                raise OffsetOutOfRangeError(f"offset {offset} is out of range for {topic}-{partition} ({low}..{high})")
        reset = "error" if offset is not None else "earliest" if from_beginning else "latest"
        consumer = Consumer(client_config(self.bootstrap, **{
            "group.id": group or f"compactlog-console-{uuid.uuid4().hex[:12]}", "enable.auto.commit": bool(group),
            "enable.partition.eof": True, "auto.offset.reset": reset, "check.crcs": check_crcs,
            "isolation.level": isolation_level}))  # librdkafka's default is read_committed; Kafka's tool's is not
        reading: set[int] = set()
        try:
            if group is not None:
                consumer.subscribe([topic], on_assign=lambda c, tps: reading.update(tp.partition for tp in tps),
                                   on_revoke=lambda c, tps: reading.difference_update(tp.partition for tp in tps))
            else:
                start = offset if offset is not None else OFFSET_BEGINNING if from_beginning else OFFSET_END
                reading.update(parts)
                consumer.assign([TopicPartition(topic, p, start) for p in sorted(reading)])
            yield from _records(consumer, topic, reading, max_records, timeout_ms, KafkaError._PARTITION_EOF,
                                group)
        finally:
            consumer.close()  # with a group: commits what was read, then leaves it


def _records(consumer, topic: str, reading: set[int], max_records: int | None, timeout_ms: int | None,
             eof_code: int, group: str | None) -> Iterator[Record]:
    at_end: set[int] = set()
    left = max_records
    began = idle_since = time.monotonic()
    while left is None or left > 0:
        if timeout_ms is None and reading and reading <= at_end:
            return
        m = consumer.poll(POLL_S)
        now = time.monotonic()
        if m is None:
            if timeout_ms is not None and timeout_ms >= 0 and (now - idle_since) * 1000 >= timeout_ms:
                return
            if timeout_ms is None and not reading and now - began > TIMEOUT_S:
                raise CompactLogError(f"group {group} got no partitions of {topic} within {TIMEOUT_S:.0f} s")
            continue
        if m.error() is not None:
            if m.error().code() == eof_code:
                at_end.add(m.partition())
                continue
            raise as_error(m.error())
        at_end.discard(m.partition())
        idle_since = now
        kind, ts = m.timestamp()
        yield Record(topic, m.partition(), m.offset(), ts, 1 if kind == 2 else 0, m.key(), m.value(),
                     tuple(m.headers() or ()))
        if left is not None:
            left -= 1


def _source_name(source: Any) -> str:
    """librdkafka's config source by the name our rows use (Kafka's names, the same on both sides)."""
    from confluent_kafka.admin import ConfigSource

    try:
        return ConfigSource(int(getattr(source, "value", source))).name
    except ValueError:
        return "UNKNOWN_CONFIG"
