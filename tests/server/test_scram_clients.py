"""SCRAM-SHA-256 and -512 logins with every SASL client within reach, and Kafka's rule for the nonce of
the client-final message.

librdkafka before 2.6.1 (Debian 12 ships 2.0.2, in its kcat) puts its own nonce in front of the combined
nonce the server sent, in its client-final message, and signs the messages with that nonce. Kafka's
server accepts a final nonce that ends with the one it sent and checks the proof over the messages as
exchanged, so those clients log in; the replay below builds that exchange byte for byte.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import random
import shutil
import socket
import subprocess
import zlib

import pytest
from kio.schema.metadata.v8.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v8.response import MetadataResponse
from kio.schema.sasl_authenticate.v1.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v1.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse
from kafkajs_support import run_node
from security_clients import (
    ServeProcess,
    aiokafka_roundtrip,
    cli,
    confluent_consume,
    confluent_produce,
    decode,
    frame,
    kafka_python_roundtrip,
    read_frame,
)

USERS = {"alice": "alice-secret", "b,o=b": "bob-secret"}  # a name SCRAM has to escape
SCRAM = ["SCRAM-SHA-256", "SCRAM-SHA-512"]
HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


@pytest.fixture(scope="module")
def scram_server(tmp_path_factory):
    d = tmp_path_factory.mktemp("scram") / "data"
    d.mkdir()
    for user, password in USERS.items():
        cli("configs", "--data-dir", str(d), "--alter", "--entity-type", "users", "--entity-name", user,
            "--add-config", f"SCRAM-SHA-256=[password={password}],SCRAM-SHA-512=[iterations=8192,password={password}]")
    s = ServeProcess(d, {"listeners": "SASL_PLAINTEXT://127.0.0.1:0"}).start()
    yield s
    s.kill()


# librdkafka 2.0.2's exchange, byte for byte ----------------------------------------------------------

def _hmac(name: str, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, name).digest()


class Rdkafka202Scram:
    """The client side of SCRAM as librdkafka 2.0.2 writes it (rdkafka_sasl_scram.c at v2.0.2)."""

    def __init__(self, mechanism: str, user: str, password: str, seed: int) -> None:
        self.hash, self.password = HASHES[mechanism], password
        rnd = random.Random(seed)  # its nonce: 32 characters from '-' (0x2d) to '~' (0x7e)
        self.cnonce = "".join(chr(rnd.randint(0x2D, 0x7E)) for _ in range(32))
        self.bare = f"n={_saslname(user)},r={self.cnonce}"

    def first(self) -> bytes:
        return f"n,,{self.bare}".encode()

    def final(self, server_first: bytes, proof_fix=None, nonce_of=None) -> bytes:
        """client-final: ``c=biws,r=<own nonce><server's nonce>,p=<proof>``, the proof over
        bare + server-first (as received) + the message without its proof. ``nonce_of`` replaces the
        nonce (to try ones Kafka refuses, correctly signed); ``proof_fix`` spoils the proof."""
        attrs = dict(a.split("=", 1) for a in server_first.decode().split(","))
        salt, iterations, snonce = base64.b64decode(attrs["s"]), int(attrs["i"]), attrs["r"]
        nonce = self.cnonce + snonce if nonce_of is None else nonce_of(self.cnonce, snonce)
        without_proof = f"c=biws,r={nonce}"
        salted = hashlib.pbkdf2_hmac(self.hash, self.password.encode(), salt, iterations)
        client_key = _hmac(self.hash, salted, b"Client Key")
        auth = f"{self.bare},{server_first.decode()},{without_proof}".encode()
        signature = _hmac(self.hash, hashlib.new(self.hash, client_key).digest(), auth)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        if proof_fix is not None:
            proof = proof_fix(proof)
        self.server_signature = _hmac(self.hash, _hmac(self.hash, salted, b"Server Key"), auth)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def _saslname(user: str) -> str:
    """librdkafka's escaping of a user name: '=' as =3D, ',' as =2C."""
    return user.replace("=", "=3D").replace(",", "=2C")


