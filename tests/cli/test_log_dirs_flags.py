"""log-dirs --broker-list refuses a value that is not a broker id as every command refuses a flag's value:
'Invalid value for ...', exit 2, before any broker is asked (it was a bare 'Error: --broker-list: ...', exit 1)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from compactlog.cli import main


@pytest.mark.parametrize("value, why", [("x", "'x' is not a valid integer."), ("1,-1", "-1 is not in the range x>=0."),
                                        ("9" * 20, "'99999999999999999999' is not in the range 0<=x<=2147483647.")])
def test_a_bad_broker_id_is_a_usage_error(value, why):
    result = CliRunner().invoke(main, ["log-dirs", "--bootstrap-server", "127.0.0.1:1", "--describe",
                                       "--broker-list", value])
    assert (result.exit_code, result.output.splitlines()[-1]) == (2, f"Error: Invalid value for '--broker-list': {why}")
