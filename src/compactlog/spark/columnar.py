"""The JVM side of the ``compactlog`` format (``java/*.java``: the columnar reader, and the producer that
builds the batches of appends), built on first use.

Spark hands a Python data source's Arrow batches to the query as rows, every column copied, and never
tells the source which columns a query reads; it hands a Python sink every row as Arrow, likewise copied.
The Java classes wrap the same Python source (which still plans and decodes everything, and validates
and stages every batch appended) so that Spark receives the worker's Arrow vectors as columns and asks
for the columns it uses, and so that an append's batches are built in the JVM, by the Python side's
producer plan. They lean on Spark internals, so they are compiled against the jars of the Spark that
will load them, once per pyspark version, jars and source text, into a cache directory; sessions made
by ``spark_session`` put the jar on ``spark.jars``. Where it cannot be built (no ``javac``, a Spark
whose internals moved), reads and appends take Spark's own Python path: slower, the same rows.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

SOURCES = Path(__file__).with_name("java")  # its .java files, compiled together
SERVICE = "META-INF/services/org.apache.spark.sql.sources.DataSourceRegister"
PROVIDER = "compactlog.spark.ColumnarSource"
ENV = "COMPACTLOG_SPARK_COLUMNAR"  # "0": read and append through Spark's Python source interface alone
CACHE_ENV = "COMPACTLOG_CACHE_DIR"
COMPILE_SECONDS = 300

_built: dict[str, str | None] = {}


def enabled() -> bool:
    return os.environ.get(ENV, "1") != "0"


def columnar_jar() -> str | None:
    """The jar's path, compiled now if this pyspark has none yet; None (and a note on stderr, once)
    where it cannot be built or ``COMPACTLOG_SPARK_COLUMNAR=0`` says not to."""
    if not enabled():
        return None
    import pyspark

    jars = spark_jars()
    listing = "\n".join(sorted(p.name for p in jars.glob("*.jar"))) if jars.is_dir() else ""
    text = b"".join(f.read_bytes() for f in _sources())
    digest = hashlib.sha256(text + pyspark.__version__.encode() + str(jars).encode() + listing.encode())
    name = f"compactlog-spark-{pyspark.__version__}-{digest.hexdigest()[:16]}.jar"
    if name not in _built:
        _built[name] = _build(jars, name)
    return _built[name]


def spark_jars() -> Path:
    """The jars of the Spark that will run: ``SPARK_HOME``'s when it is set (pyspark then starts that
    Spark), else those that came with pyspark."""
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home()) / "jars"


def cache_dir() -> Path:
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "compactlog"


def _build(jars: Path, name: str) -> str | None:
    home = cache_dir()
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError:  # a read-only home (a CI runner, a service account): the machine's temporary directory
        home = Path(tempfile.gettempdir()) / f"compactlog-{os.getuid()}"
    target = home / name
    if target.is_file():
        return str(target)
    javac = _javac()
    if javac is None:
        return _skip("no javac was found (JAVA_HOME or PATH)")
    # What this javac refused it will refuse again for the same source and jars: say so, don't retry.
    real = os.path.realpath(javac)
    seen = hashlib.sha256(f"{real}:{os.stat(real).st_mtime_ns}".encode()).hexdigest()[:12]
    refused = target.with_name(f"{target.stem}-{seen}.refused")
    if refused.is_file():
        return _skip(refused.read_text(errors="replace").strip())
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".build-", dir=target.parent) as tmp:
            classes = Path(tmp) / "classes"
            done = subprocess.run(
                [javac, "--release", "17", "-nowarn", "-encoding", "UTF-8", "-d", str(classes),
                 "-cp", str(jars / "*"), *map(str, _sources())],
                capture_output=True, text=True, timeout=COMPILE_SECONDS)
            if done.returncode != 0:
                first = (done.stderr.strip().splitlines() or ["(no message)"])[0]
                why = f"javac could not compile it against the jars in {jars}: {first}"
                refused.write_text(why + "\n")
                return _skip(why)
            jar = Path(tmp) / name
            with zipfile.ZipFile(jar, "w", zipfile.ZIP_DEFLATED) as z:
                for f in sorted(classes.rglob("*.class")):
                    z.write(f, f.relative_to(classes).as_posix())
                z.writestr(SERVICE, PROVIDER + "\n")
            os.replace(jar, target)  # whole or not at all, whichever process finishes first
    except (OSError, subprocess.SubprocessError) as exc:
        return _skip(f"building it failed: {exc}")
    return str(target)


def _sources() -> list[Path]:
    return sorted(SOURCES.glob("*.java"))


def _javac() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "javac"), os.X_OK):
        return os.path.join(home, "bin", "javac")
    return shutil.which("javac")


def _skip(why: str) -> None:
    print(f"compactlog: Spark reads and appends go through Spark's Python source interface alone (every "
          f"column copied, none pruned; batches built in Python): the format's JVM side was not built: {why}",
          file=sys.stderr)
    return None
