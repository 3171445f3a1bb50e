"""serve with an empty listeners= (or one of commas alone) is one line naming the setting, exit 1; it was
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
