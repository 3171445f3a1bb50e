"""serve with an empty listeners= (or one of commas alone), or a super.users principal without its type, is
one line naming the setting, exit 1; the first was
an IndexError traceback reported as a bug (exit 3) once the broker looked for its first listener."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from compactlog.cli import main


@pytest.mark.parametrize("value, why", [("", "at least one listener is needed, as NAME://host:port"),
                                        (" , ,", "expected NAME://host:port")])
def test_no_listener_is_one_line(tmp_path, value, why):
    result = CliRunner().invoke(main, ["serve", "--data-dir", str(tmp_path / "data"), "--override", f"listeners={value}"])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert result.output.splitlines()[-1].endswith(f"for configuration listeners: {why}")


@pytest.mark.parametrize("value", ["admin", "User:admin;bob", ":x", "User:"])
def test_a_super_user_without_its_type_is_refused(tmp_path, value):
    """super.users=admin (the 'User:' forgotten) matched nobody, silently: the admin was not super. Kafka's
    authorizer refuses such a principal at start; so does serve, naming the setting."""
    result = CliRunner().invoke(main, ["serve", "--data-dir", str(tmp_path / "data"), "--override",
                                       "listeners=PLAINTEXT://127.0.0.1:0", "--override", f"super.users={value}"])
    assert result.exit_code == 1, result.output
    assert result.output.splitlines()[-1] == (
        f"Error: Invalid value {value} for configuration super.users: expected principals in format "
        "principalType:principalName separated by ';', as in User:admin;User:bob")
