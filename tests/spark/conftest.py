"""One real local SparkSession for the whole run (a cold start costs 7-10 s), bound to loopback."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


@pytest.fixture(scope="session")
def spark():
    from compactlog.spark.session import spark_session

    session = spark_session("local[2]", "compactlog-tests", {"spark.sql.shuffle.partitions": "4"})
    yield session
    session.stop()


def pytest_collection_modifyitems(config, items):
    """Every test here needs Spark: mark it, so that a run can leave them out with -m "not spark"."""
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.spark)
