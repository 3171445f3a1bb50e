"""The numbers of forms and URL parameters, read with a bound, and the error that names a bad field.

Python's ``int()`` reads digits of any script (``int('٣') == 3``) and refuses a string over 4,300
digits with advice about ``sys.set_int_max_str_digits``; Kafka's tools read a field as Java's
``Long.parseLong`` does: an optional sign and ASCII digits, within the type's range. Every number a
page takes from a form or a query goes through :func:`whole_number` (or :func:`decimal`), whose
refusal names the field, says what it takes and shows at most the start of what was typed, so a
5,000-digit value is answered by one short line on a 400 page.
"""

from __future__ import annotations

import math

from ..errors import shown  # noqa: F401 (the pages quote refused values with it)
from ..numbers import INT_MAX, LONG_MAX, LONG_MIN, read_decimal, read_integer  # noqa: F401 (the pages take the bounds from here)


class FieldError(ValueError):
    """A form or query field whose value cannot be used; the message names the field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def whole_number(text: str | None, field: str, low: int = LONG_MIN, high: int = LONG_MAX,
                 what: str | None = None) -> int:
    """``text`` as a whole number in [low, high]; otherwise a FieldError naming ``field`` (``what``
    is how the message calls it, default the field's name)."""
    what = what or field
    value = (text or "").strip()
    if not value:
        raise FieldError(field, f"Give the {what}: a whole number.")
    number = read_integer(value)
    if number is None:
        raise FieldError(field, f"The {what} must be a whole number, got {shown(value)}.")
    if low <= number <= high:
        return number
    too_low = number < low
    bound = f"at least {low:,}" if too_low else f"at most {high:,}"
    raise FieldError(field, f"The {what} must be {bound}, got {shown(value)}.")


def optional_whole_number(text: str | None, field: str, low: int = LONG_MIN, high: int = LONG_MAX,
                          what: str | None = None) -> int | None:
    """As :func:`whole_number`, with None for an empty field."""
    return None if not (text or "").strip() else whole_number(text, field, low, high, what)


def decimal(text: str | None, field: str, low: float, high: float, what: str | None = None) -> float:
    """``text`` as a finite decimal number in [low, high] (ASCII digits, an optional exponent)."""
    what = what or field
    value = (text or "").strip()
    if not value:
        raise FieldError(field, f"Give the {what}: a number.")
    number = read_decimal(value)
    if number is None:
        raise FieldError(field, f"The {what} must be a number, got {shown(value)}.")
    if not math.isfinite(number) or not low <= number <= high:
        raise FieldError(field, f"The {what} must be between {low:g} and {high:g}, got {shown(value)}.")
    return number
