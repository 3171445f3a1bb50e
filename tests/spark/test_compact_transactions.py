"""The Spark compaction job on logs holding transactions: the local cleaner's files byte for byte
(aborted data gone, markers kept or stamped or removed alike, the cleaned segments' ``.txnindex``), the
round split into groups that each start from the transaction state the one walk has there."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from txn_logs import START_MS, build, committed_latest

import compactlog
from compactlog.clock import MockTime
from compactlog.spark.compact import compact


def files_of(root: Path) -> dict[str, bytes]:
    keep = {".log", ".index", ".timeindex", ".txnindex"}
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and (p.suffix in keep or p.name == "cleaner-offset-checkpoint")}


@pytest.mark.parametrize("seed, offset_map", [(7, "auto"), (7, "shuffle")])
def test_same_files_as_the_local_cleaner(spark, tmp_path, seed, offset_map):
    build(tmp_path / "base", seed, partitions=2)
    shutil.copytree(tmp_path / "base", tmp_path / "local")
    shutil.copytree(tmp_path / "base", tmp_path / "spark")
    now = START_MS + 10**6
    with compactlog.open(tmp_path / "base", time=MockTime(now)) as cl:
        models = [committed_latest(cl, p) for p in (0, 1)]
        assert all(len(cl.log("t", p).segments) > 3 for p in (0, 1)), "several groups: the walk is split"
    with compactlog.open(tmp_path / "local", time=MockTime(now)) as cl:
        local = cl.clean("t").compactions
    with compactlog.open(tmp_path / "spark", time=MockTime(now)) as cl:
        results = compact(spark, cl, "t", progress=lambda _m: None, offset_map=offset_map)
        assert [committed_latest(cl, p) for p in (0, 1)] == models
    assert sorted((r.partition, r.end_offset) for r in results) == sorted((r.partition, r.end_offset) for r in local)
    local_files, spark_files = files_of(tmp_path / "local"), files_of(tmp_path / "spark")
    assert any(name.endswith(".txnindex") for name in local_files), "some aborted transaction stays indexed"
    assert list(local_files) == list(spark_files)
    for name in local_files:
        assert local_files[name] == spark_files[name], f"{name} differs"
