"""DescribeUserScramCredentials and AlterUserScramCredentials: the users' SCRAM credentials over the wire,
from confluent-kafka's and kafka-python's admin clients and as raw requests; the same store the CLI and
the logins use; Kafka's answers to each mistake, and its cluster authorization."""

from __future__ import annotations

import hashlib
import os

import pytest
from kio.schema.alter_user_scram_credentials.v0.request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from kio.schema.describe_user_scram_credentials.v0.request import DescribeUserScramCredentialsRequest, UserName
from kio.schema.sasl_authenticate.v1.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from security_clients import ServeProcess, add_users, cli, confluent_login_error
from wire import RawClient

pytest.importorskip("confluent_kafka")

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
SHA256, SHA512 = 1, 2


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    d = tmp_path_factory.mktemp("scram-api") / "data"
    d.mkdir()
    add_users(d, USERS)  # SCRAM-SHA-256, 4096 iterations
    cli("acls", "--data-dir", str(d), "--add", "--allow-principal", "User:alice", "--operation", "Describe",
        "--cluster")
    s = ServeProcess(d, {"listeners": "SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
                         "super.users": "User:admin"}).start()
    yield s
    s.kill()


def conf(server, user: str, password: str | None = None, mechanism: str = "SCRAM-SHA-256") -> dict:
    return {"bootstrap.servers": f"127.0.0.1:{server.ports['SASL_PLAINTEXT']}", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": mechanism,
            "sasl.username": user, "sasl.password": USERS.get(user) if password is None else password}


def raw(server, user: str) -> RawClient:
    """A raw connection logged in as ``user`` (PLAIN)."""
    c = RawClient("127.0.0.1", server.ports["SASL_PLAINTEXT"])
    assert c.call(SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
    assert c.call(SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{USERS[user]}".encode())).error_code == 0
    return c


def upsertion(name: str, password: str, mechanism: int = SHA256, iterations: int = 4096) -> ScramCredentialUpsertion:
    """What a client sends: its own salt, and the password salted (PBKDF2) with it."""
    salt = os.urandom(16)
    salted = hashlib.pbkdf2_hmac("sha256" if mechanism == SHA256 else "sha512", password.encode(), salt, iterations)
    return ScramCredentialUpsertion(name=name, mechanism=mechanism, iterations=iterations, salt=salt,
                                    salted_password=salted)


def alter(server, user: str, deletions=(), upsertions=()) -> dict[str, tuple[int, str | None]]:
    with raw(server, user) as c:
        resp = c.call(AlterUserScramCredentialsRequest(deletions=tuple(deletions), upsertions=tuple(upsertions)))
    return {r.user: (int(r.error_code), r.error_message) for r in resp.results}


def describe(server, user: str, names=None):
    with raw(server, user) as c:
        return c.call(DescribeUserScramCredentialsRequest(
            users=None if names is None else tuple(UserName(name=n) for n in names)))


# confluent-kafka -------------------------------------------------------------------------------------

def test_confluent_alters_and_describes_and_the_new_user_logs_in(server):
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient(conf(server, "admin"))
    done = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"carol-pw"),
        UserScramCredentialUpsertion("dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"dave-pw"),
    ])
    for f in done.values():
        f.result(timeout=10)
    described = {u: f.result(timeout=10) for u, f in admin.describe_user_scram_credentials(["carol", "alice"]).items()}
    shown = {u: [(i.mechanism, i.iterations) for i in d.scram_credential_infos] for u, d in described.items()}
    assert shown == {"carol": [(ScramMechanism.SCRAM_SHA_512, 8192)], "alice": [(ScramMechanism.SCRAM_SHA_256, 4096)]}
    every = admin.describe_user_scram_credentials().result(timeout=10)
    assert {"admin", "alice", "bob", "carol", "dave"} <= set(every)
    # the same store as the CLI and the logins
    assert "SCRAM credentials of user carol: SCRAM-SHA-512 (iterations=8192)" in cli(
        "configs", "--data-dir", str(server.data_dir), "--describe", "--entity-type", "users", "--entity-name", "carol")
    assert confluent_login_error(conf(server, "carol", "carol-pw", "SCRAM-SHA-512")) is None
    assert confluent_login_error(conf(server, "carol", "carol-pw", "PLAIN")) is None
    assert confluent_login_error(conf(server, "dave", "wrong")) is not None
    for f in admin.alter_user_scram_credentials([UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_512)]).values():
        f.result(timeout=10)
    assert confluent_login_error(conf(server, "carol", "carol-pw", "SCRAM-SHA-512")) is not None
    with pytest.raises(Exception, match="does not exist"):
        admin.describe_user_scram_credentials(["carol"])["carol"].result(timeout=10)


