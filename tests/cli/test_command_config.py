"""--command-config FILE (Kafka's tools' client settings file) against a real ``compactlog serve`` whose only
listener is SASL_PLAINTEXT with SCRAM users: every --bootstrap-server command logs in with the Java
client's property names (sasl.mechanism, sasl.jaas.config), including the two whose requests are written
by hand (consumer-groups --delete-offsets, log-dirs); a wrong password is one line with the broker's words;
settings this client cannot honour are named."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
import ssl
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("confluent_kafka")

from compactlog.cli import main  # noqa: E402
from compactlog.cli.client_properties import ClientSettings, parse_jaas, settings  # noqa: E402
from compactlog.errors import CompactLogError, SaslAuthenticationFailedError  # noqa: E402

USERS = {"alice": "alice-secret", "bob": 'b\\"ob secret'}  # bob's password: a backslash and a quote
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


def _load(name: str):
    """A helper module of tests/server, loaded by path (only tests/server's own tests have it on the path)."""
    spec = importlib.util.spec_from_file_location(f"_command_config_{name}", Path(__file__).parents[1] / "server" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def _wire():
    return _load("wire")


def _tls_certs():
    return _load("tls_certs")


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    d = tmp_path_factory.mktemp("command-config") / "data"
    d.mkdir()
    for user, password in USERS.items():
        res = CliRunner().invoke(main, ["configs", "--data-dir", str(d), "--alter", "--entity-type", "users",
                                        "--entity-name", user, "--add-config",
                                        f"SCRAM-SHA-256=[password={password}],SCRAM-SHA-512=[password={password}]"])
        assert res.exit_code == 0, res.output
    certs = _tls_certs().make_certs(d.parent / "certs") if shutil.which("openssl") else None
    listeners = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0"}
    if certs is not None:
        listeners = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
                     "ssl.keystore.location": str(certs.server_keystore)}
    with _wire().serving(d, listeners) as s:
        s.certs = certs
        yield s


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def config_file(path: Path, mechanism: str, user: str, password: str) -> str:
    module = PLAIN_MODULE if mechanism == "PLAIN" else SCRAM_MODULE
    jaas = f"{module} required username={_quoted(user)} password={_quoted(password)};"
    # a .properties file: backslashes in the value are escapes there too
    path.write_text("# client settings\nsecurity.protocol=SASL_PLAINTEXT\n"
                    f"sasl.mechanism={mechanism}\nsasl.jaas.config={jaas.replace(chr(92), chr(92) * 2)}\n")
    return str(path)


@pytest.fixture
def run(broker):
    def invoke(*args: str, input: str | None = None, code: int = 0):
        argv = ["--bootstrap-server", f"127.0.0.1:{broker.ports['SASL_PLAINTEXT']}"]
        res = CliRunner().invoke(main, [args[0], *argv, *args[1:]], input=input)
        assert res.exit_code == code, (args, res.output, res.exception)
        return res

    return invoke


@pytest.mark.parametrize("mechanism, user", [("SCRAM-SHA-256", "alice"), ("SCRAM-SHA-512", "bob"), ("PLAIN", "bob")])
def test_every_wire_command_logs_in(run, tmp_path, mechanism, user):
    conf = config_file(tmp_path / "client.properties", mechanism, user, USERS[user])
    cc = ("--command-config", conf)
    topic, group = f"cc-{mechanism.lower()}", f"g-{mechanism.lower()}"
    assert run("topics", *cc, "--create", "--topic", topic, "--partitions", "2").stdout == f"Created topic {topic}.\n"
    assert topic in run("topics", *cc, "--list").stdout.split()
    run("configs", *cc, "--alter", "--topic", topic, "--add-config", "retention.ms=60000")
    assert "retention.ms=60000" in run("configs", *cc, "--describe", "--topic", topic).stdout
    assert "SCRAM-SHA-256" in run("configs", *cc, "--describe", "--entity-type", "users", "--entity-name", user).stdout
    run("produce", *cc, "--topic", topic, "--property", "parse.key=true", "--property", "key.separator=:",
        input="a:1\nb:2\nc:3\n")
    out = run("consume", *cc, "--topic", topic, "--from-beginning", "--max-messages", "3", "--group", group).stdout
    assert sorted(out.split()) == ["1", "2", "3"]
    assert group in run("consumer-groups", *cc, "--list").stdout.split()
    out = run("consumer-groups", *cc, "--delete-offsets", "--group", group, "--topic", topic).stdout
    assert "Request succeed" in out
    out = run("log-dirs", *cc, "--describe", "--topic-list", topic).stdout.splitlines()
    dirs = json.loads(out[-1])["brokers"][0]["logDirs"]
    assert sorted(p["partition"] for d in dirs for p in d["partitions"]) == [f"{topic}-0", f"{topic}-1"]
    assert run("transactions", *cc, "list").stdout.split() == ["TransactionalId", "Coordinator", "ProducerId",
                                                                "TransactionState"]
    out = run("transactions", *cc, "describe-producers", "--topic", topic, "--partition", "0").stdout
    assert out.split()[:2] == ["ProducerId", "ProducerEpoch"]


@pytest.mark.parametrize("mechanism, command", [
    ("SCRAM-SHA-256", ("topics", "--list")), ("PLAIN", ("log-dirs", "--describe")),
    ("SCRAM-SHA-512", ("consumer-groups", "--delete-offsets", "--group", "g", "--topic", "t"))])
def test_a_wrong_password_is_one_line_with_the_brokers_words(run, tmp_path, mechanism, command, monkeypatch):
    from compactlog.cli import wire

    monkeypatch.setattr(wire, "CONNECT_TIMEOUT_S", 3.0)  # librdkafka retries the login until then
    conf = config_file(tmp_path / "client.properties", mechanism, "alice", "not-her-password")
    res = run(command[0], "--command-config", conf, *command[1:], code=1)
    assert len(res.stderr.splitlines()) == 1 and res.stderr.startswith("Error: the broker at "), res.stderr
    assert BROKER_WORDS[mechanism] in res.stderr


BROKER_WORDS = {"PLAIN": "Authentication failed: Invalid username or password",
                **{m: f"Authentication failed during authentication due to invalid credentials with SASL mechanism {m}"
                   for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")}}


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_the_hand_written_login_is_refused_with_the_brokers_words(broker, mechanism):
    """The socket the hand-built requests go over (consumer-groups --delete-offsets, log-dirs) logs in itself."""
    from compactlog.cli.sasl_client import connect

    port = broker.ports["SASL_PLAINTEXT"]
    good = ClientSettings(protocol="SASL_PLAINTEXT", mechanism=mechanism, username="alice", password=USERS["alice"])
    connect("127.0.0.1", port, 5.0, good).close()
    with pytest.raises(SaslAuthenticationFailedError) as info:
        connect("127.0.0.1", port, 5.0, replace(good, password="wrong"))
    assert str(info.value) == BROKER_WORDS[mechanism]


def test_sasl_ssl_with_a_pem_truststore(broker, tmp_path):
    """TLS under the login, for librdkafka's clients and for the hand-built requests' socket alike."""
    if broker.certs is None:
        pytest.skip("the openssl command line is needed to make test certificates")
    conf = tmp_path / "ssl.properties"
    jaas = f'{SCRAM_MODULE} required username="alice" password="{USERS["alice"]}";'
    conf.write_text(f"security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config={jaas}\n"
                    f"ssl.truststore.type=PEM\nssl.truststore.location={broker.certs.ca}\n")
    b = f"127.0.0.1:{broker.ports['SASL_SSL']}"

    def ok(*args: str, input: str | None = None) -> str:
        res = CliRunner().invoke(main, [args[0], "--bootstrap-server", b, "--command-config", str(conf), *args[1:]],
                                 input=input)
        assert res.exit_code == 0, res.output
        return res.stdout

    ok("topics", "--create", "--topic", "over-tls")
    ok("produce", "--topic", "over-tls", input="x\n")
    assert ok("consume", "--topic", "over-tls", "--from-beginning", "--group", "tls-g") == "x\n"
    assert "Request succeed" in ok("consumer-groups", "--delete-offsets", "--group", "tls-g", "--topic", "over-tls")
    dirs = json.loads(ok("log-dirs", "--describe", "--topic-list", "over-tls").splitlines()[-1])["brokers"][0]["logDirs"]
    assert [p["partition"] for d in dirs for p in d["partitions"]] == ["over-tls-0"]


def test_without_the_file_the_listener_is_named(run, monkeypatch):
    from compactlog.cli import wire

    monkeypatch.setattr(wire, "CONNECT_TIMEOUT_S", 2.0)
    res = run("topics", "--list", code=1)
    assert "give its client settings with --command-config FILE" in res.stderr


@pytest.mark.parametrize("props, named", [
    ({"ssl.truststore.location": "/tls/trust.jks"}, "ssl.truststore.type=JKS: this client reads PEM truststores only"),
    ({"no.such.setting": "1"}, 'No such configuration property: "no.such.setting"'),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
      "sasl.jaas.config": f'{SCRAM_MODULE} required username="u" password="p";'}, "does not log in with sasl.mechanism=PLAIN"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
      "sasl.jaas.config": f'{PLAIN_MODULE} required username="u";'}, "needs username="),
    ({"security.protocol": "TLS"}, "security.protocol: 'TLS' is not one of"),
])
def test_what_cannot_be_honoured_is_named(props, named):
    with pytest.raises(CompactLogError, match=None) as info:
        settings(props)
    assert named in str(info.value)


