"""Typed errors, one class per Kafka error code we raise.

Every layer raises these so that the CLI can print ``Error: <message>`` and a broker can answer with
the matching Kafka error code without a translation table. Messages name what was wrong and, where it
helps, what would be right; a value the user typed is repeated through :func:`shown`, the one place
that decides how much of it a message carries.
"""

from __future__ import annotations

# A value a user typed (a name, a number, a config value, an address) is repeated by the message that
# refuses it: whole up to SHOWN_CHARS characters, else by its first SHOWN_HEAD and its length, so that a
# 5,000-character value makes a short line in the CLI, a page of the console, a broker's error_message
# and a log (Kafka repeats any value whole).
SHOWN_CHARS = 200
SHOWN_HEAD = 50


def shown(value: object, quote: str = "'") -> str:
    """``value`` as an error message repeats it: between ``quote`` marks, whole when at most
    ``SHOWN_CHARS`` characters, else its first ``SHOWN_HEAD`` and its length. Characters that do not
    print (a newline, an escape sequence) are written as Python escapes, so the message stays one line
    and a terminal shows what was typed instead of obeying it."""
    text = value if isinstance(value, str) else str(value)
    cut = len(text) > SHOWN_CHARS
    head = text[:SHOWN_HEAD] if cut else text
    if not head.isprintable():
        head = "".join(c if c.isprintable() else repr(c)[1:-1] for c in head)
    return f"{quote}{head}{quote}... ({len(text)} characters)" if cut else f"{quote}{head}{quote}"


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


class RecordErrors:
    """What an error about some records of a batch says of each: Kafka's Produce answer lists them
    (``record_errors``: the record's index in its batch and why it was refused), so a producer can tell
    which of its records were at fault. Empty when the error is about the batch as a whole."""

    record_errors: tuple[tuple[int, str], ...] = ()
    records_refused: int = 0  # how many records were refused; record_errors may list only the first ones

    def with_records(self, record_errors: "list[tuple[int, str]] | tuple[tuple[int, str], ...]",
                     refused: int | None = None):
        """This error, naming the refused records as (index in the batch, message) pairs; ``refused``
        counts them all when only the first ones are listed."""
        self.record_errors = tuple(record_errors)
        self.records_refused = len(self.record_errors) if refused is None else refused
        return self


class InvalidTimestampError(RecordErrors, CompactLogError):
    """A record timestamp is outside the allowed window or the timestamp type is wrong."""

    code, name = 32, "INVALID_TIMESTAMP"


class NotEnoughReplicasError(CompactLogError):
    """An acks=all write to a topic whose ``min.insync.replicas`` asks for more copies than the in-sync
    replicas hold: on one node, any value above 1. Nothing is written."""

    code, name = 19, "NOT_ENOUGH_REPLICAS"


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


class InvalidTxnStateError(CompactLogError):
    """The transactional request does not fit the transaction's state (e.g. committing an aborted one)."""

    code, name = 48, "INVALID_TXN_STATE"


class InvalidProducerIdMappingError(CompactLogError):
    """The producer id is not the one the coordinator holds for this transactional id."""

    code, name = 49, "INVALID_PRODUCER_ID_MAPPING"


class InvalidTransactionTimeoutError(CompactLogError):
    """The transaction timeout is not positive or exceeds ``transaction.max.timeout.ms``."""

    code, name = 50, "INVALID_TRANSACTION_TIMEOUT"


class ConcurrentTransactionsError(CompactLogError):
    """The transaction is still completing (or its state is being written); retry shortly."""

    code, name = 51, "CONCURRENT_TRANSACTIONS"


class TransactionCoordinatorFencedError(CompactLogError):
    """A transaction marker carries a coordinator epoch older than the last one this partition saw for
    its producer: it comes from a coordinator that has since been replaced (a zombie)."""

    code, name = 52, "TRANSACTION_COORDINATOR_FENCED"


class ProducerFencedError(CompactLogError):
    """A newer producer with the same transactional id has started; this one is fenced."""

    code, name = 90, "PRODUCER_FENCED"


class PolicyViolationError(CompactLogError):
    """The request breaks a limit the broker sets: more partitions than ``max.broker.partitions`` (Kafka
    answers this code to a request for more partitions than its controller writes at once)."""

    code, name = 44, "POLICY_VIOLATION"


class UnsupportedCompressionTypeError(CompactLogError):
    """The compression type is not one Kafka defines."""

    code, name = 76, "UNSUPPORTED_COMPRESSION_TYPE"


class InvalidRecordError(RecordErrors, CompactLogError):
    """A record failed validation (for example a null key on a compacted topic)."""

    code, name = 87, "INVALID_RECORD"


class KafkaStorageError(CompactLogError):
    """The data directory cannot be read or written as needed (Kafka marks such a dir offline)."""

    code, name = 56, "KAFKA_STORAGE_ERROR"


class OffsetMetadataTooLargeError(CompactLogError):
    """A committed offset's metadata string is longer than ``offset.metadata.max.bytes``."""

    code, name = 12, "OFFSET_METADATA_TOO_LARGE"


