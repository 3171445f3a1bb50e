"""The ``compactlog`` command group."""

from __future__ import annotations

import logging

import click

from .. import __version__
from .acls import acls
from .common import EXIT_STATUS_HELP, CompactLogGroup
from .compaction import compact_topic, compaction_status
from .console import consume, produce
from .demo import demo
from .dumplog import dump_log
from .groups import consumer_groups
from .housekeeping import clean
from .serve import serve
from .spark import spark
from .topics import configs, topics
from .verify import verify


@click.group(cls=CompactLogGroup, epilog=EXIT_STATUS_HELP,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="compactlog")
@click.option("-v", "--verbose", count=True, help="Log more (-v info, -vv debug).")
def main(verbose: int) -> None:
    """compactlog: Kafka's storage, log compaction and compression over a local data directory."""
    logging.basicConfig(level=[logging.WARNING, logging.INFO, logging.DEBUG][min(verbose, 2)],
                        format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)")


for command in (topics, configs, produce, consume, dump_log, clean, compact_topic, compaction_status, verify, demo,
                spark, serve):
    main.add_command(command)
main.add_command(acls)
main.add_command(consumer_groups)
