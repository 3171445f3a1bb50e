"""The ``compactlog`` command line: Kafka's tools' flags over a local data directory.

Every command is a thin shell over one method of :class:`compactlog.CompactLog`; typed errors become
``Error: <message>`` with exit status 1, usage errors exit 2, and anything else is reported as a bug in
compactlog with its traceback and exit status 3 (``common.error_surface``).
"""

from __future__ import annotations

from .main import main

__all__ = ["main"]
