"""Whole numbers typed by people and sent by clients, read as Kafka (Java) reads them.

Java's ``Long.parseLong`` takes an optional sign and ASCII digits, nothing else. Python's ``int()`` also
takes other scripts' digits (``int('٣') == 3``), ``_`` and surrounding spaces, and refuses a string over
4,300 digits with advice about ``sys.set_int_max_str_digits``. Every number that comes from a flag, a
form, a URL, a file or a config value is read here, so that all of them refuse the same things and
none converts thousands of digits.
"""

from __future__ import annotations

import re

INT_MIN, INT_MAX = -(2**31), 2**31 - 1  # Java's Integer.MAX_VALUE: partitions, counts, sizes Kafka keeps in an int
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1  # Java's long: offsets, timestamps, milliseconds
_INTEGER = re.compile(r"[+-]?[0-9]+")
_LONG_DIGITS = len(str(LONG_MAX))
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def read_integer(text: str) -> int | None:
    """The integer ``text`` writes (a sign, ASCII digits, leading zeros as many as you like), or None
    when it is not one. A value with more digits than any long is read as the nearest number just past
    a long on its side (``LONG_MAX + 1`` or ``LONG_MIN - 1``): every range check within a long refuses
    it, on the right side, and its digits are never converted."""
    if not _INTEGER.fullmatch(text):
        return None
    negative = text[0] == "-"
    digits = text.lstrip("+-").lstrip("0") or "0"
    if len(digits) > _LONG_DIGITS:
        return LONG_MIN - 1 if negative else LONG_MAX + 1
    return -int(digits) if negative else int(digits)


def read_decimal(text: str) -> float | None:
    """The decimal number ``text`` writes (``50``, ``12.5``, ``1e3``: ASCII digits, an optional sign and
    exponent), or None when it is not one. Python's float() also takes other scripts' digits, ``_``,
    ``nan`` and ``inf``; a value past a double's range is still read, as infinite, for the caller's
    range check to refuse."""
    return float(text) if _DECIMAL.fullmatch(text) else None
