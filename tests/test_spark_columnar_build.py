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
        assert "compactlog/spark/ColumnarSource.class" in z.namelist()
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
    monkeypatch.setattr(columnar, "SOURCE", broken)
    assert columnar.columnar_jar() is None
    err = capsys.readouterr().err
    assert "javac could not compile it" in err and "ColumnarSource.java:2" in err
    assert not any(p.suffix == ".jar" for p in fresh.rglob("*"))


def test_switched_off(fresh, monkeypatch):
    monkeypatch.setenv(columnar.ENV, "0")
    assert columnar.columnar_jar() is None
    assert not fresh.exists()
