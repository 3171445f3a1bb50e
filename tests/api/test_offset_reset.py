"""The offset-reset rule and its date-time, in one home (``compactlog.offset_reset``) for the command line
and the console: a date-time without a zone is UTC wherever the command runs, as Kafka's tool reads it."""

from __future__ import annotations

import re
import time

import click
import pytest

from compactlog.errors import InvalidRequestError
from compactlog.offset_reset import new_offset, parse_datetime

H = 3_600_000
NEW_YEAR = 1_767_225_600_000  # 2026-01-01T00:00:00Z


@pytest.fixture
def far_from_utc(monkeypatch):
    """The process's local zone set to UTC-05:00 (New York in January), put back afterwards."""
    monkeypatch.setenv("TZ", "EST+05")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize("text, ms", [
    ("2026-01-01T00:00:00.000", NEW_YEAR),  # Kafka's form: no zone is UTC
    ("2026-01-01T00:00:00.000Z", NEW_YEAR),
    ("2026-01-01T01:00:00.000+01:00", NEW_YEAR),
    ("2026-01-01T01:00:00.000+0100", NEW_YEAR),
    ("2026-01-01T01:00:00.000+01", NEW_YEAR),
    ("2025-12-31T18:30:00.000-05:30", NEW_YEAR),
    ("2026-01-01T00:00:00", NEW_YEAR),  # the fraction may be left out
    ("2026-01-01T00:00:00.25", NEW_YEAR + 250),
    (" 1970-01-01T00:00:04.500 ", 4_500),
    ("1969-12-31T23:59:59.000", 0),  # before the epoch: 0, never a negative ListOffsets "latest"/"earliest"
    ("0001-01-01T00:00:00+14:00", 0),
    ("9999-12-31T23:59:59-14:00", 253_402_351_199_000),
])
def test_a_date_time_is_utc_unless_it_names_a_zone(text, ms, far_from_utc):
    assert parse_datetime(text) == ms


@pytest.mark.parametrize("text, says", [
    ("2026-01-01", "is not a date and time like 2026-01-01T00:00:00.000"),
    ("2026-01-01 00:00:00.000", "is not a date and time like"),
    ("yesterday", "is not a date and time like"),
    ("2026-13-01T00:00:00.000", "month must be in 1..12"),
    ("2026-01-01T00:00:00.000+24:00", "the offset +24:00 is not one a clock can have"),
    ("2026-01-01T00:00:00.000+01:60", "the offset +01:60 is not one a clock can have"),
])
def test_what_is_not_a_date_time_is_refused_with_its_text(text, says):
    with pytest.raises(InvalidRequestError, match=re.escape(says)):
        parse_datetime(text)


def test_the_reset_rule():
    assert new_offset("earliest", None, 5, 20, None) == 5
    assert new_offset("latest", None, 5, 20, None) == 20
    assert [new_offset("offset", v, 5, 20, None) for v in (2, 7, 99)] == [5, 7, 20]
    assert new_offset("datetime", 0, 5, 20, 12) == 12
    assert new_offset("datetime", 0, 5, 20, None) == 20  # no record that recent: the end
    with pytest.raises(ValueError, match="unknown reset target 'sideways'"):
        new_offset("sideways", None, 5, 20, None)


def test_the_command_line_and_the_console_read_a_date_time_alike(far_from_utc):
    """Both read a zoneless date-time as UTC through the one parser, whatever the local zone (the
    command line once read it as local time, five hours off here)."""
    from compactlog.cli.groups import parse_datetime as cli_parse
    from compactlog.console.pages import groups as console_groups

    assert cli_parse("2026-01-01T00:00:00.000") == NEW_YEAR == console_groups.parse_datetime("2026-01-01T00:00:00.000")
    assert console_groups.parse_datetime is parse_datetime and console_groups.new_offset is new_offset
    with pytest.raises(click.BadParameter, match="is not a date and time like"):
        cli_parse("2026-01-01")
