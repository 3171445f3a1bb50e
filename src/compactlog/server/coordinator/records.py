"""The records of ``__consumer_offsets``, as the group coordinator names them: the codecs themselves are
``compactlog.group_records`` (at the API layer, so that ``dump-log --offsets-decoder`` reads them too)."""

from __future__ import annotations

from ...group_records import (  # noqa: F401  (re-exported)
    GROUP_METADATA_KEY_VERSION,
    GROUP_METADATA_VALUE_VERSION,
    OFFSET_COMMIT_KEY_VERSION,
    OFFSET_COMMIT_VALUE_VERSION,
    OFFSET_COMMIT_VALUE_WITH_EXPIRY,
    GroupMetadataKey,
    GroupMetadataValue,
    Key,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    consumer_subscription_topics,
    decode_group_metadata,
    decode_key,
    decode_offset_commit,
    encode_group_metadata,
    encode_key,
    encode_offset_commit,
    java_string_hash,
    partition_for,
)