def _login(server, mechanism: str, client: Rdkafka202Scram, **final_kwargs):
    """Handshake, client-first, client-final on a fresh connection: (the SaslAuthenticate answer to the
    final message, the socket)."""
    sock = socket.create_connection(("127.0.0.1", server.ports["SASL_PLAINTEXT"]), timeout=10)
    sock.sendall(frame(SaslHandshakeRequest(mechanism=mechanism), 1))
    assert decode(SaslHandshakeResponse, read_frame(sock))[1].error_code == 0
    sock.sendall(frame(SaslAuthenticateRequest(auth_bytes=client.first()), 2))
    _, first = decode(SaslAuthenticateResponse, read_frame(sock))
    assert first.error_code == 0, first.error_message
    server_first = first.auth_bytes
    assert server_first.startswith(b"r=" + client.cnonce.encode())
    sock.sendall(frame(SaslAuthenticateRequest(auth_bytes=client.final(server_first, **final_kwargs)), 3))
    return decode(SaslAuthenticateResponse, read_frame(sock))[1], sock


def _metadata(sock: socket.socket) -> list[str]:
    sock.sendall(frame(MetadataRequest(topics=(MetadataRequestTopic(name="nothing-here"),),
                                       allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                                       include_topic_authorized_operations=False), 4))
    return [t.name for t in decode(MetadataResponse, read_frame(sock))[1].topics]


@pytest.mark.parametrize("mechanism", SCRAM)
@pytest.mark.parametrize("user", sorted(USERS))
def test_librdkafka_2_0_2_exchange_logs_in(scram_server, mechanism, user):
    client = Rdkafka202Scram(mechanism, user, USERS[user], seed=zlib.crc32(f"{mechanism} {user}".encode()))
    final, sock = _login(scram_server, mechanism, client)
    with sock:
        assert final.error_code == 0, final.error_message
        assert final.auth_bytes == b"v=" + base64.b64encode(client.server_signature)  # signed as sent
        assert _metadata(sock) == ["nothing-here"]  # logged in: the broker answers


def _flip_last_bit(proof: bytes) -> bytes:
    return proof[:-1] + bytes([proof[-1] ^ 1])


@pytest.mark.parametrize("mechanism", SCRAM)
@pytest.mark.parametrize("case, kwargs", [
    ("a wrong proof", {"proof_fix": _flip_last_bit}),
    ("a wrong password", {}),
    ("a nonce with something after the server's", {"nonce_of": lambda c, s: c + s + "x"}),
    ("the server's nonce cut short", {"nonce_of": lambda c, s: s[:-1]}),
    ("only the client's nonce", {"nonce_of": lambda c, s: c}),
])
def test_what_kafka_refuses_still_fails(scram_server, mechanism, case, kwargs):
    """Each correctly signed over the messages as sent, except the wrong proof and password: Kafka's
    rule is 'ends with the server's nonce', no looser."""
    password = "not-the-password" if case == "a wrong password" else USERS["alice"]
    final, sock = _login(scram_server, mechanism, Rdkafka202Scram(mechanism, "alice", password, seed=7), **kwargs)
    with sock:
        assert final.error_code == 58, case
        assert read_frame(sock) is None  # and the connection is closed


