"""acls --remove takes kafka-acls' own selection: --allow-principal/--deny-principal with their hosts ('*'
when none is given) and --operation (All when none is given), matched exactly on each resource flag; --force
is accepted (scripts pass it to skip Kafka's confirmation). It was refused as a usage error."""

from __future__ import annotations

from click.testing import CliRunner

import compactlog
from compactlog.cli import main


def acls(data, *args: str):
    return CliRunner().invoke(main, ["acls", "--data-dir", str(data), *args])


def test_remove_as_kafka_acls_selects(tmp_path):
    data = tmp_path / "data"
    with compactlog.open(data) as cl:
        cl.create_topic("t", 1)
    assert acls(data, "--add", "--allow-principal", "User:bob", "--operation", "Read", "--operation", "Write",
                "--topic", "t", "--allow-host", "10.0.0.1").exit_code == 0
    assert acls(data, "--add", "--allow-principal", "User:bob", "--topic", "t").exit_code == 0  # operation All
    assert acls(data, "--add", "--deny-principal", "User:eve", "--operation", "Read", "--topic", "t").exit_code == 0

    result = acls(data, "--remove", "--allow-principal", "User:bob", "--operation", "Read", "--topic", "t", "--force")
    assert (result.exit_code, result.output) == (0, "")  # bob reads from 10.0.0.1 only: '*' matches nothing
    result = acls(data, "--remove", "--allow-principal", "User:bob", "--operation", "Read", "--topic", "t",
                  "--allow-host", "10.0.0.1", "--force")
    assert (result.exit_code, result.output) == (0, "Removed TOPIC:LITERAL:t  ALLOW User:bob from host 10.0.0.1 to READ\n")
    result = acls(data, "--remove", "--allow-principal", "User:bob", "--topic", "t")
    assert (result.exit_code, result.output) == (0, "Removed TOPIC:LITERAL:t  ALLOW User:bob from host * to ALL\n")
    result = acls(data, "--remove", "--deny-principal", "User:eve", "--operation", "Read", "--topic", "t")
    assert (result.exit_code, result.output) == (0, "Removed TOPIC:LITERAL:t  DENY User:eve from host * to READ\n")
    assert acls(data, "--list").output == "TOPIC:LITERAL:t  ALLOW User:bob from host 10.0.0.1 to WRITE\n"

    result = acls(data, "--remove", "--allow-principal", "User:bob")
    assert result.exit_code == 2
    assert result.output.splitlines()[-1] == "Error: --remove needs a resource (--topic, --group, --cluster) or --principal"
