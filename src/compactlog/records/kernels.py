"""Binds the record kernels: the compiled ones when built, else the Python twin.

Set ``COMPACTLOG_NO_EXTENSIONS=1`` to force the twin (the test suite runs once each way).
``NATIVE`` tells which one is in use. Both are held to ``RecordKernels`` (``_protocols.py``), return
the named results of ``results.py`` and raise ``KernelError`` for records that do not parse; the
column numbers of their tables come from ``layout.py``.

The twin is imported only when it serves (no compiled kernels) or when one of its own names is asked
for (``kernels._py``, ``kernels.decode_headers``; likewise ``KERNELS`` and ``RecordKernels`` load
``_protocols.py``): a process that opens a directory and reads nothing does not pay for either.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from .layout import (  # noqa: F401  (column numbers are part of the kernel contract)
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
    LAYOUT,
    NCOLS,
    POSITION_COLUMNS,
)
from .results import BinaryColumn, DecodedColumns, KernelError, MapPut, RecordsSummary  # noqa: F401

if TYPE_CHECKING:
    from . import _py
    from ._protocols import KERNELS, RecordKernels  # noqa: F401  (KERNELS: every kernel's name)
    from ._py import decode_headers  # noqa: F401  (the twin's; header decoding is not a hot path)

_impl: RecordKernels
NATIVE = False  # True once the compiled kernels are bound
if not os.environ.get("COMPACTLOG_NO_EXTENSIONS"):
    try:
        from . import _native
    except ImportError:  # not built: the twin serves
        pass
    else:
        built = getattr(_native, "LAYOUT", None), getattr(_native, "POSITION_COLUMNS", None)
        if built != (LAYOUT, POSITION_COLUMNS):
            # a build older than layout.py would read every column table wrongly: refuse it, loudly
            raise ImportError(f"the compiled record kernels were built with another column layout "
                              f"({built[0]}, not {LAYOUT}): rebuild them (pip install -e .)")
        _impl, NATIVE = _native, True
if not NATIVE:
    from . import _py

    _impl = _py


def __getattr__(name: str) -> Any:
    """The twin, and the names only it or ``_protocols.py`` holds, imported on first use (PEP 562)."""
    if name in ("_py", "decode_headers"):
        from . import _py as home

        value = home if name == "_py" else home.decode_headers
    elif name in ("KERNELS", "RecordKernels"):
        from . import _protocols

        value = getattr(_protocols, name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # later lookups skip this function
    return value


encode_records = _impl.encode_records
encode_columns = _impl.encode_columns
scan_records = _impl.scan_records
scan_many = _impl.scan_many
decode_records = _impl.decode_records
summarize_records = _impl.summarize_records
gather_records = _impl.gather_records
rebase_records = _impl.rebase_records
assemble_batches = _impl.assemble_batches
gather_column = _impl.gather_column
crc32c = _impl.crc32c
scan_batches = _impl.scan_batches
verify_batches = _impl.verify_batches
decode_columns = _impl.decode_columns
walk_headers = _impl.walk_headers
murmur2 = _impl.murmur2
partition_for_keys = _impl.partition_for_keys
partition_spans = _impl.partition_spans
key_hash = _impl.key_hash
offset_map_put = _impl.offset_map_put
offset_map_get = _impl.offset_map_get
offset_map_set = _impl.offset_map_set
offset_map_grow = _impl.offset_map_grow
header_versions = _impl.header_versions