def test_the_sans_io_server_takes_both_nonce_forms():
    """The server side alone: RFC 5802's final nonce (the server's) and librdkafka 2.0.2's (its own
    in front), each signed over what was sent; the signature proves the server checked those bytes."""
    from compactlog.errors import SaslAuthenticationFailedError
    from compactlog.security.scram import ScramServer, make_credential

    stored = {("alice", "SCRAM-SHA-512"): make_credential("SCRAM-SHA-512", "pw", 4096)}
    for nonce_of in (lambda c, s: s, lambda c, s: c + s, lambda c, s: "anything" + s):
        client = Rdkafka202Scram("SCRAM-SHA-512", "alice", "pw", seed=1)
        server = ScramServer("SCRAM-SHA-512", lambda u, m: stored.get((u, m)))
        reply = server.step(client.final(server.step(client.first()), nonce_of=nonce_of))
        assert server.complete and reply == b"v=" + base64.b64encode(client.server_signature)
    client = Rdkafka202Scram("SCRAM-SHA-512", "alice", "pw", seed=1)
    server = ScramServer("SCRAM-SHA-512", lambda u, m: stored.get((u, m)))
    server_first = server.step(client.first())
    final = client.final(server_first).replace(b",p=", b",ext=1,p=")  # Kafka signs c= and r= only
    assert server.step(final) == b"v=" + base64.b64encode(client.server_signature)
    client = Rdkafka202Scram("SCRAM-SHA-512", "alice", "pw", seed=2)
    server = ScramServer("SCRAM-SHA-512", lambda u, m: stored.get((u, m)))
    with pytest.raises(SaslAuthenticationFailedError, match="nonce"):
        server.step(client.final(server.step(client.first()), nonce_of=lambda c, s: s + c))
    client = Rdkafka202Scram("SCRAM-SHA-512", "alice", "pw", seed=3)
    server = ScramServer("SCRAM-SHA-512", lambda u, m: stored.get((u, m)))
    with pytest.raises(SaslAuthenticationFailedError, match="channel binding"):  # stricter than Kafka: differences.md
        server.step(client.final(server.step(client.first())).replace(b"c=biws", b"c=eSws"))


# real clients ----------------------------------------------------------------------------------------

def _kcat_version() -> str:
    if shutil.which("kcat") is None:
        pytest.skip("kcat is not installed")
    return subprocess.run(["kcat", "-V"], capture_output=True, text=True, timeout=10).stdout


@pytest.mark.parametrize("mechanism", SCRAM)
def test_kcat_produces_and_consumes(scram_server, mechanism):
    """The system's kcat (Debian 12's is built on librdkafka 2.0.2, the one with the nonce in front)."""
    version = _kcat_version()
    topic = f"kcat-{mechanism.lower()}"
    common = ["-b", f"127.0.0.1:{scram_server.ports['SASL_PLAINTEXT']}", "-X", "security.protocol=SASL_PLAINTEXT",
              "-X", f"sasl.mechanisms={mechanism}", "-X", "sasl.username=b,o=b", "-X", "sasl.password=bob-secret",
              "-t", topic]
    lines = [f"{mechanism}-{i}" for i in range(3)]
    produced = subprocess.run(["kcat", *common, "-P", "-X", "message.timeout.ms=10000"], input="\n".join(lines) + "\n",
                              capture_output=True, text=True, timeout=30)
    assert produced.returncode == 0, f"{version}\n{produced.stderr}"
    consumed = subprocess.run(["kcat", *common, "-C", "-o", "beginning", "-c", "3", "-e", "-q",
                               "-X", "socket.timeout.ms=10000"], capture_output=True, text=True, timeout=30)
    assert consumed.stdout.splitlines() == lines, f"{version}\n{consumed.stderr}"
    wrong = subprocess.run(["kcat", *common[:-2], "-X", "sasl.password=nope", "-L", "-m", "5"],
                           capture_output=True, text=True, timeout=30)
    assert wrong.returncode != 0 and "Authentication failed" in wrong.stderr, wrong.stderr


def _conf(server, mechanism: str, user: str) -> dict:
    return {"bootstrap.servers": f"127.0.0.1:{server.ports['SASL_PLAINTEXT']}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": mechanism, "sasl.username": user, "sasl.password": USERS[user]}


def _python_kwargs(server, mechanism: str, user: str) -> dict:
    return {"bootstrap_servers": f"127.0.0.1:{server.ports['SASL_PLAINTEXT']}", "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": USERS[user]}


@pytest.mark.parametrize("mechanism", SCRAM)
def test_confluent_kafka(scram_server, mechanism):
    """confluent-kafka on its bundled librdkafka (2.16: the RFC's nonce)."""
    topic, values = f"ck-{mechanism.lower()}", [b"v1", b"v2"]
    assert confluent_produce(_conf(scram_server, mechanism, "alice"), topic, values) == [None, None]
    assert confluent_consume(_conf(scram_server, mechanism, "b,o=b"), topic, 2) == values


