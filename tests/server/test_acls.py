"""ACLs: the authorizer's rules on their own, then on a broker with SASL users: read without write, DENY
winning over ALLOW, super users, topics left out of Metadata, and the ACL APIs from two admin clients."""

from __future__ import annotations

import pytest
from security_clients import (
    ServeProcess,
    add_users,
    aiokafka_roundtrip,
    cli,
    confluent_consume,
    confluent_produce,
    decode,
    frame,
    kafka_python_roundtrip,
    read_frame,
)

from compactlog.security.acls import (
    AclBinding,
    AclStore,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

pytest.importorskip("confluent_kafka")

USERS = {"alice": "alice-secret", "bob": "bob-secret", "admin": "admin-secret"}
T = 10


# the decision ------------------------------------------------------------------------------------------

def binding(name, principal, op, permission="ALLOW", pattern="LITERAL", rtype="TOPIC", host="*") -> AclBinding:
    return AclBinding(ResourceType[rtype], name, PatternType[pattern], principal, host, Operation[op],
                      Permission[permission])


def test_the_rules_of_the_decision(tmp_path):
    store = AclStore(tmp_path)
    a = Authorizer(store, frozenset({"User:root"}))
    topic = ResourceType.TOPIC

    def may(principal, op, name, host="10.0.0.1", rtype=topic):
        return a.authorize(principal, host, Operation[op], rtype, name)

    assert may("User:anyone", "WRITE", "t")  # no ACL at all: everything is allowed
    store.add([binding("t", "User:alice", "READ"), binding("p-", "User:alice", "ALL", pattern="PREFIXED"),
               binding("p-secret", "User:alice", "WRITE", "DENY"), binding("*", "User:*", "DESCRIBE"),
               binding("g", "User:alice", "READ", rtype="GROUP"),
               binding("h", "User:alice", "WRITE", host="10.0.0.9")])
    assert may("User:alice", "READ", "t") and may("User:alice", "DESCRIBE", "t")  # READ implies DESCRIBE
    assert not may("User:alice", "WRITE", "t")
    assert may("User:alice", "WRITE", "p-open") and not may("User:alice", "WRITE", "p-secret")  # DENY wins
    assert may("User:alice", "READ", "p-secret")  # the DENY is of WRITE only
    assert may("User:bob", "DESCRIBE", "anything") and not may("User:bob", "READ", "anything")  # wildcards
    assert may("User:alice", "READ", "g", rtype=ResourceType.GROUP) and not may("User:alice", "READ", "t2")
    assert may("User:alice", "WRITE", "h", host="10.0.0.9") and not may("User:alice", "WRITE", "h")
    assert may("User:root", "DELETE", "p-secret")  # super users
    assert not may("User:bob", "READ", "nobody-named-it")
    lenient = Authorizer(store, allow_if_no_acl_found=True)  # a group no ACL names (topic '*' names every topic)
    assert lenient.authorize("User:bob", "h", Operation.READ, ResourceType.GROUP, "unnamed")
    assert not lenient.authorize("User:bob", "h", Operation.READ, ResourceType.GROUP, "g")
    assert a.authorize_any("User:alice", "h", Operation.WRITE, topic)
    assert not a.authorize_any("User:bob", "h", Operation.WRITE, topic)


def test_a_binding_kafka_would_refuse_is_refused(tmp_path):
    from compactlog.errors import InvalidRequestError

    for bad in (binding("t", "alice", "READ"), binding("t", "User:alice", "READ", pattern="MATCH"),
                binding("other", "User:alice", "ALTER", rtype="CLUSTER"), binding("t", "User:alice", "ANY")):
        with pytest.raises(InvalidRequestError):
            AclStore(tmp_path).add([bad])


# on a broker ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def acl_server(tmp_path_factory):
    d = tmp_path_factory.mktemp("acls") / "data"
    d.mkdir()
    add_users(d, USERS)
    acl = ["acls", "--data-dir", str(d), "--add", "--allow-principal", "User:alice"]
    cli(*acl, "--operation", "Read", "--topic", "readonly")
    cli(*acl, "--operation", "All", "--topic", "team-", "--resource-pattern-type", "prefixed")
    cli("acls", "--data-dir", str(d), "--add", "--deny-principal", "User:alice", "--operation", "Write",
        "--topic", "team-secret")
    s = ServeProcess(d, {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "super.users": "User:admin;User:root"}).start()
    yield s
    s.kill()


def conf(server, user: str) -> dict:
    return {"bootstrap.servers": server.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "SCRAM-SHA-256", "sasl.username": user, "sasl.password": USERS[user]}


def py_conf(server, user: str) -> dict:
    return dict(bootstrap_servers=server.bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                sasl_plain_username=user, sasl_plain_password=USERS[user])


def refused(results) -> bool:
    from confluent_kafka import KafkaError

    return bool(results) and all(e is not None and e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED for e in results)


def test_read_allowed_write_refused(acl_server):
    assert confluent_produce(conf(acl_server, "admin"), "readonly", [b"r1", b"r2"]) == [None, None]
    assert confluent_consume(conf(acl_server, "alice"), "readonly", 2) == [b"r1", b"r2"]
    assert refused(confluent_produce(conf(acl_server, "alice"), "readonly", [b"no"], timeout=5))


def test_deny_wins_over_a_prefixed_allow(acl_server):
    assert confluent_produce(conf(acl_server, "alice"), "team-open", [b"ok"]) == [None]
    assert refused(confluent_produce(conf(acl_server, "alice"), "team-secret", [b"no"], timeout=5))


def test_super_users_and_users_without_acls(acl_server):
    assert confluent_produce(conf(acl_server, "admin"), "admins-only", [b"a"]) == [None]
    assert refused(confluent_produce(conf(acl_server, "bob"), "admins-only", [b"b"], timeout=5))


def test_all_topics_metadata_leaves_out_what_may_not_be_described(acl_server):
    from confluent_kafka.admin import AdminClient

    confluent_produce(conf(acl_server, "admin"), "hidden-from-alice", [b"h"])
    seen = set(AdminClient(conf(acl_server, "alice")).list_topics(timeout=T).topics)
    assert "hidden-from-alice" not in seen and "readonly" in seen
    assert "hidden-from-alice" in AdminClient(conf(acl_server, "admin")).list_topics(timeout=T).topics


def test_kafka_python_and_aiokafka_under_acls(acl_server):
    """kafka-python's producer is idempotent by default: InitProducerId passes on WRITE to some topic."""
    assert kafka_python_roundtrip("team-kp", [b"1", b"2"], **py_conf(acl_server, "alice")) == [b"1", b"2"]
    assert aiokafka_roundtrip("team-aio", [b"3"], **py_conf(acl_server, "alice")) == [b"3"]


def test_acl_apis_from_confluent_admin(acl_server):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import (
        AclBinding as Binding,
    )
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
    )
    from confluent_kafka.admin import (
        ResourceType as RType,
    )

    confluent_produce(conf(acl_server, "admin"), "for-bob", [b"x"])
    admin = AdminClient(conf(acl_server, "admin"))
    new = Binding(RType.TOPIC, "for-bob", ResourcePatternType.LITERAL, "User:bob", "*", AclOperation.WRITE,
                  AclPermissionType.ALLOW)
    for f in admin.create_acls([new]).values():
        f.result(T)
    assert confluent_produce(conf(acl_server, "bob"), "for-bob", [b"y"]) == [None]
    bobs = AclBindingFilter(RType.ANY, None, ResourcePatternType.ANY, "User:bob", None, AclOperation.ANY,
                            AclPermissionType.ANY)
    assert admin.describe_acls(bobs).result(T) == [new]
    removed = [r for f in admin.delete_acls([bobs]).values() for r in f.result(T)]
    assert removed == [new]
    assert refused(confluent_produce(conf(acl_server, "bob"), "for-bob", [b"z"], timeout=5))
    alice = AdminClient(conf(acl_server, "alice"))
    with pytest.raises(KafkaException) as info:  # alice may not alter ACLs (ALTER on the cluster)
        for f in alice.create_acls([new]).values():
            f.result(T)
    assert info.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED


