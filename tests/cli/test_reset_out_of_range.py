"""consumer-groups --reset-offsets with an offset outside the log (--to-offset, --shift-by, --from-file): the
offset is kept within the log and kafka-consumer-groups' warning naming both is printed on standard error."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("confluent_kafka")

from compactlog.cli import main  # noqa: E402


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    spec = importlib.util.spec_from_file_location("_reset_range_wire", Path(__file__).parents[1] / "server" / "wire.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with mod.serving(tmp_path_factory.mktemp("reset-range") / "data") as s:
        b = s.bootstrap
        for args, stdin in [(("topics", "--create", "--topic", "r"), None), (("produce", "--topic", "r"), "a\nb\nc\n"),
                            (("consume", "--topic", "r", "--group", "g", "--from-beginning"), None)]:
            res = CliRunner().invoke(main, [args[0], "--bootstrap-server", b, *args[1:]], input=stdin)
            assert res.exit_code == 0, res.output
        yield s


HIGHER = "WARN New offset ({}) is higher than latest offset for topic partition r-0. Value will be set to 3\n"
LOWER = "WARN New offset ({}) is lower than earliest offset for topic partition r-0. Value will be set to 0\n"


@pytest.mark.parametrize("scenario, warning", [
    (("--to-offset", "10"), HIGHER.format(10)), (("--shift-by", "-10"), LOWER.format(-7)),
    (("--shift-by", "5"), HIGHER.format(8)), (("--to-offset", "2"), ""), (("--from-file", "PLAN"), HIGHER.format(99)),
])
def test_an_offset_outside_the_log_is_kept_within_it_with_kafkas_warning(broker, tmp_path, scenario, warning):
    plan = tmp_path / "plan.csv"
    plan.write_text("r,0,99\n")
    scenario = tuple(str(plan) if a == "PLAN" else a for a in scenario)
    res = CliRunner().invoke(main, ["consumer-groups", "--bootstrap-server", broker.bootstrap, "--reset-offsets",
                                    "--group", "g", "--topic", "r", *scenario, "--dry-run"])
    assert res.exit_code == 0, res.output
    assert res.stderr == warning
    expected = "2" if scenario == ("--to-offset", "2") else "0" if warning.startswith("WARN New offset (-") else "3"
    assert res.stdout.splitlines()[1].split() == ["g", "r", "0", expected]
