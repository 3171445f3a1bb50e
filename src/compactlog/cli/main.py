"""The ``compactlog`` command group.

A command's module is imported when that command is looked up (``CompactLogGroup.lazy_commands``), and
the modules import the storage engine, the cleaner, the broker, Spark and their libraries inside the
functions that use them: ``compactlog --help`` and a ``consume`` load only what they run.
"""

from __future__ import annotations

from types import ModuleType
from typing import Callable

import click

from .. import __version__
from .common import EXIT_STATUS_HELP, CompactLogGroup


def _module(name: str) -> ModuleType:
    """Import one command module (each import written out: tools that read imports see these too)."""
    if name == "acls":
        from . import acls as module
    elif name == "compaction":
        from . import compaction as module
    elif name == "console":
        from . import console as module
    elif name == "demo":
        from . import demo as module
    elif name == "dumplog":
        from . import dumplog as module
    elif name == "groups":
        from . import groups as module
    elif name == "housekeeping":
        from . import housekeeping as module
    elif name == "log_dirs":
        from . import log_dirs as module
    elif name == "serve":
        from . import serve as module
    elif name == "spark":
        from . import spark as module
    elif name == "topics":
        from . import topics as module
    elif name == "transactions":
        from . import transactions as module
    elif name == "verify":
        from . import verify as module
    else:
        raise ValueError(f"no command module {name!r}")
    return module


def _command(module: str, attribute: str) -> Callable[[], click.Command]:
    return lambda: getattr(_module(module), attribute)


# command name -> its loader: (module of this package, attribute)
COMMANDS = {
    "acls": _command("acls", "acls"),
    "clean": _command("housekeeping", "clean"),
    "compact-topic": _command("compaction", "compact_topic"),
    "compaction-status": _command("compaction", "compaction_status"),
    "configs": _command("topics", "configs"),
    "consume": _command("console", "consume"),
    "consumer-groups": _command("groups", "consumer_groups"),
    "demo": _command("demo", "demo"),
    "dump-log": _command("dumplog", "dump_log"),
    "log-dirs": _command("log_dirs", "log_dirs"),
    "produce": _command("console", "produce"),
    "serve": _command("serve", "serve"),
    "spark": _command("spark", "spark"),
    "topics": _command("topics", "topics"),
    "transactions": _command("transactions", "transactions"),
    "verify": _command("verify", "verify"),
}


@click.group(cls=CompactLogGroup, lazy_commands=COMMANDS, epilog=EXIT_STATUS_HELP,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="compactlog")
@click.option("-v", "--verbose", count=True, help="Log more (-v info, -vv debug).")
def main(verbose: int) -> None:
    """compactlog: Kafka's storage, log compaction and compression over a local data directory."""
    import logging

    logging.basicConfig(level=[logging.WARNING, logging.INFO, logging.DEBUG][min(verbose, 2)],
                        format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)")
