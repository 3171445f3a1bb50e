"""acls --remove takes kafka-acls' own selection: --allow-principal/--deny-principal with their hosts ('*'
when none is given) and --operation (All when none is given), matched exactly on each resource flag; without
them, every ACL of the resource. It asks first, as Kafka's tool does, unless --force; then prints the
resource's ACLs left, in Kafka's words."""

from __future__ import annotations

from click.testing import CliRunner

import compactlog
from compactlog.cli import main

T = "ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)"


def acls(data, *args: str, input: str | None = None):
    return CliRunner().invoke(main, ["acls", "--data-dir", str(data), *args], input=input)


def current(*entries: str) -> str:
    return f"Current ACLs for resource `{T}`: \n " + "\n".join("\t" + e for e in entries) + " \n\n"


def entry(principal: str, op: str, permission: str = "ALLOW", host: str = "*") -> str:
    return f"(principal={principal}, host={host}, operation={op}, permissionType={permission})"


def test_remove_as_kafka_acls_selects(tmp_path):
    data = tmp_path / "data"
    with compactlog.open(data) as cl:
        cl.create_topic("t", 1)
    assert acls(data, "--add", "--allow-principal", "User:bob", "--operation", "Read", "--operation", "Write",
                "--topic", "t", "--allow-host", "10.0.0.1").exit_code == 0
    assert acls(data, "--add", "--allow-principal", "User:bob", "--topic", "t").exit_code == 0  # operation All
    assert acls(data, "--add", "--deny-principal", "User:eve", "--operation", "Read", "--topic", "t").exit_code == 0
    everything = current(entry("User:bob", "READ", host="10.0.0.1"), entry("User:bob", "WRITE", host="10.0.0.1"),
                         entry("User:bob", "ALL"), entry("User:eve", "READ", "DENY"))
    assert acls(data, "--list").output == everything

    result = acls(data, "--remove", "--allow-principal", "User:bob", "--operation", "Read", "--topic", "t", "--force")
    assert (result.exit_code, result.output) == (0, everything)  # bob reads from 10.0.0.1 only: '*' matches nothing
    result = acls(data, "--remove", "--allow-principal", "User:bob", "--operation", "Read", "--topic", "t",
                  "--allow-host", "10.0.0.1", "--force")
    assert (result.exit_code, result.output) == (0, current(entry("User:bob", "WRITE", host="10.0.0.1"),
                                                            entry("User:bob", "ALL"), entry("User:eve", "READ", "DENY")))
    result = acls(data, "--remove", "--allow-principal", "User:bob", "--topic", "t", input="Y\n")
    question = f"Are you sure you want to remove ACLs: \n \t{entry('User:bob', 'ALL')} \n from resource filter `{T}`? (y/n)\n"
    assert (result.exit_code, result.output) == (0, question + current(entry("User:bob", "WRITE", host="10.0.0.1"),
                                                                       entry("User:eve", "READ", "DENY")))
    result = acls(data, "--remove", "--deny-principal", "User:eve", "--operation", "Read", "--topic", "t", "--force")
    assert (result.exit_code, result.output) == (0, current(entry("User:bob", "WRITE", host="10.0.0.1")))

    result = acls(data, "--remove", "--allow-principal", "User:bob")
    assert result.exit_code == 2
    assert result.output.splitlines()[-1] == ("Error: You must provide at least one resource: --topic <topic> or "
                                              "--cluster or --group <group>")
    result = acls(data, "--remove", "--principal", "User:bob", "--topic", "t", "--force")
    assert result.exit_code == 2
    assert result.output.splitlines()[-1] == "Error: The --principal option is only available if --list is set"


def test_remove_asks_first(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    assert acls(data, "--add", "--allow-principal", "User:bob", "--topic", "t").exit_code == 0
    question = f"Are you sure you want to delete all ACLs for resource filter `{T}`? (y/n)\n"
    result = acls(data, "--remove", "--topic", "t", input="n\n")  # anything but y keeps them
    assert (result.exit_code, result.output) == (0, question + current(entry("User:bob", "ALL")))
    result = acls(data, "--remove", "--topic", "t", input="")  # nothing to read: Kafka's tool fails too
    assert result.exit_code == 1
    assert result.output == question + "Error: no answer to the question on standard input (give --force to remove " \
                                       "without asking)\n"
    assert acls(data, "--list").output == current(entry("User:bob", "ALL"))
    result = acls(data, "--remove", "--topic", "t", input="y\n")
    assert (result.exit_code, result.output) == (0, question)
    assert acls(data, "--list").output == ""


def test_add_refusals_in_kafkas_words(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    result = acls(data, "--add", "--allow-principal", "User:bob", "--topic", "t", "--resource-pattern-type", "match")
    assert result.exit_code == 2
    assert result.output.splitlines()[-1] == ("Error: A '--resource-pattern-type' value of 'MATCH' is not valid when "
                                              "adding acls.")
    result = acls(data, "--add", "--topic", "t")
    assert result.output.splitlines()[-1] == ("Error: You must specify one of: --allow-principal, --deny-principal "
                                              "when trying to add ACLs.")
    result = acls(data, "--add", "--producer", "--allow-principal", "User:bob", "--operation", "Read", "--topic", "t")
    assert result.output.splitlines()[-1] == "Error: --producer cannot be used with --operation"
    result = acls(data, "--add", "--allow-principal", "User:bob", "--operation", "Write", "--topic", "t", "--group", "g")
    assert (result.exit_code, result.output.splitlines()[-1]) == (
        2, "Error: ResourceType GROUP only supports operations Read, Describe, Delete, All")
    assert acls(data, "--list").output == ""  # nothing added, not even to the topic
    result = acls(data, "--add", "--producer", "--consumer", "--allow-principal", "User:p", "--topic", "t",
                  "--group", "g")
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"Adding ACLs for resource `{T}`: \n \t{entry('User:p', 'READ')}\n"
                                    f"\t{entry('User:p', 'DESCRIBE')}\n\t{entry('User:p', 'WRITE')}\n"
                                    f"\t{entry('User:p', 'CREATE')} \n\n")
