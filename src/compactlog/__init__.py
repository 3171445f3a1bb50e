"""compactlog: a Kafka-compatible keyed commit log.

Kafka's segment files, log compaction and batch compression, embedded in Python::

    import compactlog
    with compactlog.open("data") as cl:
        cl.create_topic("prices", config={"cleanup.policy": "compact"})
        cl.produce("prices", b"10", key=b"p3")
"""

from .api import AppendResult, CompactLog, RecordMetadata, open  # noqa: A004
from .errors import CompactLogError
from .records.batch import Record

__version__ = "0.1.0"
__all__ = ["AppendResult", "CompactLog", "CompactLogError", "Record", "RecordMetadata", "open", "__version__"]
