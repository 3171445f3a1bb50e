"""SASL logins (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) with librdkafka, kafka-python and aiokafka; logins
that must fail; what an unauthenticated client gets (its connection closed, no data); the bare tokens of
SaslHandshake v0; and credentials changed with the CLI while the broker runs."""

from __future__ import annotations

import json
import logging
import socket

import pytest
from kio.schema.api_versions.v0.request import ApiVersionsRequest
from kio.schema.api_versions.v0.response import ApiVersionsResponse
from kio.schema.metadata.v8.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v8.response import MetadataResponse
from kio.schema.sasl_authenticate.v1.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v1.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest as SaslHandshakeV0
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse
from security_clients import (
    ServeProcess,
    aiokafka_roundtrip,
    aiokafka_start_error,
    cli,
    confluent_consume,
    confluent_login_error,
    confluent_produce,
    decode,
    frame,
    kafka_python_roundtrip,
    read_frame,
)
from tls_certs import certs  # noqa: F401 - a fixture

pytest.importorskip("confluent_kafka")

USERS = {"alice": "alice-secret", "bob": "bob-secret"}


@pytest.fixture(scope="module")
def sasl_server(tmp_path_factory, certs):  # noqa: F811
    d = tmp_path_factory.mktemp("sasl") / "data"
    d.mkdir()
    for user, password in USERS.items():  # before the start: the broker reads them when it needs them
        cli("configs", "--data-dir", str(d), "--alter", "--entity-type", "users", "--entity-name", user,
            "--add-config", f"SCRAM-SHA-256=[iterations=8192,password={password}],SCRAM-SHA-512=[password={password}]")
    s = ServeProcess(d, {"listeners": "SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
                         "ssl.keystore.location": str(certs.server_keystore)}).start()
    yield s
    s.kill()


def sasl_conf(server, mechanism: str, user: str = "alice", password: str | None = None, protocol="SASL_PLAINTEXT"):
    return {"bootstrap.servers": f"127.0.0.1:{server.ports[protocol]}", "security.protocol": protocol,
            "sasl.mechanisms": mechanism, "sasl.username": user,
            "sasl.password": USERS.get(user, "x") if password is None else password}


def python_client_kwargs(server, mechanism: str, user: str, password: str | None = None) -> dict:
    """kafka-python's and aiokafka's keyword arguments (the same names in both) for a SASL_PLAINTEXT login."""
    return {"bootstrap_servers": server.bootstrap, "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism,
            "sasl_plain_username": user, "sasl_plain_password": USERS[user] if password is None else password}


MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_logs_in(sasl_server, mechanism):
    topic = f"rdk-{mechanism.lower()}"
    values = [f"{mechanism}-{i}".encode() for i in range(5)]
    assert confluent_produce(sasl_conf(sasl_server, mechanism), topic, values) == [None] * 5
    assert confluent_consume(sasl_conf(sasl_server, mechanism, "bob"), topic, 5) == values


# What Kafka's broker answers a failed login: PLAIN's own words; for SCRAM, the words it gives for any failure
KAFKA_PLAIN_FAILURE = "Authentication failed: Invalid username or password"
KAFKA_SCRAM_FAILURE = "Authentication failed during authentication due to invalid credentials with SASL mechanism "


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_wrong_password_and_unknown_user_fail(sasl_server, mechanism):
    from confluent_kafka import KafkaError

    for conf in (sasl_conf(sasl_server, mechanism, password="wrong"), sasl_conf(sasl_server, mechanism, "mallory")):
        err = confluent_login_error(conf)
        assert err is not None and err.code() == KafkaError._AUTHENTICATION, err
        assert (KAFKA_PLAIN_FAILURE if mechanism == "PLAIN" else KAFKA_SCRAM_FAILURE + mechanism) in err.str()


