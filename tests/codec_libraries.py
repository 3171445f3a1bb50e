"""Which codecs the compiled record kernels decompress themselves: they load the system's liblz4 and
libzstd when first needed, and leave a codec whose library is missing to the Python codecs."""

from __future__ import annotations

import ctypes

from compactlog.records.codecs import Codec


def system_library(soname: str) -> bool:
    try:
        ctypes.CDLL(soname)
    except OSError:
        return False
    return True


DECOMPRESSED = tuple(c for c, so in ((Codec.LZ4, "liblz4.so.1"), (Codec.ZSTD, "libzstd.so.1")) if system_library(so))
