"""Names a package exports but imports on first use (PEP 562).

``import compactlog`` and ``import compactlog.records`` run at every start of the command line; loading
the storage engine or numpy there would cost every command, ``--help`` included. A package lists where
each public name lives, and the name's module is imported the first time someone asks for it.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping


def lazy_exports(package: str, homes: Mapping[str, str], submodules: frozenset[str] = frozenset()
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``: ``homes`` maps each exported name to the module
    (relative to the package, e.g. ``"batch"``) it is defined in; ``submodules`` are names that are whole
    submodules, bound as a plain ``import package.name`` binds them."""
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str) -> Any:
        if name in submodules:
            return importlib.import_module(f"{package}.{name}")
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        try:
            value = getattr(importlib.import_module(f"{package}.{home}"), name)
        except AttributeError as exc:  # raised inside the import; passed on as is it would read "no such name"
            raise ImportError(f"cannot import {package}.{name}: {exc}") from exc
        namespace[name] = value  # later lookups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *homes, *submodules})

    return __getattr__, __dir__