def test_confluent_over_sasl_ssl(sasl_server, certs):  # noqa: F811
    conf = {**sasl_conf(sasl_server, "SCRAM-SHA-512", protocol="SASL_SSL"), "ssl.ca.location": str(certs.ca)}
    assert confluent_produce(conf, "over-tls", [b"secret"]) == [None]
    assert confluent_consume(conf, "over-tls", 1) == [b"secret"]


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_kafka_python_logs_in(sasl_server, mechanism):
    values = [b"k1", b"k2"]
    got = kafka_python_roundtrip(f"kp-{mechanism.lower()}", values,
                                 **python_client_kwargs(sasl_server, mechanism, "alice"))
    assert got == values


def test_kafka_python_with_a_wrong_password_fails(sasl_server, caplog):
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    caplog.set_level(logging.INFO, logger="kafka")  # whatever other tests set
    with pytest.raises(KafkaError):  # kafka-python keeps retrying until its bootstrap timeout
        KafkaProducer(**python_client_kwargs(sasl_server, "SCRAM-SHA-256", "alice", "nope"),
                      bootstrap_timeout_ms=2500, max_block_ms=2500)
    assert KAFKA_SCRAM_FAILURE + "SCRAM-SHA-256" in caplog.text


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_aiokafka_logs_in(sasl_server, mechanism):
    values = [b"a1", b"a2"]
    got = aiokafka_roundtrip(f"aio-{mechanism.lower()}", values, **python_client_kwargs(sasl_server, mechanism, "bob"))
    assert got == values


def test_aiokafka_with_a_wrong_password_fails(sasl_server, caplog):
    exc = aiokafka_start_error(**python_client_kwargs(sasl_server, "SCRAM-SHA-512", "bob", "x"))
    assert exc is not None  # aiokafka reports "unable to bootstrap" and logs the broker's reason
    assert "[Error 58] SaslAuthenticationFailed" in caplog.text


# the wire, request by request --------------------------------------------------------------------------

def connect(server) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.ports["SASL_PLAINTEXT"]), timeout=5)
    return sock


def handshake(sock: socket.socket, mechanism: str, correlation_id: int = 1) -> SaslHandshakeResponse:
    """SaslHandshake v1 for ``mechanism``; the broker's answer."""
    sock.sendall(frame(SaslHandshakeRequest(mechanism=mechanism), correlation_id))
    return decode(SaslHandshakeResponse, read_frame(sock))[1]


def test_metadata_before_the_login_closes_the_connection_unanswered(sasl_server):
    with connect(sasl_server) as sock:  # the very first request
        sock.sendall(frame(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                           include_cluster_authorized_operations=False,
                                           include_topic_authorized_operations=False), 1))
        assert read_frame(sock) is None
    with connect(sasl_server) as sock:  # after ApiVersions, which is allowed, and a handshake
        sock.sendall(frame(ApiVersionsRequest(), 1))
        _, versions = decode(ApiVersionsResponse, read_frame(sock))
        assert {17, 36} <= {k.api_key for k in versions.api_keys}
        assert handshake(sock, "PLAIN", 2).error_code == 0
        sock.sendall(frame(MetadataRequest(topics=(MetadataRequestTopic(name="rdk-plain"),),
                                           allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                                           include_topic_authorized_operations=False), 3))
        assert read_frame(sock) is None


def test_a_frame_above_the_login_limit_before_the_login_closes_the_connection(sasl_server):
    """Before logging in, a client may not make the broker take a frame above
    sasl.server.max.receive.size (512 KB): announcing 1 MB closes the connection before the body."""
    with connect(sasl_server) as sock:
        sock.sendall((1 << 20).to_bytes(4, "big") + b"\0" * 16)
        assert read_frame(sock) is None


def test_a_failed_login_answers_58_then_closes(sasl_server):
    with connect(sasl_server) as sock:
        hs = handshake(sock, "PLAIN")
        assert hs.error_code == 0 and set(hs.mechanisms) == set(MECHANISMS)
        sock.sendall(frame(SaslAuthenticateRequest(auth_bytes=b"\0alice\0wrong"), 2))
        _, auth = decode(SaslAuthenticateResponse, read_frame(sock))
        assert (auth.error_code, auth.error_message) == (58, KAFKA_PLAIN_FAILURE)
        assert read_frame(sock) is None