def test_acl_apis_from_kafka_python_admin(acl_server):
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
    )
    from kafka.admin import (
        ResourceType as RType,
    )

    admin = KafkaAdminClient(request_timeout_ms=T * 1000, **py_conf(acl_server, "admin"))
    try:
        acl = ACL("User:bob", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                  ResourcePattern(RType.GROUP, "bobs-", ACLResourcePatternType.PREFIXED))
        assert admin.create_acls([acl])["succeeded"] == [acl]
        flt = ACLFilter("User:bob", None, ACLOperation.ANY, ACLPermissionType.ANY,
                        ResourcePatternFilter(RType.GROUP, None, ACLResourcePatternType.ANY))
        found, error = admin.describe_acls(flt)
        assert found == [acl], (found, error)
        deleted = admin.delete_acls([flt])
        assert [a for _flt, matches, _err in deleted for a in matches] == [acl]
        assert admin.describe_acls(flt)[0] == []
    finally:
        admin.close()
    listed = cli("acls", "--data-dir", str(acl_server.data_dir), "--list", "--principal", "User:alice")
    assert ("Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=team-, patternType=PREFIXED)`: \n"
            " \t(principal=User:alice, host=*, operation=ALL, permissionType=ALLOW) \n") in listed


def test_find_coordinator_needs_describe_on_the_group(acl_server):
    import socket

    from kio.schema.find_coordinator.v2.request import FindCoordinatorRequest
    from kio.schema.find_coordinator.v2.response import FindCoordinatorResponse
    from kio.schema.sasl_authenticate.v1.request import SaslAuthenticateRequest
    from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

    def coordinator_error(user: str) -> int:
        with socket.create_connection(("127.0.0.1", acl_server.port), timeout=5) as sock:
            sock.sendall(frame(SaslHandshakeRequest(mechanism="PLAIN"), 1))
            read_frame(sock)
            sock.sendall(frame(SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{USERS[user]}".encode()), 2))
            read_frame(sock)
            sock.sendall(frame(FindCoordinatorRequest(key="some-group", key_type=0), 3))
            return decode(FindCoordinatorResponse, read_frame(sock))[1].error_code

    from confluent_kafka import KafkaError

    assert coordinator_error("bob") == KafkaError.GROUP_AUTHORIZATION_FAILED  # Kafka's code, from a client's table
    assert coordinator_error("admin") == 0


def test_describe_transactions_needs_describe_on_the_transactional_id(acl_server):
    import socket

    from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
    from kio.schema.describe_transactions.v0.response import DescribeTransactionsResponse
    from kio.schema.sasl_authenticate.v1.request import SaslAuthenticateRequest
    from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
    from kio.serial import entity_reader

    def describe_error(user: str) -> int:
        with socket.create_connection(("127.0.0.1", acl_server.port), timeout=5) as sock:
            sock.sendall(frame(SaslHandshakeRequest(mechanism="PLAIN"), 1))
            read_frame(sock)
            sock.sendall(frame(SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{USERS[user]}".encode()), 2))
            read_frame(sock)
            sock.sendall(frame(DescribeTransactionsRequest(transactional_ids=("tx",)), 3))
            payload = read_frame(sock)
            body, _ = entity_reader(DescribeTransactionsResponse)(memoryview(payload), 5)  # id, tagged fields
            (state,) = body.transaction_states
            return state.error_code

    assert describe_error("bob") == 53  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED: no ACL names it
    assert describe_error("admin") == 105  # a super user: TRANSACTIONAL_ID_NOT_FOUND, there are none


def test_acls_command_through_a_sasl_listener(acl_server, tmp_path):
    """acls --bootstrap-server --command-config: a super user lists, adds and removes; a user without
    Describe or Alter on the cluster is refused in the broker's words (librdkafka alone would list nothing)."""
    from click.testing import CliRunner

    from compactlog.cli import main

    def settings(user: str) -> str:
        path = tmp_path / f"{user}.properties"
        path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\nsasl.jaas.config="
                        "org.apache.kafka.common.security.scram.ScramLoginModule required "
                        f'username="{user}" password="{USERS[user]}";\n')
        return str(path)

    def acls(user: str, *args: str, code: int = 0) -> str:
        res = CliRunner().invoke(main, ["acls", "--bootstrap-server", acl_server.bootstrap, "--command-config",
                                        settings(user), *args])
        assert res.exit_code == code, res.output
        return res.output

    readonly = "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=readonly, patternType=LITERAL)`: "
    assert acls("admin", "--list", "--topic", "readonly") == (
        f"{readonly}\n \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW) \n\n")
    assert acls("bob", "--list", code=1) == "Error: Not allowed to describe ACLs (DESCRIBE on the cluster)\n"
    out = acls("bob", "--add", "--allow-principal", "User:bob", "--topic", "readonly", code=1)
    assert out.splitlines()[-1] == "Error: Not allowed to alter ACLs (ALTER on the cluster)"
    acls("admin", "--add", "--allow-principal", "User:bob", "--operation", "Describe", "--topic", "readonly")
    acls("admin", "--remove", "--allow-principal", "User:bob", "--operation", "Describe", "--topic", "readonly",
         "--force")
    assert "User:bob" not in acls("admin", "--list", "--topic", "readonly")
