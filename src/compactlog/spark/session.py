"""A SparkSession for compactlog's jobs: ``local[*]`` unless told otherwise, no UI, loopback only when local,
the format's columnar reader on its classpath."""

from __future__ import annotations

import os
import re
import shlex
import sys

from .columnar import columnar_jar
from .options import CORES_ENV, machine_cores


def spark_session(master: str | None = None, app_name: str = "compactlog", extra: dict[str, str] | None = None):
    from pyspark.sql import SparkSession

    master = master or os.environ.get("COMPACTLOG_SPARK_MASTER", "local[*]")
    builder = SparkSession.builder.master(master).appName(app_name)
    conf = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",  # ours (spark/progress.py) is quiet off a terminal
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": str(max(2, (os.cpu_count() or 2) * 2)),
        "spark.sql.execution.arrow.pyspark.enabled": "true",
    }
    if master.startswith("local") or "127.0.0.1" in master or "localhost" in master:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
    cores = local_cores(master)
    if cores:  # the source's planner cuts a read into at least this many ranges (options.default_cores)
        os.environ[CORES_ENV] = str(cores)
    else:  # a cluster's task slots are not known here: not those of an earlier local session either
        os.environ.pop(CORES_ENV, None)
    if master.startswith("local"):
        # Python workers (and Spark's planner processes, which read only the environment) would otherwise
        # be whatever "python3" is first on PATH, which lacks compactlog when it lives in a virtual
        # environment that is not activated.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    conf.update(extra or {})
    jar = columnar_jar()  # the format's columnar reader (spark/columnar.py); without it, Spark's Python path
    if jar:
        conf["spark.jars"] = jars_with(jar, conf.get("spark.jars"))
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    if not _found_by_spark():
        from .source import CompactLogDataSource

        spark.dataSource.register(CompactLogDataSource)
    return spark


def local_cores(master: str) -> int | None:
    """The task slots of a local master (``local``, ``local[N]``, ``local[*]``, ``local[N, retries]``);
    None for a cluster, whose executors are not known before they register."""
    m = re.fullmatch(r"local(?:\[\s*(\*|\d+)\s*(?:,\s*\d+\s*)?\])?", master.strip())
    if m is None:
        return None
    n = m.group(1)
    if n is None:
        return 1
    return machine_cores() if n == "*" else max(int(n), 1)


def _found_by_spark() -> bool:
    """Whether Spark's own lookup finds the format: it lists ``pyspark_*`` modules on the plain
    ``sys.path`` of the ``PYSPARK_PYTHON`` interpreter. Registering a format it also found makes Spark
    warn on every session, so register only when it would not."""
    import pkgutil
    import shutil

    exe = os.environ.get("PYSPARK_PYTHON") or shutil.which("python3") or "python3"
    same_env = os.path.dirname(os.path.abspath(exe)) == os.path.dirname(os.path.abspath(sys.executable))
    if not same_env:  # (a virtual environment's python links to the base one, so paths are compared unresolved)
        return False
    return any(m.name == "pyspark_compactlog" for m in pkgutil.iter_modules())


def jars_with(jar: str, given: str | None = None) -> str:
    """``spark.jars`` with ``jar`` added to the jars the session would otherwise have: set here it
    replaces those of ``spark-defaults.conf`` and of ``--jars`` in ``PYSPARK_SUBMIT_ARGS``, so they are
    named again."""
    found: list[str] = [given or ""]
    conf_dir = os.environ.get("SPARK_CONF_DIR")
    if not conf_dir:
        from pyspark.find_spark_home import _find_spark_home

        conf_dir = os.path.join(_find_spark_home(), "conf")
    try:
        with open(os.path.join(conf_dir, "spark-defaults.conf"), encoding="utf-8") as f:
            for line in f:
                parts = re.split(r"[\s=]+", line.strip(), maxsplit=1)
                if len(parts) == 2 and parts[0] == "spark.jars":
                    found.append(parts[1].strip())
    except OSError:
        pass
    args = shlex.split(os.environ.get("PYSPARK_SUBMIT_ARGS", ""))
    for i, arg in enumerate(args):
        if arg == "--jars" and i + 1 < len(args):
            found.append(args[i + 1])
        elif arg.startswith("--jars="):
            found.append(arg.split("=", 1)[1])
    jars = [j.strip() for part in found for j in part.split(",") if j.strip()]
    return ",".join(dict.fromkeys(jars + [jar]))
