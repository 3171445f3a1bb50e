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

from typing import TYPE_CHECKING

from .lazy import lazy_exports

if TYPE_CHECKING:
    from .api import AppendResult, CompactLog, RecordMetadata, open  # noqa: A004
    from .errors import CompactLogError
    from .records.batch import Record

__version__ = "0.1.0"
__all__ = ["AppendResult", "CompactLog", "CompactLogError", "Record", "RecordMetadata", "open", "__version__"]

# The subpackages an ``import compactlog`` used to bind as attributes (importing the API imported them).
_SUBMODULES = frozenset({"api", "cleaner", "clock", "compaction", "errors", "producer", "records", "storage"})

__getattr__, __dir__ = lazy_exports(__name__, {"CompactLogError": "errors", "Record": "records.batch",
                                               **{n: "api" for n in ("AppendResult", "CompactLog", "RecordMetadata",
                                                                     "open")}}, _SUBMODULES)
