"""The compaction job on a real Spark standalone cluster keeps the records `local[*]` keeps.

The two runs read the wall clock at different moments, so batches that gain a delete horizon carry
different horizons (base timestamps, CRCs); the records, offsets and timestamps must be the same."""

from __future__ import annotations

import shutil
import subprocess
import sys

from cluster import cluster_env, standalone_cluster
from test_compact import build_log

import compactlog


def records(root) -> list[tuple]:
    with compactlog.open(root) as cl:
        return [(r.partition, r.offset, r.key, r.value, r.timestamp, tuple(r.headers)) for r in cl.consume("t", from_beginning=True)]


def run_cli(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "compactlog", *args], capture_output=True, text=True,
                          env=cluster_env(), timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return proc.stdout


def test_compaction_on_a_standalone_cluster_matches_local(tmp_path):
    build_log(tmp_path / "base", 5, "offset", partitions=3)
    shutil.copytree(tmp_path / "base", tmp_path / "local")
    shutil.copytree(tmp_path / "base", tmp_path / "cluster")
    with standalone_cluster(tmp_path / "spark-logs") as master:
        out = run_cli("spark", "compact", "--data-dir", str(tmp_path / "cluster"), "--topic", "t", "--master", master)
    assert f"on {master}" in out and "compacted t-2" in out
    run_cli("spark", "compact", "--data-dir", str(tmp_path / "local"), "--topic", "t", "--master", "local[*]")
    local, cluster = records(tmp_path / "local"), records(tmp_path / "cluster")
    assert local == cluster
    assert len(local) < len(records(tmp_path / "base"))
