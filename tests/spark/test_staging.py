"""A job's staging directory: tasks killed with a failed job leave nothing behind."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import compactlog
from compactlog.errors import InvalidRequestError, KafkaStorageError
from compactlog.storage.staging import STAGING_DIR, JobStaging, sweep_abandoned


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


DRIVER = """
import sys
from compactlog.storage.staging import JobStaging
staging = JobStaging.begin(sys.argv[1])
(staging.new_dir() / "00000000000000000000.log.cleaned").write_bytes(b"staged data")
print(staging.directory, flush=True)
sys.stdin.readline()  # the test says when this driver dies, without cleaning up
"""


def test_the_next_job_removes_what_a_dead_driver_left_and_nothing_of_a_live_one(tmp_path):
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, str(tmp_path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        theirs = Path(driver.stdout.readline().strip())
        mine = JobStaging.begin(tmp_path)  # a job of this process begins while theirs runs
        assert (theirs / ".driver").exists() and len(list(theirs.iterdir())) == 2, "a live job is left alone"
        again = JobStaging.begin(tmp_path)
        assert Path(mine.directory).exists(), "so is another live job of the same process"
        driver.stdin.close()  # their driver dies mid-job: its lock goes with it
        assert driver.wait(timeout=60) == 0
        assert theirs.exists()
        last = JobStaging.begin(tmp_path)
        assert not theirs.exists(), "the next job to begin removed the dead driver's staged data"
        assert all(Path(s.directory).exists() for s in (mine, again, last))
    finally:
        if driver.poll() is None:
            driver.kill()
    for s in (mine, again, last):
        s.remove()
    assert not list((tmp_path / STAGING_DIR).iterdir())
