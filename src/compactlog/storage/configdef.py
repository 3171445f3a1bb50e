"""The machinery of a config table: typed keys, validators, parsing from strings, Kafka's error wording.

Kept apart from the table itself (``config.py``) so the table reads as a list of declarations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..errors import InvalidConfigError

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
DOUBLE_MAX = 1.7976931348623157e308

_TYPE_NAMES = {"int": "INT", "long": "LONG", "double": "DOUBLE", "boolean": "BOOLEAN", "string": "STRING", "list": "LIST"}


def invalid(name: str, value: Any, reason: str) -> InvalidConfigError:
    """Kafka's ConfigException text: ``Invalid value X for configuration Y: reason``."""
    return InvalidConfigError(f"Invalid value {value} for configuration {name}: {reason}")


class Validator:
    """Checks a parsed value; ``str()`` gives the valid-values text of the docs table."""

    def __call__(self, name: str, value: Any) -> None:  # pragma: no cover - interface
        raise NotImplementedError


@dataclass(frozen=True)
class Range(Validator):
    lo: float | None = None
    hi: float | None = None
    also: tuple = ()  # extra single values accepted outside the range (gzip level -1)

    def __call__(self, name: str, value: Any) -> None:
        if value in self.also:
            return
        if self.lo is not None and value < self.lo:
            if self.hi is None:
                raise invalid(name, value, f"Value must be at least {_num(self.lo)}")
            raise invalid(name, value, f"Value must be in {self}")
        if self.hi is not None and value > self.hi:
            if self.lo is None:
                raise invalid(name, value, f"Value must be no more than {_num(self.hi)}")
            raise invalid(name, value, f"Value must be in {self}")

    def __str__(self) -> str:
        if self.lo is not None and self.hi is not None:
            text = f"[{_num(self.lo)},...,{_num(self.hi)}]"
        elif self.lo is not None:
            text = f"[{_num(self.lo)},...]"
        else:
            text = f"[...,{_num(self.hi)}]"
        return text + "".join(f" or {_num(a)}" for a in self.also)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e18 else str(x)


@dataclass(frozen=True)
class OneOf(Validator):
    choices: tuple[str, ...]
    case_sensitive: bool = True

    def __call__(self, name: str, value: Any) -> None:
        ok = value in self.choices if self.case_sensitive else value.lower() in {c.lower() for c in self.choices}
        if not ok:
            raise invalid(name, value, f"String must be one of: {', '.join(self.choices)}")

    def __str__(self) -> str:
        return "[" + ", ".join(self.choices) + "]"


@dataclass(frozen=True)
class ListOf(Validator):
    choices: tuple[str, ...]

    def __call__(self, name: str, value: Any) -> None:
        for item in value:
            if item not in self.choices:
                raise invalid(name, ",".join(value), f"String must be one of: {', '.join(self.choices)}")

    def __str__(self) -> str:
        return "[" + ", ".join(self.choices) + "]"


@dataclass(frozen=True)
class Check(Validator):
    """A validator given as a function and its docs text."""

    fn: Callable[[str, Any], None]
    text: str

    def __call__(self, name: str, value: Any) -> None:
        self.fn(name, value)

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class ConfigKey:
    """One config: its Kafka name, type, default, validator and documentation."""

    name: str
    type: str
    default: Any
    doc: str
    validator: Validator | None = None
    importance: str = "medium"
    synonyms: Sequence[str] = field(default_factory=tuple)  # broker names, highest priority first
    effect: str = ""  # non-empty for configs accepted for compatibility but without effect here

    def parse(self, raw: Any) -> Any:
        """Parse a string (or an already typed value) and validate it."""
        value = parse_value(self.name, self.type, raw)
        if self.validator is not None:
            self.validator(self.name, value)
        return value

    def render(self, value: Any) -> str:
        """A value the way Kafka prints it in describe output."""
        if self.type == "list":
            return ",".join(value)
        if self.type == "boolean":
            return "true" if value else "false"
        return str(value)

    @property
    def valid_values(self) -> str:
        return str(self.validator) if self.validator is not None else ""


def parse_value(name: str, typ: str, raw: Any) -> Any:
    """Parse ``raw`` as Kafka's ConfigDef does for ``typ``; errors use Kafka's wording."""
    if typ == "list":
        if isinstance(raw, (list, tuple)):
            return [str(x).strip() for x in raw]
        text = str(raw).strip()
        return [p.strip() for p in text.split(",")] if text else []
    if not isinstance(raw, str):
        raw = str(raw).lower() if isinstance(raw, bool) else str(raw)
    text = raw.strip()
    try:
        if typ in ("int", "long"):
            value = int(text)
            limit = INT_MAX if typ == "int" else LONG_MAX
            if not -limit - 1 <= value <= limit:
                raise ValueError
            return value
        if typ == "double":
            return float(text)
    except ValueError:
        raise invalid(name, text, f"Not a number of type {_TYPE_NAMES[typ]}") from None
    if typ == "boolean":
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise invalid(name, text, "Expected value to be either true or false")
    return text


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text (``server.properties``): comments, ``=``/``:``/space, continuations."""
    out: dict[str, str] = {}
    logical: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].lstrip()
        i += 1
        if not logical and (not line or line[0] in "#!"):
            continue
        if _continues(line):
            logical.append(line[:-1])
            continue
        logical.append(line)
        entry = "".join(logical)
        logical = []
        key, value = _split_entry(entry)
        out[key] = value
    if logical:
        key, value = _split_entry("".join(logical))
        out[key] = value
    return out


def _continues(line: str) -> bool:
    n = len(line) - len(line.rstrip("\\"))
    return n % 2 == 1


def _split_entry(entry: str) -> tuple[str, str]:
    key = []
    i = 0
    while i < len(entry):
        ch = entry[i]
        if ch == "\\" and i + 1 < len(entry):
            key.append(entry[i + 1])
            i += 2
            continue
        if ch in "=: \t":
            break
        key.append(ch)
        i += 1
    rest = entry[i:].lstrip(" \t")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t")
    value = rest.encode("utf-8").decode("unicode_escape") if "\\" in rest else rest
    return "".join(key), value