def test_confluent_without_the_right_on_the_cluster(server):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    # Not its describe: librdkafka (2.16) frees memory it does not own when DescribeUserScramCredentials
    # answers with a top-level error, which is how Kafka refuses it, and the process aborts.
    alice = AdminClient(conf(server, "alice"))
    futures = alice.alter_user_scram_credentials([
        UserScramCredentialUpsertion("eve", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"eve-pw")])
    with pytest.raises(KafkaException, match="(?i)authorization"):
        futures["eve"].result(timeout=10)
    assert "eve" not in {r.user for r in describe(server, "admin").results}


# kafka-python ----------------------------------------------------------------------------------------

def test_kafka_python_alters_and_describes(server):
    from kafka import KafkaAdminClient
    from kafka.admin import ScramMechanism, UserScramCredentialDeletion, UserScramCredentialUpsertion
    from kafka.errors import ClusterAuthorizationFailedError

    admin = KafkaAdminClient(bootstrap_servers=conf(server, "admin")["bootstrap.servers"], security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="admin",
                             sasl_plain_password=USERS["admin"], request_timeout_ms=10000)
    try:
        errors = admin.alter_user_scram_credentials([
            UserScramCredentialUpsertion("frank", ScramMechanism.SCRAM_SHA_256, "frank-pw", iterations=4096)])
        assert errors == {"frank": None}
        got = admin.describe_user_scram_credentials(["frank"])
        assert "frank" in repr(got) and "4096" in repr(got), got
        assert confluent_login_error(conf(server, "frank", "frank-pw")) is None
        errors = admin.alter_user_scram_credentials([UserScramCredentialDeletion("frank", ScramMechanism.SCRAM_SHA_512)])
        assert "does not exist" in str(errors["frank"])
    finally:
        admin.close()
    bob = KafkaAdminClient(bootstrap_servers=conf(server, "bob")["bootstrap.servers"], security_protocol="SASL_PLAINTEXT",
                           sasl_mechanism="PLAIN", sasl_plain_username="bob", sasl_plain_password=USERS["bob"],
                           request_timeout_ms=10000)
    try:
        with pytest.raises(ClusterAuthorizationFailedError):
            bob.describe_user_scram_credentials()
    finally:
        bob.close()


# Kafka's answers, request by request -----------------------------------------------------------------

def test_alter_answers_as_kafka(server):
    got = alter(server, "admin", upsertions=[upsertion("", "pw"), upsertion("few", "pw", iterations=1000),
                                             upsertion("many", "pw", iterations=20000),
                                             upsertion("odd", "pw", mechanism=3)],
                deletions=[ScramCredentialDeletion(name="nobody", mechanism=SHA256)])
    assert got == {"": (93, "Username must not be empty"), "few": (93, "Too few iterations"),
                   "many": (93, "Too many iterations"), "odd": (33, "Unknown SCRAM mechanism"),
                   "nobody": (91, "Attempt to delete a user credential that does not exist")}
    # one user twice in a request, even for two mechanisms: the user fails, the others go through
    got = alter(server, "admin", upsertions=[upsertion("gina", "pw"), upsertion("gina", "pw", SHA512),
                                             upsertion("hank", "hank-pw", SHA512)])
    assert got == {"hank": (0, None), "gina": (92, "A user credential cannot be altered twice in the same request")}
    got = alter(server, "admin", deletions=[ScramCredentialDeletion(name="hank", mechanism=SHA512)],
                upsertions=[upsertion("hank", "pw")])
    assert got["hank"][0] == 92
    assert confluent_login_error(conf(server, "hank", "hank-pw", "SCRAM-SHA-512")) is None  # unchanged
    assert alter(server, "alice", upsertions=[upsertion("zed", "pw"), upsertion("amy", "pw")]) == {
        "amy": (31, None), "zed": (31, None)}