class CoordinatorLoadInProgressError(CompactLogError):
    """The group coordinator is still replaying ``__consumer_offsets`` after a start; retry shortly."""

    code, name = 14, "COORDINATOR_LOAD_IN_PROGRESS"


class CoordinatorNotAvailableError(CompactLogError):
    """The group is being removed, or its state cannot be stored right now; find the coordinator again."""

    code, name = 15, "COORDINATOR_NOT_AVAILABLE"


class NotCoordinatorError(CompactLogError):
    """This broker stopped coordinating the group (it is shutting down); find the coordinator again."""

    code, name = 16, "NOT_COORDINATOR"


class IllegalGenerationError(CompactLogError):
    """The request names a generation of the group that is not the current one; rejoin the group."""

    code, name = 22, "ILLEGAL_GENERATION"


class InconsistentGroupProtocolError(CompactLogError):
    """The member's protocol type or protocols share nothing with the group's members."""

    code, name = 23, "INCONSISTENT_GROUP_PROTOCOL"


class InvalidGroupIdError(CompactLogError):
    """The group id is empty."""

    code, name = 24, "INVALID_GROUP_ID"


class UnknownMemberIdError(CompactLogError):
    """The member id is not (or no longer) a member of the group; rejoin with an empty member id."""

    code, name = 25, "UNKNOWN_MEMBER_ID"


class InvalidSessionTimeoutError(CompactLogError):
    """The session timeout is outside [group.min.session.timeout.ms, group.max.session.timeout.ms]."""

    code, name = 26, "INVALID_SESSION_TIMEOUT"


class RebalanceInProgressError(CompactLogError):
    """The group is rebalancing; rejoin it."""

    code, name = 27, "REBALANCE_IN_PROGRESS"


class InvalidCommitOffsetSizeError(CompactLogError):
    """An offset commit is too large to be stored in ``__consumer_offsets``."""

    code, name = 28, "INVALID_COMMIT_OFFSET_SIZE"


class NonEmptyGroupError(CompactLogError):
    """The group still has members, so it (or its offsets) cannot be deleted."""

    code, name = 68, "NON_EMPTY_GROUP"


class GroupIdNotFoundError(CompactLogError):
    """No group with that id exists."""

    code, name = 69, "GROUP_ID_NOT_FOUND"


class MemberIdRequiredError(CompactLogError):
    """JoinGroup v4+: the member must rejoin with the member id given in this answer."""

    code, name = 79, "MEMBER_ID_REQUIRED"


class GroupMaxSizeReachedError(CompactLogError):
    """The group already has ``group.max.size`` members."""

    code, name = 81, "GROUP_MAX_SIZE_REACHED"


class FencedInstanceIdError(CompactLogError):
    """Another member joined with this static member's group.instance.id and replaced it."""

    code, name = 82, "FENCED_INSTANCE_ID"


class GroupSubscribedToTopicError(CompactLogError):
    """The group's members consume the topic, so its committed offsets cannot be deleted."""

    code, name = 86, "GROUP_SUBSCRIBED_TO_TOPIC"


class UnstableOffsetCommitError(CompactLogError):
    """The partition's offset is pending in an open transaction (or on its way to the log): a client
    asking for stable offsets (OffsetFetch ``require_stable``) retries until it is settled."""

    code, name = 88, "UNSTABLE_OFFSET_COMMIT"


class ClusterAuthorizationFailedError(CompactLogError):
    """Cluster authorization failed: the principal lacks the operation on the cluster the request needs."""

    code, name = 31, "CLUSTER_AUTHORIZATION_FAILED"


class SaslAuthenticationFailedError(CompactLogError):
    """A SASL login failed: wrong password, unknown user or a malformed exchange (one message for all)."""

    code, name = 58, "SASL_AUTHENTICATION_FAILED"


# The one code-to-error lookup: what a broker's answer code becomes on our side. Only the classes of this
# module, one per code (others subclass them for their own meaning, e.g. a corrupt index is a
# CORRUPT_MESSAGE, but an answer code must not turn into one of those by import order).
_BY_CODE: dict[int, type[CompactLogError]] = {
    cls.code: cls for cls in list(globals().values())
    if isinstance(cls, type) and issubclass(cls, CompactLogError) and cls is not CompactLogError
}


def error_class(code: int) -> type[CompactLogError] | None:
    """The class of Kafka error ``code``, or None when we declare none for it."""
    return _BY_CODE.get(code)


def error_for(code: int, message: str | None = None, doing: str = "") -> CompactLogError:
    """Our typed error for a Kafka error code a broker answered with, its message ``doing`` + ``message``
    (by default Kafka's meaning of the code, the class's docstring). A code we have no class for, and
    librdkafka's own negative codes, give a CompactLogError that still carries the code."""
    cls = _BY_CODE.get(code)
    if message is None:
        message = cls.__doc__.strip() if cls is not None and cls.__doc__ else f"error code {code}"
    exc = (cls or CompactLogError)(f"{doing}{message}")
    if cls is None:
        exc.code = code
    return exc
