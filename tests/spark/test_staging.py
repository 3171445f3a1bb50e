"""A Spark job's staging directory: tasks killed with a failed job leave nothing behind."""

from __future__ import annotations

import pytest

import compactlog
from compactlog.errors import InvalidRequestError, KafkaStorageError
from compactlog.spark.staging import STAGING_DIR, JobStaging


def test_tasks_add_files_and_directories_and_the_driver_removes_them_all(tmp_path):
    staging = JobStaging.begin(tmp_path)
    a = staging.new_file(".batches")
    b = staging.new_dir()
    (b / "00000000000000000000.log.cleaned").write_bytes(b"x")
    assert a.exists() and a != staging.new_file(".batches"), "each task gets a file of its own"
    assert b != staging.new_dir(), "each attempt gets a directory of its own"
    staging.remove()
    assert not list((tmp_path / STAGING_DIR).iterdir())
    staging.remove()  # twice: an abort after a failed commit


def test_a_task_that_runs_on_after_the_job_ended_can_add_nothing(tmp_path):
    staging = JobStaging.begin(tmp_path)
    other = JobStaging.begin(tmp_path)  # another job running meanwhile keeps its directory
    staging.remove()
    with pytest.raises(InvalidRequestError, match="the job was aborted"):
        staging.new_file(".batches")
    with pytest.raises(InvalidRequestError, match="the job was aborted"):
        staging.new_dir()
    assert [p.name for p in (tmp_path / STAGING_DIR).iterdir()] == [other.directory.rsplit("/", 1)[1]]


def test_a_missing_data_directory_is_named_and_not_created(tmp_path):
    with pytest.raises(KafkaStorageError, match="does not exist"):
        JobStaging.begin(tmp_path / "nope")
    assert not (tmp_path / "nope").exists()


def test_a_data_directory_with_a_staging_directory_opens_as_before(tmp_path):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1)
        cl.produce("t", b"v", key=b"k")
    (JobStaging.begin(tmp_path).new_dir() / "00000000000000000000.log.cleaned").write_bytes(b"x")
    with compactlog.open(tmp_path) as cl:  # a driver that crashed mid-job left this
        assert [r.value for r in cl.consume("t", from_beginning=True)] == [b"v"]
        assert cl.list_topics() == ["t"]
