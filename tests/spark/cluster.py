"""A real Spark standalone cluster for tests: one master and one worker from the pyspark install,
bound to 127.0.0.1, started and always stopped by the test that uses it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

START_TIMEOUT_S = 90


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spark_class() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


def cluster_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update({"SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
                "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_NO_DAEMONIZE": "1"})
    return env


def _alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as r:
            return int(json.load(r).get("aliveworkers", 0))
    except OSError:
        return -1


@contextmanager
def standalone_cluster(log_dir: Path, cores: int = 2) -> Iterator[str]:
    """Yields the master URL once a worker has registered; stops both processes on exit."""
    port, ui = free_port(), free_port()
    env = cluster_env()
    cls = _spark_class()
    procs: list[subprocess.Popen] = []
    log_dir.mkdir(parents=True, exist_ok=True)
    try:
        procs.append(subprocess.Popen(
            [cls, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui)],
            env=env, stdout=open(log_dir / "master.log", "wb"), stderr=subprocess.STDOUT, start_new_session=True))
        procs.append(subprocess.Popen(
            [cls, "org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}", "--host", "127.0.0.1",
             "--cores", str(cores), "--memory", "2g", "--webui-port", str(free_port())],
            env=env, stdout=open(log_dir / "worker.log", "wb"), stderr=subprocess.STDOUT, start_new_session=True))
        deadline = time.monotonic() + START_TIMEOUT_S
        while _alive_workers(ui) < 1:
            for p in procs:
                if p.poll() is not None:
                    raise RuntimeError(f"a Spark daemon exited with {p.returncode}; see {log_dir}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"no Spark worker registered within {START_TIMEOUT_S} s; see {log_dir}")
            time.sleep(0.2)  # polling the master's status page, bounded by the deadline above
        yield f"spark://127.0.0.1:{port}"
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
