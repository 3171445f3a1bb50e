"""``demo``: the README's main job, the "latest product price" walkthrough run end to end.

Each step is the real command, run as its own process, so what it prints is what a user sees.
"""

from __future__ import annotations

import base64
import json
import shlex
import subprocess
import sys
from pathlib import Path

import click

from ..log_dir import holds_topic
from .common import kafka_errors

TOPIC = "latest-product-price"
PRICES = "p3:10\np5:7\np3:11\np6:25\np6:12\np5:14\np5:17\n"


def steps(data: str) -> list[tuple[list[str], str | None]]:
    """The walkthrough as (arguments, standard input) pairs."""
    d = ["--data-dir", data]
    seg0 = str(Path(data) / f"{TOPIC}-0" / ("0" * 20 + ".log"))
    return [
        (["topics", *d, "--create", "--topic", TOPIC, "--partitions", "1", "--config", "cleanup.policy=compact",
          "--config", "segment.ms=100", "--config", "min.cleanable.dirty.ratio=0.01", "--config", "delete.retention.ms=100"], None),
        (["produce", *d, "--topic", TOPIC, "--property", "parse.key=true", "--property", "key.separator=:"], PRICES),
        (["consume", *d, "--topic", TOPIC, "--from-beginning", "--property", "print.key=true", "--property", "key.separator=:"], None),
        (["topics", *d, "--describe", "--topic", TOPIC], None),
        (["configs", *d, "--alter", "--topic", TOPIC, "--add-config", "compression.type=zstd"], None),
        (["produce", *d, "--topic", TOPIC, "--property", "parse.key=true", "--property", "key.separator=:"], "p3:9\np7:30\n"),
        (["configs", *d, "--describe", "--topic", TOPIC], None),
        (["dump-log", "--files", seg0, "--print-data-log"], None),
        (["clean", *d, "--topic", TOPIC], None),
        (["consume", *d, "--topic", TOPIC, "--from-beginning", "--property", "print.key=true",
          "--property", "print.offset=true", "--property", "key.separator=:"], None),
        (["produce", *d, "--topic", TOPIC, "--property", "parse.key=true", "--property", "key.separator=:"], "p5:15\np7:29\n"),
        (["produce", *d, "--topic", TOPIC, "--property", "parse.key=true", "--property", "key.separator=:"], "p3:8\n"),
        (["spark", "compact", *d, "--topic", TOPIC], None),
        (["consume", *d, "--topic", TOPIC, "--from-beginning", "--property", "print.key=true",
          "--property", "print.offset=true", "--property", "key.separator=:"], None),
        (["spark", "export", *d, "--topic", TOPIC, "--format", "json", "--output", str(Path(data) / "exports" / TOPIC)], None),
    ]


@click.command("demo")
@click.option("--data-dir", default="demo-data", show_default=True, type=click.Path(file_okay=False),
              help="Where to keep the walkthrough's data (its topic is recreated on every run).")
@kafka_errors
def demo(data_dir: str) -> None:
    """Run the latest-product-price walkthrough end to end, printing each command and its output."""
    base = [sys.executable, "-m", "compactlog"]
    if holds_topic(data_dir, TOPIC):
        proc = subprocess.run([*base, "topics", "--data-dir", data_dir, "--delete", "--topic", TOPIC], capture_output=True)
        if proc.returncode != 0:
            sys.stderr.buffer.write(proc.stderr)
            raise click.ClickException(f"could not delete the previous run's topic {TOPIC} in {data_dir}")
    for i, (args, stdin) in enumerate(steps(data_dir), start=1):
        shown = "compactlog " + shlex.join(args)
        if stdin is not None:
            shown = f"printf {shlex.quote(stdin.replace(chr(10), chr(92) + 'n'))} | {shown}"
        click.secho(f"\n[{i}/{len(steps(data_dir))}] $ {shown}", fg="cyan", bold=True)
        proc = subprocess.run([*base, *args], input=(stdin or "").encode(), capture_output=True)
        sys.stdout.buffer.write(proc.stdout)
        sys.stdout.flush()
        if proc.returncode != 0:
            sys.stderr.buffer.write(proc.stderr)
            raise click.ClickException(f"step {i} failed with exit status {proc.returncode}")
    out = Path(data_dir) / "exports" / TOPIC
    rows = [json.loads(line) for part in sorted(out.glob("part-*.json")) for line in part.read_text().splitlines()]
    click.echo("latest price per product, as exported by Spark:")
    for r in sorted(rows, key=lambda r: r["offset"]):
        click.echo(f"  {base64.b64decode(r['key']).decode()} = {base64.b64decode(r['value']).decode()}  (offset {r['offset']})")
    click.secho("\nThe walkthrough ran end to end.", fg="green")
