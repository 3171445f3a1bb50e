"""Typed errors, one class per Kafka error code we raise.

Every layer raises these so that the CLI can print ``Error: <message>`` and a broker can answer with
the matching Kafka error code without a translation table. Messages name what was wrong and, where it
helps, what would be right.
"""

from __future__ import annotations


class CompactLogError(Exception):
    """Base of every error compactlog raises on purpose."""

    code: int = -1
    name: str = "UNKNOWN_SERVER_ERROR"


class OffsetOutOfRangeError(CompactLogError):
    """The requested offset is outside [log start offset, log end offset]."""

    code, name = 1, "OFFSET_OUT_OF_RANGE"


class CorruptRecordError(CompactLogError):
    """A batch failed its CRC, size or structure check."""

    code, name = 2, "CORRUPT_MESSAGE"


class UnknownTopicOrPartitionError(CompactLogError):
    """The topic or partition does not exist."""

    code, name = 3, "UNKNOWN_TOPIC_OR_PARTITION"


class RecordTooLargeError(CompactLogError):
    """A batch is larger than ``max.message.bytes``."""

    code, name = 10, "MESSAGE_TOO_LARGE"


class InvalidTopicError(CompactLogError):
    """The topic name breaks Kafka's naming rules."""

    code, name = 17, "INVALID_TOPIC_EXCEPTION"


class RecordBatchTooLargeError(CompactLogError):
    """A single append is larger than ``segment.bytes``."""

    code, name = 18, "RECORD_LIST_TOO_LARGE"


class InvalidTimestampError(CompactLogError):
    """A record timestamp is outside the allowed window or the timestamp type is wrong."""

    code, name = 32, "INVALID_TIMESTAMP"


class TopicAlreadyExistsError(CompactLogError):
    """A topic with that name already exists."""

    code, name = 36, "TOPIC_ALREADY_EXISTS"


class InvalidPartitionsError(CompactLogError):
    """The partition count is not a positive number."""

    code, name = 37, "INVALID_PARTITIONS"


class InvalidReplicationFactorError(CompactLogError):
    """The replication factor cannot be had: a single node holds one replica of each partition."""

    code, name = 38, "INVALID_REPLICATION_FACTOR"


class InvalidReplicaAssignmentError(CompactLogError):
    """A manual partition assignment names brokers that do not exist or leaves partitions out."""

    code, name = 39, "INVALID_REPLICA_ASSIGNMENT"


class InvalidConfigError(CompactLogError):
    """A config name is unknown or its value is invalid."""

    code, name = 40, "INVALID_CONFIG"


class InvalidRequestError(CompactLogError):
    """The request is malformed or contradicts itself."""

    code, name = 42, "INVALID_REQUEST"


class OutOfOrderSequenceError(CompactLogError):
    """An idempotent producer's batch does not follow its last one: something before it is missing."""

    code, name = 45, "OUT_OF_ORDER_SEQUENCE_NUMBER"


class InvalidProducerEpochError(CompactLogError):
    """An idempotent producer's batch carries an epoch older than its current one (it was fenced)."""

    code, name = 47, "INVALID_PRODUCER_EPOCH"


class UnsupportedCompressionTypeError(CompactLogError):
    """The compression type is not one Kafka defines."""

    code, name = 76, "UNSUPPORTED_COMPRESSION_TYPE"


class InvalidRecordError(CompactLogError):
    """A record failed validation (for example a null key on a compacted topic)."""

    code, name = 87, "INVALID_RECORD"


class KafkaStorageError(CompactLogError):
    """The data directory cannot be read or written as needed (Kafka marks such a dir offline)."""

    code, name = 56, "KAFKA_STORAGE_ERROR"


class SaslAuthenticationFailedError(CompactLogError):
    """A SASL login failed: wrong password, unknown user or a malformed exchange (one message for all)."""

    code, name = 58, "SASL_AUTHENTICATION_FAILED"
