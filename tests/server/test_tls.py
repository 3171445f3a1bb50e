"""TLS listeners: librdkafka, kafka-python and aiokafka over SSL, clients that must be refused, and the
principal a client certificate gives (User:<subject DN>), shown through an ACL."""

from __future__ import annotations

import ssl

import pytest
from security_clients import (
    aiokafka_roundtrip,
    aiokafka_start_error,
    cli,
    confluent_consume,
    confluent_login_error,
    confluent_produce,
    kafka_python_roundtrip,
    module_server,
)
from tls_certs import CLIENT_PRINCIPAL, KEY_PASSWORD, certs  # noqa: F401 - certs is a fixture

pytest.importorskip("confluent_kafka")


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory, certs):  # noqa: F811
    """SSL listener, client certificates requested (checked when shown, not needed)."""
    s = module_server(tmp_path_factory, "tls", listeners="SSL://127.0.0.1:0",
                      ssl_keystore_location=str(certs.server_keystore), ssl_truststore_location=str(certs.ca),
                      ssl_client_auth="requested")
    yield s
    s.kill()


@pytest.fixture(scope="module")
def mtls_server(tmp_path_factory, certs):  # noqa: F811
    """SSL listener requiring client certificates; the key given inline and encrypted, as Kafka allows."""
    s = module_server(tmp_path_factory, "mtls", listeners="SSL://127.0.0.1:0",
                      ssl_keystore_certificate_chain=certs.server_cert.read_text(),
                      ssl_keystore_key=certs.server_key_encrypted.read_text(), ssl_key_password=KEY_PASSWORD,
                      ssl_truststore_certificates=certs.ca.read_text(), ssl_client_auth="required")
    yield s
    s.kill()


def ssl_conf(server, certs, **extra) -> dict:  # noqa: F811
    return {"bootstrap.servers": server.bootstrap, "security.protocol": "SSL", "ssl.ca.location": str(certs.ca),
            **extra}


def test_confluent_produces_and_consumes_over_tls(tls_server, certs):  # noqa: F811
    values = [f"v{i}".encode() for i in range(20)]
    assert confluent_produce(ssl_conf(tls_server, certs), "tls-rdk", values) == [None] * 20
    assert confluent_consume(ssl_conf(tls_server, certs), "tls-rdk", 20) == values


def test_kafka_python_over_tls(tls_server, certs):  # noqa: F811
    values = [b"a", b"b", b"c"]
    got = kafka_python_roundtrip("tls-kp", values, bootstrap_servers=tls_server.bootstrap, security_protocol="SSL",
                                 ssl_cafile=str(certs.ca))
    assert got == values


def test_aiokafka_over_tls(tls_server, certs):  # noqa: F811
    from aiokafka.helpers import create_ssl_context

    values = [b"x", b"y"]
    got = aiokafka_roundtrip("tls-aio", values, bootstrap_servers=tls_server.bootstrap, security_protocol="SSL",
                             ssl_context=create_ssl_context(cafile=str(certs.ca)))
    assert got == values


def test_a_client_that_does_not_trust_the_broker_fails(tls_server, certs):  # noqa: F811
    err = confluent_login_error(ssl_conf(tls_server, certs, **{"ssl.ca.location": str(certs.other_ca)}))
    assert err is not None and "certificate verify failed" in str(err), err
    from aiokafka.helpers import create_ssl_context

    exc = aiokafka_start_error(bootstrap_servers=tls_server.bootstrap, security_protocol="SSL",
                               ssl_context=create_ssl_context(cafile=str(certs.other_ca)))
    assert exc is not None


def test_a_plaintext_client_on_a_tls_listener_gets_nothing(tls_server):
    err = confluent_login_error({"bootstrap.servers": tls_server.bootstrap})
    assert err is not None


def test_a_required_client_certificate_that_is_missing_fails(mtls_server, certs):  # noqa: F811
    err = confluent_login_error(ssl_conf(mtls_server, certs))
    assert err is not None, "a client without a certificate was served"


