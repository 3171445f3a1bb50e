"""What starting the command line loads: ``--help`` and a ``consume`` of an empty topic import neither the
broker, the console, Spark nor their libraries; ``import compactlog`` and ``--help`` not even numpy, and the
consume neither numpy, the producer, the codec libraries, the cleaner nor the compaction service. How fast
they start is measured by ``bench/bench_startup.py``; here only which modules a fresh interpreter ends up
with."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import compactlog
from compactlog.records import kernels

# Imported by no command that does not use them: the adapters, their libraries, and rich's tables.
ADAPTERS = ("pyspark", "pyarrow", "pandas", "aiohttp", "jinja2", "confluent_kafka", "kio", "matplotlib", "rich",
            "asyncio", "compactlog.server", "compactlog.console", "compactlog.spark")
# Besides those, listing the commands needs no storage engine, cleaner, codec library or numpy.
ENGINE = ("numpy", "cramjam", "lz4", "zstandard", "compactlog.api", "compactlog.records.batch",
          "compactlog.storage.log", "compactlog.cleaner", "compactlog.compaction", "compactlog.producer")
# What opening a directory and reading nothing needs none of: numpy (an index loads it with its first
# entry, a batch's scan() with the first scan), the producer, the codec libraries (loaded by the first
# batch in their codec), the cleaner and the compaction service (built on first use; only
# compaction.state is read at open, to remove what a killed compaction left).
NOT_TO_READ_NOTHING = ("numpy", "cramjam", "lz4", "zstandard", "compactlog.producer", "compactlog.cleaner",
                       "compactlog.compaction.service", "compactlog.compaction.compactor",
                       "compactlog.compaction.reader", "compactlog.compaction.sidelog", "compactlog.cleaning",
                       "compactlog.cleaning_round")


def loaded_after(code: str) -> set[str]:
    """The top-level names (and compactlog's modules) in sys.modules after ``code`` ran in a new interpreter."""
    probe = code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))\n"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return set(json.loads(out.stdout.splitlines()[-1]))


def present(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(n for n in names if any(m == n or m.startswith(n + ".") for m in modules))


def run_cli(*args: str) -> str:
    """In-process: the group's main as the console script calls it, ending in SystemExit."""
    return (f"from compactlog.cli import main\n"
            f"try:\n    main({list(args)!r})\nexcept SystemExit as exc:\n    assert exc.code in (0, None), exc.code\n")


@pytest.mark.parametrize("args", [["--help"], ["topics", "--help"], ["consume", "--help"]],
                         ids=lambda a: " ".join(a))
def test_help_loads_no_engine_and_no_adapter(args):
    modules = loaded_after(run_cli(*args))  # the help first, then the modules' line
    assert present(modules, ADAPTERS + ENGINE) == []


def test_import_compactlog_loads_only_the_package():
    modules = loaded_after("import compactlog; assert compactlog.__version__")
    assert present(modules, ADAPTERS + ENGINE) == []


def test_consuming_an_empty_topic_loads_no_adapter(tmp_path):
    data = tmp_path / "data"
    with compactlog.open(data) as cl:
        cl.create_topic("empty", 1)
    modules = loaded_after(run_cli("consume", "--data-dir", str(data), "--topic", "empty", "--from-beginning"))
    assert "compactlog.api" in modules  # it did open the directory
    assert present(modules, ADAPTERS) == []
    assert present(modules, NOT_TO_READ_NOTHING) == []
    if kernels.NATIVE:  # the Python twin of the compiled kernels is loaded only where it serves
        assert "compactlog.records._py" not in modules


def test_the_public_names_load_on_first_use():
    out = subprocess.run([sys.executable, "-c", (
        "import compactlog\n"
        "from compactlog import CompactLog, CompactLogError, Record, open\n"
        "from compactlog.records import BatchInfo, Codec, build_batch\n"
        "import compactlog.records as records\n"
        "assert compactlog.open is open and compactlog.CompactLog.__module__ == 'compactlog.api'\n"
        "assert compactlog.errors.CompactLogError is CompactLogError and Record is compactlog.records.Record\n"
        "assert set(records.__all__) <= set(dir(records)) and set(compactlog.__all__) <= set(dir(compactlog))\n"
        "for module, name in ((compactlog, 'nope'), (records, 'nope')):\n"
        "    try:\n        getattr(module, name)\n    except AttributeError:\n        pass\n"
        "    else:\n        raise AssertionError(name)\n"
    )], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


def test_the_console_producer_default_batch_size_is_the_producers():
    from compactlog.api import DEFAULT_BATCH_BYTES as api_default
    from compactlog.cli.console import DEFAULT_BATCH_BYTES as shown
    from compactlog.producer import DEFAULT_BATCH_BYTES

    assert shown == api_default == DEFAULT_BATCH_BYTES
