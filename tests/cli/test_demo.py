"""The README's main job runs end to end on a fresh data directory (every step a real process)."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.spark  # the walkthrough ends with a Spark compaction and export
def test_walkthrough_runs_and_ends_with_the_latest_price_per_product(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "compactlog", "demo", "--data-dir", str(tmp_path / "demo")],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "The walkthrough ran end to end." in out
    tail = out[out.index("as exported by Spark:"):]
    assert [line.split("(")[0].strip() for line in tail.splitlines()[1:5]] == ["p6 = 12", "p5 = 15", "p7 = 29", "p3 = 8"]
    assert "compacted latest-product-price-0" in out
