"""Building kio response entities for whichever version a request came in.

Each API version has its own generated classes with only that version's fields. ``make`` builds one
from keyword values and drops the fields the version does not have, so one handler serves every
version; ``schema`` gives the module holding a request's response classes.
"""

from __future__ import annotations

import dataclasses
import sys
from functools import cache
from types import ModuleType
from typing import Any

from .protocol import Request
from .versions import response_class


@cache
def _fields(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


def make(cls: type, **values: Any) -> Any:
    """``cls(**values)`` with the values of fields ``cls`` lacks left out."""
    names = _fields(cls)
    return cls(**{k: v for k, v in values.items() if k in names})


def schema(req: Request) -> ModuleType:
    """The kio module of the response to ``req`` (its nested classes are attributes)."""
    return sys.modules[response_class(req.api_key, req.api_version).__module__]


def response(req: Request, **values: Any) -> Any:
    """The top-level response entity for ``req``."""
    return make(response_class(req.api_key, req.api_version), **values)
