"""consume --group with an empty or blank id is one line before any client starts: librdkafka takes a blank
group.id as none at all (an empty one silently read as no group), and confluent-kafka's Consumer then
aborts the whole process on an assertion (exit 134)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from compactlog.cli import main


@pytest.mark.parametrize("group, shown", [("", "''"), (" ", "' '"), ("\t", "'\\t'")])
def test_a_blank_group_id_is_refused_in_one_line(group, shown):
    result = CliRunner().invoke(main, ["consume", "--bootstrap-server", "127.0.0.1:1", "--topic", "t",
                                       "--group", group, "--max-messages", "1"])
    assert result.exit_code == 2, result.output
    assert result.output.splitlines()[-1] == (
        f"Error: Invalid value for '--group': {shown}: to use the group management or offset commit APIs, "
        "a group id must be given that is not empty or only spaces")
