"""Suite-wide checks."""

from __future__ import annotations

import os

import pytest

import compactlog


def pytest_sessionstart(session: pytest.Session) -> None:
    """With COMPACTLOG_EXPECT_NATIVE=1, stop at once if the compiled record kernels are not in use.

    A failed compile falls back to the Python twin quietly (by design, for installs without a compiler),
    so CI would otherwise pass on the slow path without anyone noticing. The twin run of the suite sets
    COMPACTLOG_NO_EXTENSIONS=1, which asks for the twin, so the expectation does not apply there.
    """
    if os.environ.get("COMPACTLOG_EXPECT_NATIVE") != "1" or os.environ.get("COMPACTLOG_NO_EXTENSIONS"):
        return
    from compactlog.records import kernels

    if kernels.NATIVE is not True:
        pytest.exit("COMPACTLOG_EXPECT_NATIVE=1 but the compiled record kernels are not in use "
                    "(compactlog.records._native did not build or import)", returncode=1)


@pytest.fixture
def damaged(tmp_path):
    """A data directory whose topic t (one partition) holds three one-record batches with one byte of
    the second one's value flipped, and a clean-shutdown marker (so recovery trusts the files, as it
    does after any clean close). The flip turns "value-1" into "value-0", a plausible value that only
    the CRC tells apart."""
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1)
        for v in (b"value-0", b"value-1", b"value-2"):
            cl.produce("t", v, key=b"k")
        seg = cl.log("t").active_segment.log_path
    raw = bytearray(seg.read_bytes())
    raw[raw.index(b"value-1") + 6] ^= 0x01
    seg.write_bytes(bytes(raw))
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    return tmp_path
