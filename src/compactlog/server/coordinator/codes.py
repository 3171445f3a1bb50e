"""Kafka's error codes the coordinator answers with, taken from the typed errors (one home per code).

The coordinator's methods return codes rather than raise: a JoinGroup or SyncGroup answer travels
through a parked future, and OffsetCommit answers per partition, so a code is the natural value.
"""

from __future__ import annotations

from ...errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    GroupSubscribedToTopicError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidCommitOffsetSizeError,
    InvalidGroupIdError,
    InvalidSessionTimeoutError,
    KafkaStorageError,
    MemberIdRequiredError,
    NonEmptyGroupError,
    NotCoordinatorError,
    NotEnoughReplicasError,
    OffsetMetadataTooLargeError,
    RebalanceInProgressError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
    UnstableOffsetCommitError,
)

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = UnknownTopicOrPartitionError.code
MESSAGE_TOO_LARGE = RecordTooLargeError.code
OFFSET_METADATA_TOO_LARGE = OffsetMetadataTooLargeError.code
COORDINATOR_LOAD_IN_PROGRESS = CoordinatorLoadInProgressError.code
COORDINATOR_NOT_AVAILABLE = CoordinatorNotAvailableError.code
NOT_COORDINATOR = NotCoordinatorError.code
NOT_ENOUGH_REPLICAS = NotEnoughReplicasError.code
RECORD_LIST_TOO_LARGE = RecordBatchTooLargeError.code
ILLEGAL_GENERATION = IllegalGenerationError.code
INCONSISTENT_GROUP_PROTOCOL = InconsistentGroupProtocolError.code
INVALID_GROUP_ID = InvalidGroupIdError.code
UNKNOWN_MEMBER_ID = UnknownMemberIdError.code
INVALID_SESSION_TIMEOUT = InvalidSessionTimeoutError.code
REBALANCE_IN_PROGRESS = RebalanceInProgressError.code
INVALID_COMMIT_OFFSET_SIZE = InvalidCommitOffsetSizeError.code
KAFKA_STORAGE_ERROR = KafkaStorageError.code
NON_EMPTY_GROUP = NonEmptyGroupError.code
GROUP_ID_NOT_FOUND = GroupIdNotFoundError.code
MEMBER_ID_REQUIRED = MemberIdRequiredError.code
GROUP_MAX_SIZE_REACHED = GroupMaxSizeReachedError.code
FENCED_INSTANCE_ID = FencedInstanceIdError.code
GROUP_SUBSCRIBED_TO_TOPIC = GroupSubscribedToTopicError.code
UNSTABLE_OFFSET_COMMIT = UnstableOffsetCommitError.code
