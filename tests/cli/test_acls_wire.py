"""acls --bootstrap-server against a real ``compactlog serve`` (CreateAcls, DescribeAcls, DeleteAcls through
librdkafka): Kafka's tool's output, the same lines as over the data directory, which agrees with what the
broker stored once it stops; a bad principal, operation or host is one line naming the flag."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("confluent_kafka")

from compactlog.cli import main  # noqa: E402

TOPIC_T = "ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)"
GROUP_G = "ResourcePattern(resourceType=GROUP, name=g, patternType=LITERAL)"
PREFIXED = "ResourcePattern(resourceType=TOPIC, name=team-, patternType=PREFIXED)"


def _serving(data_dir: Path, overrides: dict[str, str]):
    spec = importlib.util.spec_from_file_location("_acls_wire_wire", Path(__file__).parents[1] / "server" / "wire.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.serving(data_dir, overrides)


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