def test_describe_answers_as_kafka(server):
    resp = describe(server, "alice", ["bob", "bob", "nobody", "admin"])
    assert resp.error_code == 0
    got = {r.user: (int(r.error_code), r.error_message, [(i.mechanism, i.iterations) for i in r.credential_infos])
           for r in resp.results}
    assert got == {
        "bob": (92, "Cannot describe SCRAM credentials for the same user twice in a single request: bob", []),
        "nobody": (91, "Attempt to describe a user credential that does not exist: nobody", []),
        "admin": (0, None, [(SHA256, 4096)])}
    every = describe(server, "alice", [])
    assert {"admin", "alice", "bob"} <= {r.user for r in every.results}
    refused = describe(server, "bob", ["alice"])
    assert refused.error_code == 31 and refused.error_message is None  # Kafka's generic error: no message
    assert [int(r.error_code) for r in refused.results] == [31]


# compactlog configs --bootstrap-server --entity-type users -------------------------------------------------

def configs(server, *args: str):
    from click.testing import CliRunner

    from compactlog.cli import main

    return CliRunner().invoke(main, ["configs", "--bootstrap-server", f"127.0.0.1:{server.ports['PLAINTEXT']}",
                                     "--entity-type", "users", *args])


def test_the_configs_command_through_the_broker(server):
    """As kafka-configs --bootstrap-server: refused without the right on the cluster (one line, no abort:
    librdkafka would abort on Describe's refusal, so the command asks the cluster first), then with it the
    same lines as over the data directory, and the user it adds logs in."""
    refused = configs(server, "--describe")
    assert refused.exit_code == 1 and "Not authorized to describe" in refused.output, refused.output
    refused = configs(server, "--alter", "--entity-name", "ivy", "--add-config", "SCRAM-SHA-256=[password=ivy-pw]")
    assert refused.exit_code == 1 and "authorization" in refused.output.lower(), refused.output
    cli("acls", "--data-dir", str(server.data_dir), "--add", "--allow-principal", "User:ANONYMOUS",
        "--operation", "Alter", "--operation", "Describe", "--cluster")
    done = configs(server, "--alter", "--entity-name", "ivy", "--add-config",
                   "SCRAM-SHA-256=[password=ivy-pw],SCRAM-SHA-512=[iterations=8192,password=ivy-pw]")
    assert (done.exit_code, done.output) == (0, "Completed updating config for user ivy.\n")
    shown = configs(server, "--describe", "--entity-name", "ivy")
    assert shown.output == "SCRAM credentials of user ivy: SCRAM-SHA-256 (iterations=4096), SCRAM-SHA-512 (iterations=8192)\n"
    assert shown.output == cli("configs", "--data-dir", str(server.data_dir), "--describe", "--entity-type", "users",
                               "--entity-name", "ivy")
    assert confluent_login_error(conf(server, "ivy", "ivy-pw", "SCRAM-SHA-512")) is None
    assert configs(server, "--alter", "--entity-name", "ivy", "--delete-config", "SCRAM-SHA-256").exit_code == 0
    assert "ivy: SCRAM-SHA-512 (iterations=8192)\n" in configs(server, "--describe").output
    assert configs(server, "--describe", "--entity-name", "nobody").output == "User nobody has no SCRAM credentials.\n"
    gone = configs(server, "--alter", "--entity-name", "ivy", "--delete-config", "SCRAM-SHA-256")
    assert gone.exit_code == 1 and "does not exist" in gone.output and "Traceback" not in gone.output
    odd = configs(server, "--alter", "--entity-name", "ivy", "--add-config", "SCRAM-SHA-1=[password=x]")
    assert odd.exit_code == 1 and "only SCRAM-SHA-256 and SCRAM-SHA-512" in odd.output
