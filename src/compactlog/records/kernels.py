"""Binds the record kernels: the compiled ones when built, else the Python twin.

Set ``COMPACTLOG_NO_EXTENSIONS=1`` to force the twin (the test suite runs once each way).
``NATIVE`` tells which one is in use.
"""

from __future__ import annotations

import os

from . import _py
from ._py import (  # noqa: F401  (column numbers are part of the kernel contract)
    C_END,
    C_HDR_COUNT,
    C_HDR_POS,
    C_KEY_LEN,
    C_KEY_POS,
    C_OFFSET_DELTA,
    C_POS,
    C_TS_DELTA,
    C_VAL_LEN,
    C_VAL_POS,
    NCOLS,
    decode_headers,
)

NATIVE = False
encode_records = _py.encode_records
scan_records = _py.scan_records
decode_records = _py.decode_records
crc32c = _py.crc32c
summarize_records = _py.summarize_records
offset_map_put = _py.offset_map_put
offset_map_get = _py.offset_map_get
key_hash = _py.key_hash
gather_records = _py.gather_records
scan_many = _py.scan_many
header_versions = _py.header_versions
offset_map_set = _py.offset_map_set
murmur2 = _py.murmur2
partition_for_keys = _py.partition_for_keys

if not os.environ.get("COMPACTLOG_NO_EXTENSIONS"):
    try:
        from . import _native  # type: ignore[attr-defined]
    except ImportError:  # not built: the twin serves
        pass
    else:
        NATIVE = True
        encode_records = _native.encode_records
        scan_records = _native.scan_records
        decode_records = _native.decode_records
        crc32c = _native.crc32c
        summarize_records = _native.summarize_records
        offset_map_put = _native.offset_map_put
        offset_map_get = _native.offset_map_get
        key_hash = _native.key_hash
        gather_records = _native.gather_records
        scan_many = _native.scan_many
        header_versions = _native.header_versions
        offset_map_set = _native.offset_map_set
        murmur2 = getattr(_native, "murmur2", murmur2)
        partition_for_keys = getattr(_native, "partition_for_keys", partition_for_keys)
