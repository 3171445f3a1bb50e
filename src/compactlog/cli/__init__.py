"""The ``compactlog`` command line: Kafka's tools' flags over a local data directory.

Every command is a thin shell over one method of :class:`compactlog.CompactLog`; typed errors become
``Error: <message>`` with exit status 1.
"""

from __future__ import annotations

from .main import main

__all__ = ["main"]
