"""compactlog: a Kafka-compatible keyed commit log.

Kafka's segment files, log compaction and batch compression, embedded in Python::

    import compactlog
    with compactlog.open("data") as cl:
        cl.create_topic("prices", config={"cleanup.policy": "compact"})
        cl.produce("prices", b"10", key=b"p3")

The public names are imported on first use (PEP 562), so ``import compactlog`` (and the command line's
``--help``) does not load the storage engine, the cleaner or numpy before something needs them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .api import AppendResult, CompactLog, RecordMetadata, open  # noqa: A004
    from .errors import CompactLogError
    from .records.batch import Record

__version__ = "0.1.0"
__all__ = ["AppendResult", "CompactLog", "CompactLogError", "Record", "RecordMetadata", "open", "__version__"]

# The subpackages an ``import compactlog`` used to bind as attributes (importing the API imported them).
_SUBMODULES = frozenset({"api", "cleaner", "clock", "compaction", "errors", "producer", "records", "storage"})


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")  # which binds it here, as a plain import does
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        if name == "CompactLogError":
            from . import errors as home
        elif name == "Record":
            from .records import batch as home
        else:
            from . import api as home
        value = getattr(home, name)
    except AttributeError as exc:  # raised inside the import; passed on as is it would read "no such name"
        raise ImportError(f"cannot import {__name__}.{name}: {exc}") from exc
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, *_SUBMODULES})
