"""Users' SCRAM credentials through a running broker (``configs --bootstrap-server ... --entity-type
users``), as kafka-configs manages them: DescribeUserScramCredentials and AlterUserScramCredentials through
librdkafka's admin client. The password is salted here (librdkafka does it), so it never reaches the
broker; the broker keeps what ``configs --data-dir`` would have written.

Kafka's broker refuses a request that names one user twice, so kafka-configs fails to set SCRAM-SHA-256
and SCRAM-SHA-512 of one user at once; here each change goes in its own request, deletions first
(docs/differences.md).
"""

from __future__ import annotations

from ..errors import ClusterAuthorizationFailedError, CompactLogError, InvalidConfigError
from ..security.credentials import NewCredential
from ..security.scram import SCRAM_MECHANISMS
from .wire import CONNECT_TIMEOUT_S, WireClient, result

RESOURCE_NOT_FOUND = 91


def _admin(bootstrap: str):
    """librdkafka's admin client, once the broker answered (no answer: the one line every command gives)."""
    return WireClient(bootstrap).admin


def _mechanism(name: str):
    from confluent_kafka.admin import ScramMechanism

    if name not in SCRAM_MECHANISMS:
        raise InvalidConfigError(f"Invalid config {name} for users: only "
                                 f"{' and '.join(SCRAM_MECHANISMS)} credentials can be set")
    return ScramMechanism[name.replace("-", "_")]


def _may_describe(admin) -> None:
    """Refuse before asking when the broker would refuse: librdkafka (2.16) aborts the whole process on a
    DescribeUserScramCredentials answer with a top-level error, which is how Kafka refuses it."""
    from confluent_kafka.admin import AclOperation

    cluster = result(admin.describe_cluster(include_authorized_operations=True, request_timeout=CONNECT_TIMEOUT_S),
                     "Describing the cluster: ", timeout=CONNECT_TIMEOUT_S + 1)
    allowed = cluster.authorized_operations or ()  # asked for, so None is none: Kafka answers 0 (no rights)
    if not {AclOperation.DESCRIBE, AclOperation.ALTER, AclOperation.ALL} & set(allowed):
        raise ClusterAuthorizationFailedError("Not authorized to describe users' SCRAM credentials (DESCRIBE on "
                                              "the cluster)")


def describe(bootstrap: str, user: str | None) -> dict[str, dict[str, int]]:
    """user -> mechanism -> iterations, as ``CredentialStore.describe`` gives them."""
    admin = _admin(bootstrap)
    _may_describe(admin)
    if user is None:
        found = result(admin.describe_user_scram_credentials(), "Describing users: ")
    else:
        try:
            found = {user: result(admin.describe_user_scram_credentials([user])[user], f"Describing user {user}: ")}
        except CompactLogError as exc:
            if exc.code == RESOURCE_NOT_FOUND:  # the user has no credentials
                return {}
            raise
    return {name: {info.mechanism.name.replace("_", "-"): info.iterations for info in d.scram_credential_infos}
            for name, d in sorted(found.items())}


def alter(bootstrap: str, user: str, add: list[NewCredential], delete: list[str]) -> None:
    """Deletions, then the credentials to set, one request each."""
    from confluent_kafka.admin import ScramCredentialInfo, UserScramCredentialDeletion, UserScramCredentialUpsertion

    if not user:
        raise InvalidConfigError("The user name must not be empty")
    both = {c.mechanism for c in add} & set(delete)
    if both:
        raise InvalidConfigError(f"{sorted(both)[0]} is both added and deleted")
    changes = [UserScramCredentialDeletion(user, _mechanism(name)) for name in delete]
    for c in add:
        if not c.password:
            raise InvalidConfigError(f"The password of {c.mechanism} must not be empty")
        changes.append(UserScramCredentialUpsertion(user, ScramCredentialInfo(_mechanism(c.mechanism), c.iterations),
                                                    c.password.encode("utf-8")))
    admin = _admin(bootstrap)
    for change in changes:
        result(admin.alter_user_scram_credentials([change])[user], f"Altering user {user}: ")
