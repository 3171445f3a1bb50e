"""acls --bootstrap-server against a real ``compactlog serve`` (CreateAcls, DescribeAcls, DeleteAcls through
librdkafka): Kafka's tool's output, the same lines as over the data directory, which agrees with what the
broker stored once it stops; a bad principal, operation or host is one line naming the flag."""

from __future__ import annotations

import importlib.util
import socket
import struct
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("confluent_kafka")

from compactlog.cli import main  # noqa: E402

TOPIC_T = "ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)"
GROUP_G = "ResourcePattern(resourceType=GROUP, name=g, patternType=LITERAL)"
PREFIXED = "ResourcePattern(resourceType=TOPIC, name=team-, patternType=PREFIXED)"


def _wire():
    """tests/server/wire.py, loaded by path (only tests/server's own tests have that directory on the path)."""
    spec = importlib.util.spec_from_file_location("_acls_wire_wire", Path(__file__).parents[1] / "server" / "wire.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _serving(data_dir: Path, overrides: dict[str, str]):
    return _wire().serving(data_dir, overrides)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    # the command line's PLAINTEXT connection is User:ANONYMOUS: once ACLs exist, only a super user may change them
    with _serving(tmp_path_factory.mktemp("acls-wire") / "data", {"super.users": "User:ANONYMOUS"}) as s:
        yield s


def acls(*args: str, input: str | None = None, code: int = 0) -> str:
    res = CliRunner().invoke(main, ["acls", *args], input=input)
    assert res.exit_code == code, (args, res.output, res.exception)
    return res.output


def block(head: str, *entries: str) -> str:
    return f"{head} \n " + "\n".join("\t" + e for e in entries) + " \n\n"


def entry(principal: str, op: str, permission: str = "ALLOW", host: str = "*") -> str:
    return f"(principal={principal}, host={host}, operation={op}, permissionType={permission})"


def test_add_list_remove_through_the_broker(broker):
    wire = ("--bootstrap-server", broker.bootstrap)
    out = acls(*wire, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Write",
               "--topic", "t")
    assert out == (block(f"Adding ACLs for resource `{TOPIC_T}`:", entry("User:alice", "READ"), entry("User:alice", "WRITE"))
                   + block(f"Current ACLs for resource `{TOPIC_T}`:", entry("User:alice", "READ"),
                           entry("User:alice", "WRITE")))
    acls(*wire, "--add", "--deny-principal", "User:eve", "--deny-host", "10.0.0.9", "--topic", "t")
    acls(*wire, "--add", "--consumer", "--allow-principal", "User:bob", "--topic", "team-", "--group", "g",
         "--resource-pattern-type", "prefixed")
    out = acls(*wire, "--add", "--allow-principal", "User:bob", "--operation", "Read", "--group", "g")
    assert out.endswith(block(f"Current ACLs for resource `{GROUP_G}`:", entry("User:bob", "READ")))

    listed = acls(*wire, "--list", "--topic", "t")
    assert listed == block(f"Current ACLs for resource `{TOPIC_T}`:", entry("User:alice", "READ"),
                           entry("User:alice", "WRITE"), entry("User:eve", "ALL", "DENY", "10.0.0.9"))
    mine = acls(*wire, "--list", "--principal", "User:bob")
    assert mine.startswith("ACLs for principal `User:bob`\n")
    assert block(f"Current ACLs for resource `{PREFIXED}`:", entry("User:bob", "READ"), entry("User:bob", "DESCRIBE")) in mine
    matching = acls(*wire, "--list", "--topic", "team-red", "--resource-pattern-type", "match")
    assert matching == block(f"Current ACLs for resource `{PREFIXED}`:", entry("User:bob", "READ"),
                             entry("User:bob", "DESCRIBE"))

    # --remove asks first: 'n' keeps them; no answer at all (no terminal) is an error that removes nothing
    out = acls(*wire, "--remove", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "t", input="n\n")
    assert out.startswith(f"Are you sure you want to remove ACLs: \n \t{entry('User:alice', 'READ')} \n from resource "
                          f"filter `{TOPIC_T}`? (y/n)\n")
    assert entry("User:alice", "READ") in out.split("(y/n)\n", 1)[1]
    out = acls(*wire, "--remove", "--topic", "t", input="", code=1)
    assert f"Are you sure you want to delete all ACLs for resource filter `{TOPIC_T}`? (y/n)" in out
    assert out.splitlines()[-1].startswith("Error: no answer")
    out = acls(*wire, "--remove", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "t", input="y\n")
    assert out.endswith(block(f"Current ACLs for resource `{TOPIC_T}`:", entry("User:alice", "WRITE"),
                              entry("User:eve", "ALL", "DENY", "10.0.0.9")))
    out = acls(*wire, "--remove", "--deny-principal", "User:eve", "--deny-host", "10.0.0.9", "--topic", "t", "--force")
    assert out == block(f"Current ACLs for resource `{TOPIC_T}`:", entry("User:alice", "WRITE"))
    over_wire = acls(*wire, "--list")

    broker.stop()
    local = acls("--data-dir", str(broker.data_dir), "--list")
    assert local == over_wire
    assert sorted(filter(None, local.split("\n\n"))) == sorted([
        block(f"Current ACLs for resource `{TOPIC_T}`:", entry("User:alice", "WRITE")).strip("\n"),
        block(f"Current ACLs for resource `{PREFIXED}`:", entry("User:bob", "READ"),
              entry("User:bob", "DESCRIBE")).strip("\n"),
        block(f"Current ACLs for resource `{GROUP_G}`:", entry("User:bob", "READ")).strip("\n"),
        block(f"Current ACLs for resource `{GROUP_G.replace('LITERAL', 'PREFIXED')}`:",
              entry("User:bob", "READ")).strip("\n")])
    acls("--data-dir", str(broker.data_dir), "--remove", "--topic", "t", "--force")
    assert TOPIC_T not in acls("--data-dir", str(broker.data_dir), "--list")
    broker.start()
    wire = ("--bootstrap-server", broker.bootstrap)
    assert acls(*wire, "--list") == acls("--data-dir", str(broker.data_dir), "--list")
    assert TOPIC_T not in acls(*wire, "--list")


@pytest.mark.parametrize("flags, flag", [
    (("--allow-principal", "alice"), "--allow-principal"),
    (("--deny-principal", "User:"), "--deny-principal"),
    (("--allow-principal", "User:a", "--operation", "Fly"), "--operation"),
    (("--allow-principal", "User:a", "--allow-host", ""), "--allow-host"),
    (("--deny-principal", "User:a", "--deny-host", " "), "--deny-host"),
])
def test_a_bad_entry_names_its_flag(broker, flags, flag):
    for target in (("--bootstrap-server", broker.bootstrap), ("--data-dir", str(broker.data_dir))):
        out = acls(*target, "--add", *flags, "--topic", "t", code=2)
        errors = [line for line in out.splitlines() if line.startswith("Error:")]
        assert len(errors) == 1 and f"'{flag}'" in errors[0], out


# A broker without an authorizer (Kafka's default: no authorizer.class.name) answers the ACL APIs with
# SECURITY_DISABLED (54) and these messages; `compactlog serve` always has one, so a proxy in front of it
# answers them so, and passes every other request through.
NO_AUTHORIZER = {29: ("describe_acls", "DescribeAcls", "No Authorizer is configured on the broker"),
                 30: ("create_acls", "CreateAcls", "No Authorizer is configured."),
                 31: ("delete_acls", "DeleteAcls", "No Authorizer is configured.")}


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _read_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", _recv_exactly(sock, 4))
    return _recv_exactly(sock, size)


def _security_disabled(payload: bytes) -> bytes | None:
    """The whole answer (with its size) an authorizer-less broker gives an ACL request; None for others."""
    import datetime

    from kio.schema.errors import ErrorCode
    from kio.serial import entity_reader, entity_writer

    api_key, version, correlation = struct.unpack_from(">hhi", payload)
    if api_key not in NO_AUTHORIZER:
        return None
    module, name, message = NO_AUTHORIZER[api_key]
    wire = _wire()
    req_cls = getattr(wire.module_of(module, version, "request"), f"{name}Request")
    resp = wire.module_of(module, version, "response")
    _header, used = entity_reader(req_cls.__header_schema__)(memoryview(payload), 0)
    body, _ = entity_reader(req_cls)(memoryview(payload), used)
    refused = dict(error_code=ErrorCode(54), error_message=message)
    nothing = datetime.timedelta(0)
    if api_key == 29:
        answer = resp.DescribeAclsResponse(throttle_time=nothing, resources=(), **refused)
    elif api_key == 30:
        answer = resp.CreateAclsResponse(throttle_time=nothing, results=tuple(
            resp.AclCreationResult(**refused) for _ in body.creations))
    else:
        answer = resp.DeleteAclsResponse(throttle_time=nothing, filter_results=tuple(
            resp.DeleteAclsFilterResult(matching_acls=(), **refused) for _ in body.filters))
    out = __import__("io").BytesIO()
    entity_writer(type(answer))(out, answer)
    out_bytes = struct.pack(">i", correlation) + (b"\0" if req_cls.__flexible__ else b"") + out.getvalue()
    return struct.pack(">i", len(out_bytes)) + out_bytes


@pytest.fixture(scope="module")
def no_authorizer(tmp_path_factory):
    """HOST:PORT of a proxy to a broker of its own (which advertises the proxy, so that every connection
    goes through it), answering the ACL APIs as a broker without an authorizer."""
    listener = socket.create_server(("127.0.0.1", 0))
    address = f"127.0.0.1:{listener.getsockname()[1]}"
    conns: list[socket.socket] = []

    def serve_one(client: socket.socket, port: int) -> None:
        with client:
            try:
                upstream = socket.create_connection(("127.0.0.1", port), timeout=30)
            except OSError:  # the broker behind the proxy is gone (its tests ended): the client is closed
                return
            conns.extend((client, upstream))
            try:
                while True:
                    payload = _read_frame(client)
                    answer = _security_disabled(payload)
                    if answer is None:
                        upstream.sendall(struct.pack(">i", len(payload)) + payload)
                        reply = _read_frame(upstream)
                        answer = struct.pack(">i", len(reply)) + reply
                    client.sendall(answer)
            except (ConnectionError, OSError):
                pass
            finally:
                upstream.close()

    def accept(port: int) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve_one, args=(client, port), daemon=True).start()

    with _serving(tmp_path_factory.mktemp("acls-no-authorizer") / "data",
                  {"advertised.listeners": f"PLAINTEXT://{address}"}) as s:
        threading.Thread(target=accept, args=(s.port,), daemon=True).start()
        try:
            yield address
        finally:
            listener.close()
            for c in conns:
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def test_a_broker_without_an_authorizer(no_authorizer):
    wire = ("--bootstrap-server", no_authorizer)
    out = acls(*wire, "--list", code=1)
    assert out == "Error: No Authorizer is configured on the broker\n"
    out = acls(*wire, "--add", "--allow-principal", "User:alice", "--topic", "t", code=1)
    assert out == (block(f"Adding ACLs for resource `{TOPIC_T}`:", entry("User:alice", "ALL"))
                   + "Error: No Authorizer is configured.\n")
    out = acls(*wire, "--remove", "--topic", "t", "--force", code=1)
    assert out == "Error: No Authorizer is configured.\n"


def test_exactly_one_target(broker, tmp_path):
    both = acls("--bootstrap-server", broker.bootstrap, "--data-dir", str(tmp_path), "--list", code=2)
    assert both.splitlines()[-1].startswith("Error: Give exactly one of --data-dir")
    assert acls("--list", code=2).splitlines()[-1].startswith("Error: Give exactly one of --data-dir")
