"""Building the Spark format's columnar reader (spark/columnar.py): once per pyspark and source text,
whole or not at all, and a clear note (not a failure) where it cannot be built."""

from __future__ import annotations

import zipfile

import pytest

from compactlog.spark import columnar


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    monkeypatch.setenv(columnar.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(columnar.ENV, raising=False)
    monkeypatch.setattr(columnar, "_built", {})
    return tmp_path / "cache"


def test_it_is_compiled_once_into_a_jar_spark_finds(fresh):
    jar = columnar.columnar_jar()
    assert jar is not None and jar.startswith(str(fresh))
    with zipfile.ZipFile(jar) as z:
        assert z.read(columnar.SERVICE).decode().strip() == columnar.PROVIDER
        assert {"compactlog/spark/ColumnarSource.class", "compactlog/spark/Lent.class"} <= set(z.namelist())
    columnar._built.clear()
    stamp = (fresh / jar.rsplit("/", 1)[1]).stat().st_mtime_ns
    assert columnar.columnar_jar() == jar  # found in the cache, not built again
    assert (fresh / jar.rsplit("/", 1)[1]).stat().st_mtime_ns == stamp
    assert [p.name for p in fresh.iterdir()] == [jar.rsplit("/", 1)[1]]  # no build directory left behind


def test_without_javac_reads_take_the_python_path_and_say_why(fresh, monkeypatch, capsys):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", "")
    assert columnar.columnar_jar() is None
    assert "no javac was found" in capsys.readouterr().err


def test_a_source_javac_refuses_is_named_and_leaves_no_jar(fresh, tmp_path, monkeypatch, capsys):
    broken = tmp_path / "java" / "ColumnarSource.java"
    broken.parent.mkdir()
    broken.write_text("package compactlog.spark;\npublic final class ColumnarSource { int x = ; }\n")
    monkeypatch.setattr(columnar, "SOURCES", broken.parent)
    assert columnar.columnar_jar() is None
    err = capsys.readouterr().err
    assert "javac could not compile it" in err and "ColumnarSource.java:2" in err
    assert not any(p.suffix == ".jar" for p in fresh.rglob("*"))
    columnar._built.clear()  # a new process: the refusal is remembered, not compiled again
    monkeypatch.setattr(columnar.subprocess, "run", lambda *a, **k: pytest.fail("compiled again"))
    assert columnar.columnar_jar() is None
    assert "ColumnarSource.java:2" in capsys.readouterr().err


def test_it_is_built_against_the_spark_that_runs(monkeypatch):
    """pyspark starts the Spark of ``SPARK_HOME`` when it is set: the jar is built against its jars."""
    import pyspark

    monkeypatch.setenv("SPARK_HOME", "/nonexistent/spark")
    assert columnar.spark_jars() == columnar.Path("/nonexistent/spark/jars")
    monkeypatch.delenv("SPARK_HOME")
    assert columnar.spark_jars() == columnar.Path(pyspark.__file__).parent / "jars"


def test_switched_off(fresh, monkeypatch):
    monkeypatch.setenv(columnar.ENV, "0")
    assert columnar.columnar_jar() is None
    assert not fresh.exists()


def test_the_jar_is_added_to_the_jars_a_session_would_have(tmp_path, monkeypatch):
    """Setting ``spark.jars`` replaces the jars of ``spark-defaults.conf`` and of ``--jars``: they stay."""
    from compactlog.spark.session import jars_with

    (tmp_path / "spark-defaults.conf").write_text("spark.master local[2]\nspark.jars  /opt/a.jar,/opt/b.jar\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--jars /opt/c.jar --driver-memory 1g pyspark-shell")
    assert jars_with("/cache/ours.jar", "/opt/given.jar").split(",") == \
        ["/opt/given.jar", "/opt/a.jar", "/opt/b.jar", "/opt/c.jar", "/cache/ours.jar"]
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "none"))
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS")
    assert jars_with("/cache/ours.jar") == "/cache/ours.jar"


def test_a_cache_directory_that_cannot_be_made_falls_back_to_the_temporary_one(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.delenv(columnar.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(columnar.tempfile, "tempdir", None)  # re-read TMPDIR
    monkeypatch.setattr(columnar, "_built", {})
    jar = columnar.columnar_jar()
    assert jar is not None and jar.startswith(str(tmp_path / "tmp" / "compactlog-"))
