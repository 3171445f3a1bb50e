"""consumer-groups' reset inputs without a broker: the ISO-8601 durations of --by-duration, read as
Java's Duration.parse reads them, and the CSV plans of --export and --from-file."""

from __future__ import annotations

import pytest

from compactlog.cli.group_reset import parse_duration, plan_csv, read_plan

H, M, S, D = 3_600_000, 60_000, 1000, 86_400_000


@pytest.mark.parametrize("text, ms", [
    ("PT30M", 30 * M), ("P1DT2H", D + 2 * H), ("PT0.5S", 500), ("PT1.123456789S", 1123), ("pt1m", M),
    ("-PT6H", -6 * H), ("PT-6H3M", -6 * H + 3 * M), ("P2D", 2 * D), ("PT-0.5S", -500), ("PT1,5S", 1500),
    ("+PT1S", S), ("P0D", 0), ("PT36H", 36 * H),
])
def test_durations_read_as_java_reads_them(text, ms):
    assert parse_duration(text) == ms


@pytest.mark.parametrize("text", ["P", "PT", "P1DT", "P1Y", "P1W", "1D", "PT1.5", "PT1H1H", "T1H", "", "PT\u0663H",
                                  "P" + "9" * 5000 + "D", "PT9223372036854775807H", " PT1H"])
def test_other_durations_are_refused_with_one_line(text):
    with pytest.raises(ValueError) as refused:
        parse_duration(text)
    message = str(refused.value)
    assert "\n" not in message and len(message) < 200, message


def test_export_and_from_file_agree(tmp_path):
    plans = {"g": {("t", 1): 5, ("t", 0): 7, ("u,v", 0): 1}}
    one = plan_csv(plans, with_group=False)
    assert one == 't,0,7\nt,1,5\n"u,v",0,1\n'  # a comma in a name is quoted, as a CSV writer quotes it
    path = tmp_path / "plan.csv"
    path.write_text(one)
    assert read_plan(str(path), ["g"]) == plans
    path.write_text(plan_csv({"a": {("t", 0): 1}, "b": {("t", 0): 2}}, with_group=True))
    assert read_plan(str(path), ["a", "b"]) == {"a": {("t", 0): 1}, "b": {("t", 0): 2}}


@pytest.mark.parametrize("content, groups, message", [
    ("t,0\n", ["g"], "line 1: expected topic,partition,offset, got 't,0'"),
    ("t,0,1\n", ["a", "b"], "line 1: expected group,topic,partition,offset, got 't,0,1'"),
    ("t,0,1\nt,x,1\n", ["g"], "line 2: 'x' is not a valid integer."),
    ("t,0," + "9" * 5000 + "\n", ["g"], "line 1: '" + "9" * 50 + "'... (5000 characters) is not in the range"),
    ("t,0,-1\n", ["g"], "line 1: -1 is not in the range x>=0."),
    (",0,1\n", ["g"], "line 1: the topic is empty"),
    ("\n\n", ["g"], "holds no offsets"),
])
def test_a_bad_plan_is_named_by_file_and_line(tmp_path, content, groups, message):
    path = tmp_path / "plan.csv"
    path.write_text(content)
    with pytest.raises(ValueError, match=None) as refused:
        read_plan(str(path), groups)
    assert message in str(refused.value) and str(path) in str(refused.value)


def test_a_plan_that_is_not_text_is_named(tmp_path):
    path = tmp_path / "plan.csv"
    path.write_bytes(b"t,0,\xff\n")
    with pytest.raises(ValueError, match="is not UTF-8 text"):
        read_plan(str(path), ["g"])
    with pytest.raises(ValueError, match="cannot read"):
        read_plan(str(tmp_path / "missing.csv"), ["g"])
