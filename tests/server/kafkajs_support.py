"""kafkajs (the Node.js Kafka client) for the tests: installed from the npm registry on first use into a
cache under the repository's ``build/`` directory (ignored by git), and driven by small Node scripts run
as subprocesses that print one JSON document.

A test that needs it calls ``kafkajs_or_skip()``: without ``node`` and ``npm``, or when the registry
cannot be reached, the test is skipped and the reason says which.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
from functools import cache
from pathlib import Path

import pytest

VERSION = "2.2.4"  # the newest kafkajs release
CACHE = Path(__file__).resolve().parents[2] / "build" / f"kafkajs-{VERSION}"
INSTALL_TIMEOUT = 120


@cache
def _install() -> str | None:
    """The node_modules directory holding kafkajs, or why it could not be had."""
    modules = CACHE / "node_modules"
    if (modules / "kafkajs" / "package.json").exists():
        return str(modules)
    if shutil.which("node") is None or shutil.which("npm") is None:
        return "skip: node or npm is not installed"
    CACHE.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--no-save", "--fetch-retries=1",
                               "--fetch-timeout=20000", "--prefix", str(CACHE), f"kafkajs@{VERSION}"],
                              capture_output=True, text=True, timeout=INSTALL_TIMEOUT)
    except subprocess.TimeoutExpired:
        return f"skip: npm install kafkajs@{VERSION} took over {INSTALL_TIMEOUT} s (registry not reachable?)"
    if done.returncode != 0 or not (modules / "kafkajs" / "package.json").exists():
        return f"skip: npm install kafkajs@{VERSION} failed (registry not reachable?): {done.stderr.strip()[-300:]}"
    return str(modules)


def kafkajs_or_skip() -> str:
    """The node_modules directory with kafkajs; skips the calling test when it cannot be installed."""
    got = _install()
    if got.startswith("skip: "):
        pytest.skip(got[len("skip: "):])
    return got


def run_node(script: str, args: dict, timeout: float = 60.0):
    """Run ``script`` (a Node.js async function body that sees ``ARGS`` and ``kafkajs``, and returns a
    JSON-able value) and return what it returned. A script that throws fails the test with its message."""
    modules = kafkajs_or_skip()
    program = textwrap.dedent("""
        const kafkajs = require('kafkajs');
        const ARGS = JSON.parse(process.env.KAFKAJS_TEST_ARGS);
        (async () => {
        %s
        })().then(
          (out) => { process.stdout.write(JSON.stringify({ ok: out === undefined ? null : out })); process.exit(0); },
          (err) => { process.stdout.write(JSON.stringify({ error: String(err && err.stack || err) })); process.exit(0); });
    """) % script
    env = {**os.environ, "NODE_PATH": modules, "KAFKAJS_TEST_ARGS": json.dumps(args),
           "KAFKAJS_NO_PARTITIONER_WARNING": "1"}
    done = subprocess.run(["node", "-e", program], capture_output=True, text=True, timeout=timeout, env=env)
    try:
        result = json.loads(done.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"node exited {done.returncode} without a result: {done.stdout[-2000:]} "
                             f"{done.stderr[-2000:]}") from None
    if "error" in result:
        raise AssertionError(f"kafkajs script failed: {result['error']}")
    return result["ok"]