def test_a_client_certificate_is_the_principal(mtls_server, certs):  # noqa: F811
    conf = ssl_conf(mtls_server, certs, **{"ssl.certificate.location": str(certs.client_cert),
                                           "ssl.key.location": str(certs.client_key)})
    assert confluent_produce(conf, "before-acls", [b"1"]) == [None]
    # Once ACLs exist, only what they allow: the certificate's DN is the principal they name.
    cli("acls", "--data-dir", str(mtls_server.data_dir), "--add", "--allow-principal", CLIENT_PRINCIPAL,
        "--operation", "All", "--topic", "certified")
    assert confluent_produce(conf, "certified", [b"2"]) == [None]
    [err] = confluent_produce(conf, "not-certified", [b"3"], timeout=5)
    from confluent_kafka import KafkaError

    assert err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_the_context_is_built_from_inline_pem_with_joined_lines(certs):  # noqa: F811
    """A PEM value continued over lines in server.properties arrives without its line breaks."""
    from compactlog.server.security import server_ssl_context
    from compactlog.server.server_config import ServerConfig

    def joined(p):
        return " ".join(p.read_text().splitlines())

    ctx = server_ssl_context(ServerConfig({
        "ssl.keystore.certificate.chain": joined(certs.server_cert),
        "ssl.keystore.key": joined(certs.server_key_encrypted),
        "ssl.key.password": KEY_PASSWORD, "ssl.truststore.certificates": joined(certs.ca),
        "ssl.client.auth": "required", "ssl.enabled.protocols": "TLSv1.3"}))
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.minimum_version == ssl.TLSVersion.TLSv1_3


def test_a_wrong_key_password_is_a_config_error(certs):  # noqa: F811
    from compactlog.errors import InvalidConfigError
    from compactlog.server.security import server_ssl_context
    from compactlog.server.server_config import ServerConfig

    with pytest.raises(InvalidConfigError, match="certificate and key"):
        server_ssl_context(ServerConfig({"ssl.keystore.certificate.chain": certs.server_cert.read_text(),
                                         "ssl.keystore.key": certs.server_key_encrypted.read_text(),
                                         "ssl.key.password": "wrong"}))
    with pytest.raises(InvalidConfigError, match="needs the broker's certificate"):
        server_ssl_context(ServerConfig({}))


def test_the_principal_is_the_rfc2253_subject():
    from compactlog.server.security import rfc2253_name

    subject = ((("countryName", "US"),), (("organizationName", "Acme, Inc"),), (("organizationalUnitName", "eng"),),
               (("commonName", "client"),))
    assert "User:" + rfc2253_name(subject) == CLIENT_PRINCIPAL
    assert rfc2253_name(((("commonName", "#a+b "),),)) == "CN=\\#a\\+b\\ "


def test_settings_per_listener_and_client_auth_on_sasl_ssl(certs):  # noqa: F811
    """``listener.name.<name>.ssl.*`` wins for that listener; SASL_SSL takes ssl.client.auth only so (KIP-684)."""
    from compactlog.server.network import Listener
    from compactlog.server.security import server_ssl_context
    from compactlog.server.server_config import ServerConfig

    base = {"ssl.keystore.location": str(certs.server_keystore), "ssl.truststore.location": str(certs.ca),
            "ssl.client.auth": "required"}
    ssl_listener, sasl_listener = Listener("SSL", "SSL", "", 0), Listener("SASL_SSL", "SASL_SSL", "", 0)
    assert server_ssl_context(ServerConfig(base), ssl_listener).verify_mode == ssl.CERT_REQUIRED
    assert server_ssl_context(ServerConfig(base), sasl_listener).verify_mode == ssl.CERT_NONE
    prefixed = ServerConfig({**base, "listener.name.sasl_ssl.ssl.client.auth": "requested",
                             "listener.name.ssl.ssl.enabled.protocols": "TLSv1.3"})
    assert server_ssl_context(prefixed, sasl_listener).verify_mode == ssl.CERT_OPTIONAL
    assert server_ssl_context(prefixed, ssl_listener).minimum_version == ssl.TLSVersion.TLSv1_3


def test_fetch_answers_larger_than_the_zero_copy_size_go_through_tls_whole(tls_server, certs):  # noqa: F811
    """Ranges of at least ZERO_COPY_BYTES are sent with asyncio's sendfile, which reads and writes through
    TLS (no kernel sendfile there): 3 MB of records arrive byte for byte."""
    values = [(b"%06d" % i) * 170 for i in range(3000)]  # ~1 KB each
    assert confluent_produce(ssl_conf(tls_server, certs), "tls-big", values) == [None] * 3000
    assert confluent_consume(ssl_conf(tls_server, certs, **{"max.partition.fetch.bytes": 4194304}),
                             "tls-big", 3000) == values