@pytest.mark.parametrize("mechanism", SCRAM)
def test_kafka_python(scram_server, mechanism):
    """As "alice": kafka-python 3.0 writes the user name into its client-first message unescaped, so
    "b,o=b" would be refused here as by Kafka (an invalid client-first message)."""
    values = [b"k1", b"k2"]
    assert kafka_python_roundtrip(f"kp-{mechanism.lower()}", values,
                                  **_python_kwargs(scram_server, mechanism, "alice")) == values


@pytest.mark.parametrize("mechanism", SCRAM)
def test_aiokafka(scram_server, mechanism):
    values = [b"a1", b"a2"]
    assert aiokafka_roundtrip(f"aio-{mechanism.lower()}", values,
                              **_python_kwargs(scram_server, mechanism, "b,o=b")) == values


KAFKAJS_ROUNDTRIP = """
const kafka = new kafkajs.Kafka({ clientId: 'scram-test', brokers: [ARGS.broker], logLevel: kafkajs.logLevel.NOTHING,
  sasl: { mechanism: ARGS.mechanism, username: ARGS.user, password: ARGS.password }, ssl: false,
  connectionTimeout: 5000, requestTimeout: 10000, retry: { retries: 2 } });
if (ARGS.password === 'nope') {
  const admin = kafka.admin();
  try { await admin.connect(); await admin.disconnect(); return 'connected'; }
  catch (e) { return e.name + ': ' + e.message; }
}
const producer = kafka.producer();
await producer.connect();
await producer.send({ topic: ARGS.topic, messages: ARGS.values.map((value) => ({ value })) });
await producer.disconnect();
const consumer = kafka.consumer({ groupId: 'scram-kafkajs' });
await consumer.connect();
await consumer.subscribe({ topic: ARGS.topic, fromBeginning: true });
const got = [];
await new Promise((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error('no records in 20 s')), 20000);
  consumer.run({ eachMessage: async ({ message }) => {
    got.push(message.value.toString());
    if (got.length >= ARGS.values.length) { clearTimeout(timer); resolve(); }
  } }).catch(reject);
});
await consumer.disconnect();
return got;
"""


@pytest.mark.parametrize("mechanism", SCRAM)
def test_kafkajs(scram_server, mechanism):
    args = {"broker": f"127.0.0.1:{scram_server.ports['SASL_PLAINTEXT']}", "mechanism": mechanism.lower(),
            "user": "b,o=b", "password": USERS["b,o=b"], "topic": f"js-{mechanism.lower()}", "values": ["j1", "j2"]}
    assert run_node(KAFKAJS_ROUNDTRIP, args) == ["j1", "j2"]
    refused = run_node(KAFKAJS_ROUNDTRIP, {**args, "password": "nope"})
    assert "SASL" in refused and "failed" in refused.lower(), refused


@pytest.mark.parametrize("first", [b"y,,n=alice,r=abc", b"p=tls-unique,,n=alice,r=abc", b"n,,n=alice,r=ab c",
                                   "n,,n=alice,r=abé".encode(), b"n,,n=alice,r="])
def test_client_first_messages_kafka_refuses(first):
    """Kafka's server takes only the "n" flag (no channel binding) and a printable ASCII nonce."""
    from compactlog.errors import SaslAuthenticationFailedError
    from compactlog.security.scram import ScramServer, make_credential

    stored = make_credential("SCRAM-SHA-256", "pw")
    with pytest.raises(SaslAuthenticationFailedError, match="client-first"):
        ScramServer("SCRAM-SHA-256", lambda u, m: stored).step(first)


def test_a_final_nonce_with_a_prefix_that_is_not_printable_is_refused():
    from compactlog.errors import SaslAuthenticationFailedError
    from compactlog.security.scram import ScramServer, make_credential

    stored = make_credential("SCRAM-SHA-256", "pw")
    client, server = Rdkafka202Scram("SCRAM-SHA-256", "alice", "pw", seed=4), ScramServer("SCRAM-SHA-256",
                                                                                          lambda u, m: stored)
    with pytest.raises(SaslAuthenticationFailedError, match="printable"):
        server.step(client.final(server.step(client.first()), nonce_of=lambda c, s: "é" + s))
