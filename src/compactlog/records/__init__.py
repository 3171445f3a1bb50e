"""The record format: RecordBatch v2 bytes, CRC-32C, codecs and record kernels. Knows nothing of files."""

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
