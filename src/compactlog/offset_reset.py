"""Resetting a consumer group's offsets, as ``kafka-consumer-groups --reset-offsets`` does: the one home
of the reset rule and of the date-time a ``--to-datetime`` reset reads.

The command line (``consumer-groups --reset-offsets``, through a broker) and the web console (the group
page's reset form, inside the broker) both plan resets with these pure functions; each only gathers
the figures the rule needs (log start, log end, the first offset at or after a time) its own way.

A date-time without a zone is UTC, as Kafka's tool reads it (its ``Utils.getDateTime`` appends ``Z``),
whatever the zone of the machine the command runs on.
"""

from __future__ import annotations

import datetime
import re

from .errors import InvalidRequestError, shown

EARLIEST, LATEST, OFFSET, DATETIME = "earliest", "latest", "offset", "datetime"
RESET_TARGETS = (EARLIEST, LATEST, OFFSET, DATETIME)
DATETIME_EXAMPLE = "2026-01-01T00:00:00.000"

# Kafka's yyyy-MM-dd'T'HH:mm:ss.SSS, then no zone (UTC), Z, or an offset as +hh, +hhmm or +hh:mm.
# The fraction may be left out or given to 1-9 digits (read as a fraction of a second, as ISO 8601 does).
_DATETIME = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})T(?P<time>\d{2}:\d{2}:\d{2})(?:\.(?P<fraction>\d{1,9}))?"
    r"(?P<zone>Z|(?P<sign>[+-])(?P<hh>\d{2})(?::?(?P<mm>\d{2}))?)?"
)
_EPOCH = datetime.datetime(1970, 1, 1)
_MS = datetime.timedelta(milliseconds=1)


def parse_datetime(text: str) -> int:
    """``2026-01-01T00:00:00.000`` (optionally ending in ``Z`` or an offset such as ``+01:00``) as
    milliseconds since the epoch; without a zone, UTC.

    A time before 1970 is 0: ListOffsets reads negative timestamps as "latest" (-1) and "earliest" (-2),
    and 0 already finds the first record. Raises InvalidRequestError naming the text otherwise.
    """
    m = _DATETIME.fullmatch(text.strip())
    if m is None:
        raise InvalidRequestError(f"{shown(text)} is not a date and time like {DATETIME_EXAMPLE} (UTC unless it ends "
                                  "in Z or an offset such as +01:00)")
    try:
        naive = datetime.datetime.fromisoformat(f"{m['date']}T{m['time']}")
        offset = datetime.timedelta(hours=int(m["hh"] or 0), minutes=int(m["mm"] or 0))
        if offset >= datetime.timedelta(hours=24) or int(m["mm"] or 0) >= 60:
            raise ValueError(f"the offset {m['zone']} is not one a clock can have")
    except ValueError as exc:
        raise InvalidRequestError(f"{shown(text)} is not a valid date and time: {exc}") from None
    ms = (naive - _EPOCH) // _MS + int((m["fraction"] or "0")[:3].ljust(3, "0"))
    ms -= (offset // _MS) * (-1 if m["sign"] == "-" else 1)  # 10:00+01:00 is 09:00 UTC
    return max(0, ms)


def new_offset(to: str, value: int | None, start: int, end: int, found: int | None) -> int:
    """Kafka's reset rule for one partition whose log spans [``start``, ``end``): earliest = the log
    start, latest = the log end, an offset (``value``) kept within [start, end], a date-time = ``found``,
    the first offset at or after it, or the end when no record is that recent."""
    if to == EARLIEST:
        return start
    if to == LATEST:
        return end
    if to == OFFSET:
        return min(max(value, start), end)
    if to == DATETIME:
        return end if found is None else found
    raise ValueError(f"unknown reset target {shown(to)}: one of {', '.join(RESET_TARGETS)}")
