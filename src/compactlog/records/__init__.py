"""The record format: RecordBatch v2 bytes, CRC-32C, codecs and record kernels. Knows nothing of files.

The names below are loaded on first use (PEP 562): importing one submodule, ``records.codecs`` say, does
not load ``records.batch`` and numpy with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

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


__getattr__, __dir__ = lazy_exports(__name__, {n: "codecs" if n in ("Codec", "codec_from_name") else "batch"
                                               for n in __all__})