def test_a_refused_file_is_a_usage_error_naming_the_setting(tmp_path):
    f = tmp_path / "c.properties"
    f.write_text("ssl.truststore.location=/tls/trust.jks\n")
    res = CliRunner().invoke(main, ["topics", "--bootstrap-server", "127.0.0.1:1", "--command-config", str(f), "--list"])
    assert res.exit_code == 2 and "ssl.truststore.type=JKS" in res.output


def test_mapped_names():
    ca = ssl.get_default_verify_paths().openssl_cafile  # librdkafka reads the truststore when it is given
    if not Path(ca).is_file():
        pytest.skip("no CA bundle to point ssl.truststore.location at")
    s = settings({"security.protocol": "sasl_ssl", "sasl.mechanism": "SCRAM-SHA-512",
                  "sasl.jaas.config": f'{SCRAM_MODULE} required\n  username="u"\n  password="p\\"q";',
                  "ssl.truststore.type": "PEM", "ssl.truststore.location": ca,
                  "ssl.endpoint.identification.algorithm": "", "client.id": "tool"})
    assert s.librdkafka == {"security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "u",
                            "sasl.password": 'p"q', "ssl.ca.location": ca,
                            "ssl.endpoint.identification.algorithm": "none", "client.id": "tool"}
    assert parse_jaas(f"{PLAIN_MODULE} required username=u password=\"a b;c\";") == (PLAIN_MODULE, {"username": "u",
                                                                                              "password": "a b;c"})


def test_the_file_goes_with_a_broker(tmp_path):
    f = tmp_path / "c.properties"
    f.write_text("client.id=x\n")
    (tmp_path / "data").mkdir()
    res = CliRunner().invoke(main, ["topics", "--data-dir", str(tmp_path / "data"), "--command-config", str(f), "--list"])
    assert res.exit_code == 2 and "--command-config goes with --bootstrap-server" in res.output
    res = CliRunner().invoke(main, ["topics", "--data-dir", str(tmp_path / "data"), "--list"])
    assert res.exit_code == 0, res.output  # the earlier command's settings are gone
