"""Fixtures for storage tests: a mock clock (helpers are in storage_helpers.py)."""

from __future__ import annotations

import pytest

from compactlog.clock import MockTime


@pytest.fixture
def clock() -> MockTime:
    return MockTime()
