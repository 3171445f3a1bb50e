"""The record format: RecordBatch v2 bytes, CRC-32C, codecs and record kernels. Knows nothing of files.

The names below are loaded on first use (PEP 562): importing one submodule, ``records.codecs`` say, does
not load ``records.batch`` and numpy with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .batch import (
        CREATE_TIME,
        HEADER_SIZE,
        LOG_APPEND_TIME,
        LOG_OVERHEAD,
        BatchInfo,
        BatchSummary,
        Record,
        RecordBatch,
        build_batch,
        build_empty_batch,
        iter_batches,
        patch_header,
    )
    from .codecs import Codec, codec_from_name

__all__ = [
    "CREATE_TIME", "HEADER_SIZE", "LOG_APPEND_TIME", "LOG_OVERHEAD", "BatchInfo", "BatchSummary", "Codec", "Record",
    "RecordBatch", "build_batch", "build_empty_batch", "codec_from_name", "iter_batches", "patch_header",
]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        if name in ("Codec", "codec_from_name"):
            from . import codecs as home
        else:
            from . import batch as home
        value = getattr(home, name)
    except AttributeError as exc:  # raised inside the import; passed on as is it would read "no such name"
        raise ImportError(f"cannot import {__name__}.{name}: {exc}") from exc
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