def test_an_unsupported_mechanism_is_refused(sasl_server):
    with connect(sasl_server) as sock:
        hs = handshake(sock, "GSSAPI")
        assert hs.error_code == 33 and "SCRAM-SHA-512" in hs.mechanisms
        assert read_frame(sock) is None


def test_handshake_v0_then_bare_tokens(sasl_server):
    """Clients before KIP-152 (kafka-python 2.0) send SaslHandshake v0, then the token with no header."""
    with connect(sasl_server) as sock:
        sock.sendall(frame(SaslHandshakeV0(mechanism="PLAIN"), 1))
        assert decode(SaslHandshakeResponse, read_frame(sock))[1].error_code == 0
        token = b"\0alice\0alice-secret"
        sock.sendall(len(token).to_bytes(4, "big") + token)
        assert read_frame(sock) == b""  # an empty token: logged in
        sock.sendall(frame(MetadataRequest(topics=(MetadataRequestTopic(name="rdk-plain"),),
                                           allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                                           include_topic_authorized_operations=False), 2))
        _, md = decode(MetadataResponse, read_frame(sock))
        assert [t.name for t in md.topics] == ["rdk-plain"]
    with connect(sasl_server) as sock:
        sock.sendall(frame(SaslHandshakeV0(mechanism="PLAIN"), 1))
        read_frame(sock)
        token = b"\0alice\0wrong"
        sock.sendall(len(token).to_bytes(4, "big") + token)
        assert read_frame(sock) is None  # a failed bare login is closed without an answer


# credentials -------------------------------------------------------------------------------------------

def test_credentials_changed_while_the_broker_runs(sasl_server):
    from confluent_kafka import KafkaError

    d = str(sasl_server.data_dir)
    assert confluent_login_error(sasl_conf(sasl_server, "SCRAM-SHA-512", "carol", "carol-secret")) is not None
    cli("configs", "--data-dir", d, "--alter", "--entity-type", "users", "--entity-name", "carol",
        "--add-config", "SCRAM-SHA-512=[password=carol-secret]")
    assert confluent_login_error(sasl_conf(sasl_server, "SCRAM-SHA-512", "carol", "carol-secret")) is None
    assert confluent_login_error(sasl_conf(sasl_server, "PLAIN", "carol", "carol-secret")) is None
    cli("configs", "--data-dir", d, "--alter", "--entity-type", "users", "--entity-name", "carol",
        "--delete-config", "SCRAM-SHA-512")
    err = confluent_login_error(sasl_conf(sasl_server, "SCRAM-SHA-512", "carol", "carol-secret"))
    assert err is not None and err.code() == KafkaError._AUTHENTICATION


def test_no_secret_is_kept_or_shown(sasl_server):
    d = sasl_server.data_dir
    shown = cli("configs", "--data-dir", str(d), "--describe", "--entity-type", "users")
    assert "SCRAM credentials of user alice: SCRAM-SHA-256 (iterations=8192), SCRAM-SHA-512 (iterations=4096)" in shown
    stored = (d / "__security" / "credentials.json").read_text()
    assert "alice-secret" not in stored and "alice-secret" not in shown
    assert set(json.loads(stored)["users"]["alice"]["SCRAM-SHA-256"]) == {"salt", "stored_key", "server_key",
                                                                         "iterations"}


def test_scram_exchange_against_kafka_pythons_client():
    """The sans-IO server side, step by step, with another project's client side of RFC 5802."""
    from kafka.net.sasl.scram import ScramClient

    from compactlog.errors import SaslAuthenticationFailedError
    from compactlog.security.scram import ScramServer, make_credential

    stored = {("u", "SCRAM-SHA-256"): make_credential("SCRAM-SHA-256", "pw", 4096)}
    for password, ok in (("pw", True), ("bad", False)):
        client, server = ScramClient("u", password, "SCRAM-SHA-256"), ScramServer("SCRAM-SHA-256",
                                                                                   lambda u, m: stored.get((u, m)))
        client.process_server_first_message(server.step(client.first_message()))
        if ok:
            client.process_server_final_message(server.step(client.final_message()))  # checks the server's proof
            assert server.complete and server.username == "u"
        else:
            with pytest.raises(SaslAuthenticationFailedError):
                server.step(client.final_message())
