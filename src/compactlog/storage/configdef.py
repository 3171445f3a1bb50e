"""The machinery behind the config table: typed keys, validators, parsing from strings, Kafka's wording.

Kept apart from the tables themselves (``topic_config.py``, ``broker_config.py``, ``cleaner_config.py``,
and those of the parts above the storage that add settings of their own) so that each table reads as
a list of declarations, in the way Kafka's ``LogConfig`` reads as one ``define(...)`` chain over
``ConfigDef``.

Three things here follow Kafka to the letter because people compare them with Kafka's output:

* error text: ``Invalid value <value> for configuration <name>: <reason>`` with ConfigDef's reasons
  (``Not a number of type INT``, ``Value must be at least 14``, ``String must be one of: ...``);
* the valid-values text of each validator (``[0,...]``, ``[0,...,1]``, ``[compact, delete]``), which fills
  the docs table;
* how values print (Java's ``toString``: ``true``, ``0.5``, ``1.0E-5``, lists joined by commas), which is
  what ``kafka-configs --describe`` shows.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Callable, Mapping

from ..errors import InvalidConfigError, shown
from ..numbers import INT_MAX, INT_MIN, LONG_MAX, LONG_MIN, read_integer

DOUBLE_MAX = 1.7976931348623157e308

TYPES = ("boolean", "string", "int", "long", "double", "list")
IMPORTANCES = ("high", "medium", "low")

# Java's Double.parseDouble without hex floats; NaN is left out on purpose (see parse_value).
_DOUBLE = re.compile(r"[+-]?(Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)")
_INT_RANGES = {"int": (INT_MIN, INT_MAX), "long": (LONG_MIN, LONG_MAX)}


def invalid(name: str, value: Any, reason: str) -> InvalidConfigError:
    """Kafka's ConfigException text, so messages can be compared with a real broker's. A long value is
    shown by its head and its length (``errors.shown``: Kafka repeats any value whole; a client may send
    megabytes, and the answer, the CLI's line and the logs stay short)."""
    return InvalidConfigError(f"Invalid value {shown(java_str(value), '')} for configuration {name}: {reason}")


# --- printing values as Java does ------------------------------------------------------------------

def java_double(x: float) -> str:
    """``Double.toString``: plain between 10^-3 and 10^7, otherwise ``d.dddE<n>``; always a fraction part."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0 or 1e-3 <= abs(x) < 1e7:
        text = repr(float(x))  # Python picks fixed notation throughout this range
        return text if "." in text else text + ".0"
    sign, digits, exponent = Decimal(repr(float(x))).as_tuple()
    shown = "".join(map(str, digits)).rstrip("0") or "0"
    power = len(digits) + int(exponent) - 1
    return f"{'-' if sign else ''}{shown[0]}.{shown[1:] or '0'}E{power}"


def java_str(value: Any) -> str:
    """A value the way Java's ``toString`` prints it (``null`` for None, ``[a, b]`` for a list)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(java_str(v) for v in value) + "]"
    return str(value)


def render(typ: str, value: Any) -> str | None:
    """ConfigDef.convertToString: what describe prints and what a normalized override stores."""
    if value is None:
        return None
    if typ == "list":
        return ",".join(str(v) for v in value)
    return java_str(value)


def _number(x: float) -> str:
    """A validator bound as Kafka prints it: ints stay ints (``between(0, 1)`` shows ``[0,...,1]``)."""
    return java_double(x) if isinstance(x, float) else str(x)


# --- validators --------------------------------------------------------------------------------------

class Validator:
    """Checks one parsed value. ``str()`` is the valid-values text of the docs, as in Kafka's docs."""

    def __call__(self, name: str, value: Any) -> None:  # pragma: no cover - interface
        raise NotImplementedError


@dataclass(frozen=True)
class Range(Validator):
    """Kafka's ``Range.atLeast`` / ``Range.between``; either bound may be open."""

    lo: int | float | None = None
    hi: int | float | None = None

    def __call__(self, name: str, value: Any) -> None:
        if self.lo is not None and value < self.lo:
            raise invalid(name, value, f"Value must be at least {_number(self.lo)}")
        if self.hi is not None and value > self.hi:
            raise invalid(name, value, f"Value must be no more than {_number(self.hi)}")

    def __str__(self) -> str:
        lo = "" if self.lo is None else _number(self.lo) + ","
        hi = "" if self.hi is None else "," + _number(self.hi)
        return f"[{lo}...{hi}]"


def at_least(lo: int | float) -> Range:
    return Range(lo, None)


def between(lo: int | float, hi: int | float) -> Range:
    return Range(lo, hi)


@dataclass(frozen=True)
class LevelOrDefault(Validator):
    """gzip's level rule: a range plus one sentinel outside it (-1 = the codec's own default)."""

    lo: int
    hi: int
    default: int

    def __call__(self, name: str, value: Any) -> None:
        if value != self.default and not self.lo <= value <= self.hi:
            raise invalid(name, value, f"Value must be between {self.lo} and {self.hi} or equal to {self.default}")

    def __str__(self) -> str:
        return f"[{self.lo},...,{self.hi}] or {self.default}"


@dataclass(frozen=True)
class ValidString(Validator):
    """One of a fixed set of strings, case-sensitive as in Kafka (``GZIP`` is not ``gzip``)."""

    choices: tuple[str, ...]

    def __call__(self, name: str, value: Any) -> None:
        if value not in self.choices:
            raise invalid(name, value, f"String must be one of: {', '.join(self.choices)}")

    def __str__(self) -> str:
        return "[" + ", ".join(self.choices) + "]"


def one_of(*choices: str) -> ValidString:
    return ValidString(tuple(choices))


@dataclass(frozen=True)
class ValidList(Validator):
    """Every item of a list is one of a fixed set; the error names the offending item, as Kafka's does."""

    item: ValidString

    def __call__(self, name: str, value: Any) -> None:
        for entry in value:
            self.item(name, entry)

    def __str__(self) -> str:
        return str(self.item)


def list_of(*choices: str) -> ValidList:
    return ValidList(ValidString(tuple(choices)))


@dataclass(frozen=True)
class Check(Validator):
    """A rule given as a predicate, the reason its error gives (``{name}``/``{value}`` filled in) and its docs text."""

    accepts: Callable[[Any], bool]
    reason: str
    text: str

    def __call__(self, name: str, value: Any) -> None:
        if not self.accepts(value):
            raise invalid(name, value, self.reason.format(name=name, value=java_str(value)))

    def __str__(self) -> str:
        return self.text


# --- keys --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ConfigKey:
    """One config: Kafka's name, type, default, validator, importance and our documentation.

    ``synonyms`` are the broker configs that supply the default of a topic config, highest priority first
    (``retention.ms`` <- ``log.retention.ms``, ``log.retention.minutes``, ``log.retention.hours``); the first
    is Kafka's "Server Default Property". ``effect`` is set for configs we accept and store for
    compatibility but that change nothing here (replication, tiered storage), and says why.
    """

    name: str
    type: str
    default: Any
    doc: str
    validator: Validator | None = None
    importance: str = "medium"
    synonyms: tuple[str, ...] = field(default=())
    effect: str = ""

    def __post_init__(self) -> None:
        # A typo in the table should fail at import, as ConfigDef.define fails on a bad default.
        if self.type not in TYPES:
            raise ValueError(f"{self.name}: unknown config type {self.type!r}")
        if self.importance not in IMPORTANCES:
            raise ValueError(f"{self.name}: unknown importance {self.importance!r}")
        if self.default is not None and self.validator is not None:
            self.validator(self.name, self.default)

    def parse(self, raw: Any) -> Any:
        """Parse a string (or an already typed value) and validate it."""
        value = parse_value(self.name, self.type, raw)
        if self.validator is not None:
            self.validator(self.name, value)
        return value

    def render(self, value: Any) -> str | None:
        """A value the way Kafka prints it in describe output."""
        return render(self.type, value)

    @property
    def valid_values(self) -> str:
        return str(self.validator) if self.validator is not None else ""

    @property
    def server_default_property(self) -> str | None:
        return self.synonyms[0] if self.synonyms else None


def setting(name: str, typ: str, default: Any, validator: Validator | None, doc: str,
            importance: str = "medium") -> ConfigKey:
    """A broker setting's key (no synonyms), its documentation last: the broker, cleaner and server tables
    read as one declaration per line this way, as Kafka's ``define(...)`` chains do."""
    return ConfigKey(name, typ, default, doc, validator, importance)


def parse_value(name: str, typ: str, raw: Any) -> Any:
    """Parse ``raw`` as Kafka's ``ConfigDef.parseType`` does for ``typ``; errors use Kafka's wording.

    Strings are trimmed first. Integers are plain ASCII digits with an optional sign and must fit the
    type (``3000000000`` is not an INT), as with Java's ``parseInt``/``parseLong``; Python's extras such
    as ``1_000`` are refused. Doubles take Java's forms (``1e-3``, ``.5``, ``2d``, ``Infinity``) but not
    ``NaN``, which would pass every range check. Lists split on commas with the blanks around them
    removed; an empty string is the empty list. Typed Python values are accepted where they fit.
    """
    if typ == "list":
        if isinstance(raw, (list, tuple)):
            return [str(item).strip() for item in raw]
        text = str(raw).strip()
        return re.split(r"\s*,\s*", text) if text else []
    if typ == "boolean":
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in ("true", "false"):
            return text == "true"
        raise invalid(name, raw, "Expected value to be either true or false")
    if typ == "string":
        return str(raw).strip()
    reason = f"Not a number of type {typ.upper()}"
    if isinstance(raw, bool):
        raise invalid(name, raw, reason)
    if typ == "double":
        if isinstance(raw, (int, float)) and not math.isnan(raw):
            return float(raw)
        text = str(raw).strip()
        if not _DOUBLE.fullmatch(text):
            raise invalid(name, raw, reason)
        return float(text.rstrip("fFdD"))
    lo, hi = _INT_RANGES[typ]
    value = _bounded_int(str(raw).strip())
    if value is None or not lo <= value <= hi:
        raise invalid(name, raw, reason)
    return value


def _bounded_int(text: str) -> int | None:
    """The integer ``text`` writes, as Java's ``parseLong`` reads it, or None when it is not one or is
    past any long (``numbers.read_integer``)."""
    value = read_integer(text)
    return value if value is not None and LONG_MIN <= value <= LONG_MAX else None


# --- server.properties ---------------------------------------------------------------------------------

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_BLANK = " \t\f"


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text (a ``server.properties`` file) as ``Properties.load`` does.

    Blank lines and lines whose first non-blank character is ``#`` or ``!`` are skipped. A line ending in
    an odd number of backslashes continues on the next one, whose leading blanks are dropped. The key
    ends at the first unescaped ``=``, ``:`` or blank; blanks and one ``=`` or ``:`` after it are skipped
    and the rest is the value. ``\\t \\n \\r \\f \\uXXXX`` are escapes; a backslash before any other
    character stands for that character (``\\=``, ``\\:``, ``\\\\``). A later duplicate key wins.
    """
    out: dict[str, str] = {}
    pending: list[str] = []
    for line in re.split(r"\r\n|\r|\n", text):  # not str.splitlines: \f is a blank, not a line break
        line = line.lstrip(_BLANK)
        if not pending and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending.append(line[:-1])
            continue
        pending.append(line)
        key, value = _split_entry("".join(pending))
        out[key] = value
        pending = []
    if pending:  # the text ended in a lone backslash
        key, value = _split_entry("".join(pending))
        out[key] = value
    return out


def _split_entry(entry: str) -> tuple[str, str]:
    i = 0
    while i < len(entry) and entry[i] not in "=:" + _BLANK:
        i += 2 if entry[i] == "\\" else 1
    i = min(i, len(entry))
    key, rest = entry[:i], entry[i:].lstrip(_BLANK)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_BLANK)
    return _unescape(key), _unescape(rest)


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 == len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2:i + 6]):
            out.append(chr(int(text[i + 2:i + 6], 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def describe_key(key: ConfigKey) -> Mapping[str, str]:
    """The docs columns of one key, as Kafka's generated config docs show them."""
    return {
        "name": key.name,
        "type": key.type,
        "default": "null" if key.default is None else (render(key.type, key.default) or '""'),
        "valid_values": key.valid_values,
        "server_default_property": key.server_default_property or "",
        "importance": key.importance,
        "doc": key.doc + (f" No effect here: {key.effect}." if key.effect else ""),
    }


__all__ = [
    "DOUBLE_MAX", "INT_MAX", "INT_MIN", "LONG_MAX", "LONG_MIN", "Check", "ConfigKey", "LevelOrDefault", "Range",
    "ValidList", "ValidString", "Validator", "at_least", "between", "describe_key", "invalid", "java_double",
    "java_str", "list_of", "one_of", "parse_properties", "parse_value", "render",
]
