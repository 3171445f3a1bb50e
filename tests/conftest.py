"""Suite-wide checks."""

from __future__ import annotations

import os

import pytest


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
