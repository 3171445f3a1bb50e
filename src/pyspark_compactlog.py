"""Spark finds this module by its name and registers ``DefaultSource`` as the ``compactlog`` format."""

from compactlog.spark.source import CompactLogDataSource as DefaultSource

__all__ = ["DefaultSource"]
