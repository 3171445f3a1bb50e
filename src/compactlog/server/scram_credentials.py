"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51): the users' SCRAM credentials over
the wire (KIP-554), what ``kafka-configs --bootstrap-server ... --entity-type users`` and the admin
clients' ``describe_user_scram_credentials`` / ``alter_user_scram_credentials`` call.

They read and write the same store as ``compactlog configs --entity-type users`` and the SASL logins
(``compactlog.security.credentials``), so a user added over the wire logs in at once. Kafka's answers,
as its KRaft controller and metadata image give them:

* Describe needs DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED at the top, without a
  message, as Kafka answers it). No users (null or empty) means every user; a user named twice gets
  DUPLICATE_RESOURCE, a user without credentials RESOURCE_NOT_FOUND. Iterations and mechanisms only: salts and keys never leave the broker.
* Alter needs ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED for each user). A user may appear
  once per request (a second deletion or upsertion of the same user fails that user with
  DUPLICATE_RESOURCE, as in Kafka, even for another mechanism); an empty name or iterations outside
  4096-16384 is UNACCEPTABLE_CREDENTIAL; a mechanism other than 1 (SCRAM-SHA-256) or 2 (SCRAM-SHA-512) is
  UNSUPPORTED_SASL_MECHANISM; deleting a credential that does not exist is RESOURCE_NOT_FOUND. The
  accepted changes are written together. The client sends the salt and the salted password, never the
  password; the broker keeps the stored and server keys derived from them.
"""

from __future__ import annotations

from collections import Counter

from ..errors import shown
from ..security.credentials import CredentialStore
from ..security.scram import MAX_ITERATIONS, MIN_ITERATIONS, credential_from_salted
from .broker import NO_THROTTLE, Broker, Session, error_code
from .entities import make, response, schema
from .protocol import Request

DESCRIBE_USER_SCRAM_CREDENTIALS, ALTER_USER_SCRAM_CREDENTIALS = 50, 51
CLUSTER_AUTHORIZATION_FAILED, UNSUPPORTED_SASL_MECHANISM = 31, 33
RESOURCE_NOT_FOUND, DUPLICATE_RESOURCE, UNACCEPTABLE_CREDENTIAL = 91, 92, 93
MECHANISM_TYPES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}  # Kafka's ScramMechanism type bytes
TYPE_OF = {name: t for t, name in MECHANISM_TYPES.items()}
NOT_AUTHORIZED = None  # Kafka sends no message with its generic CLUSTER_AUTHORIZATION_FAILED

Problem = tuple[int, str]


def _store(broker: Broker) -> CredentialStore:
    return broker.extras["credentials"]


async def describe_user_scram_credentials(broker: Broker, req: Request, session: Session):
    s = schema(req)
    asked = None if req.body.users is None else [u.name for u in req.body.users]
    if not broker.authorize(session, "DESCRIBE", "CLUSTER"):
        return response(req, throttle_time=NO_THROTTLE, error_code=error_code(CLUSTER_AUTHORIZATION_FAILED),
                        error_message=NOT_AUTHORIZED, results=tuple(
                            make(s.DescribeUserScramCredentialsResult, user="", credential_infos=(),
                                 error_code=error_code(CLUSTER_AUTHORIZATION_FAILED), error_message=NOT_AUTHORIZED)
                            for _ in asked or ()))
    known = await broker.blocking(_store(broker).describe)
    names = sorted(known) if not asked else list(dict.fromkeys(asked))
    times = Counter(asked or ())
    results = []
    for name in names:
        infos, code, message = (), 0, None
        if times[name] > 1:
            code, message = DUPLICATE_RESOURCE, ("Cannot describe SCRAM credentials for the same user twice in a "
                                                 f"single request: {shown(name, '')}")
        elif not known.get(name):
            code, message = RESOURCE_NOT_FOUND, f"Attempt to describe a user credential that does not exist: {shown(name, '')}"
        else:
            infos = tuple(make(s.CredentialInfo, mechanism=TYPE_OF[m], iterations=i)
                          for m, i in known[name].items() if m in TYPE_OF)
        results.append(make(s.DescribeUserScramCredentialsResult, user=name, error_code=error_code(code),
                            error_message=message, credential_infos=infos))
    return response(req, throttle_time=NO_THROTTLE, error_code=error_code(0), error_message=None,
                    results=tuple(results))


def _check(name: str, mechanism_type: int) -> Problem | None:
    if not name:
        return UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism_type not in MECHANISM_TYPES:
        return UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None


def _check_iterations(iterations: int) -> Problem | None:
    if iterations < MIN_ITERATIONS:
        return UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if iterations > MAX_ITERATIONS:
        return UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    return None


def _alter(store: CredentialStore, deletions, upsertions) -> list[tuple[str, int, str | None]]:
    """Kafka's rules for one AlterUserScramCredentials request: (user, error code, message) per user."""
    failed: dict[str, Problem] = {}
    to_delete: dict[str, tuple[str, str]] = {}
    to_upsert: dict[str, tuple[str, str, object]] = {}
    twice = (DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
    for d in deletions:
        if d.name in failed:
            continue
        if to_delete.pop(d.name, None) is not None:
            failed[d.name] = twice
            continue
        problem = _check(d.name, d.mechanism)
        if problem is None and not store.has(d.name, MECHANISM_TYPES[d.mechanism]):
            problem = RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
        if problem is None:
            to_delete[d.name] = (d.name, MECHANISM_TYPES[d.mechanism])
        else:
            failed[d.name] = problem
    for u in upsertions:
        if u.name in failed:
            continue
        if to_delete.pop(u.name, None) is not None or to_upsert.pop(u.name, None) is not None:
            failed[u.name] = twice
            continue
        problem = _check(u.name, u.mechanism) or _check_iterations(u.iterations)
        if problem is None:
            mechanism = MECHANISM_TYPES[u.mechanism]
            to_upsert[u.name] = (u.name, mechanism,
                                 credential_from_salted(mechanism, u.salt, u.salted_password, u.iterations))
        else:
            failed[u.name] = problem
    if to_delete or to_upsert:
        store.replace(list(to_delete.values()), list(to_upsert.values()))
    return ([(name, 0, None) for name in [*to_delete, *to_upsert]]
            + [(name, code, message) for name, (code, message) in failed.items()])


async def alter_user_scram_credentials(broker: Broker, req: Request, session: Session):
    s = schema(req)
    if not broker.authorize(session, "ALTER", "CLUSTER"):
        users = sorted({c.name for c in (*req.body.deletions, *req.body.upsertions)})
        outcome = [(name, CLUSTER_AUTHORIZATION_FAILED, NOT_AUTHORIZED) for name in users]
    else:
        outcome = await broker.blocking(_alter, _store(broker), req.body.deletions, req.body.upsertions)
    return response(req, throttle_time=NO_THROTTLE, results=tuple(
        make(s.AlterUserScramCredentialsResult, user=name, error_code=error_code(code), error_message=message)
        for name, code, message in outcome))


HANDLERS = {DESCRIBE_USER_SCRAM_CREDENTIALS: describe_user_scram_credentials,
            ALTER_USER_SCRAM_CREDENTIALS: alter_user_scram_credentials}
