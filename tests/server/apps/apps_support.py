"""Real stream-processing applications (quixstreams, faust) against a real ``compactlog serve``.

Each framework pins Kafka client versions the project's own test extras do not allow (quixstreams wants
an older confluent-kafka, faust its own aiokafka and click), so each lives in its own virtual
environment under the repository's ``build/`` directory (ignored by git): created on first use with
``python -m venv`` and ``pip install`` of one pinned release, reused while it is there. Without the
package index the test is skipped, and the reason says so.

An application is a script in this directory run by that environment's python as a subprocess
(``AppProcess``), so a test can SIGKILL it between any two instructions. What it wrote is read from
the server's data directory through the embedded API's read-only snapshots (``read_topic``), with the
isolation level a consumer would choose.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from functools import cache
from pathlib import Path
from typing import Callable

import pytest

from compactlog.reading import READ_COMMITTED, READ_UNCOMMITTED, open_snapshot, read_records, topic_metadata
from compactlog.records.batch import Record

HERE = Path(__file__).resolve().parent
BUILD = HERE.parents[2] / "build"
INSTALL_TIMEOUT = 300
# What one venv's creation took, by requirement, for the tests' report (0.0 when it was reused).
INSTALL_SECONDS: dict[str, float] = {}

__all__ = ["READ_COMMITTED", "READ_UNCOMMITTED", "AppProcess", "app_python", "read_topic", "wait_until"]


@cache
def _venv(requirements: tuple[str, ...]) -> str:
    """The python of a venv holding ``requirements`` (each ``name==version``; the first names the
    venv), or ``skip: why``."""
    requirement = " ".join(requirements)
    name = requirements[0].replace("==", "-")
    home = BUILD / f"venv-{name}"
    python = home / "bin" / "python"
    stamp = home / "installed"  # written last, naming what was installed: a venv made for other pins is remade

    def made() -> bool:
        return stamp.exists() and stamp.read_text() == "\n".join(requirements) + "\n" and python.exists()

    if made():
        INSTALL_SECONDS[requirement] = 0.0
        return str(python)
    started = time.monotonic()
    partial = BUILD / f"venv-{name}.partial-{os.getpid()}"  # another test process may be making it too
    shutil.rmtree(home, ignore_errors=True)
    BUILD.mkdir(parents=True, exist_ok=True)
    try:
        subprocess.run([sys.executable, "-m", "venv", str(partial)], check=True, capture_output=True,
                       timeout=INSTALL_TIMEOUT)
        # the venv's scripts name its own path: made under the final name's sibling, then moved, they
        # would point at the partial one, so pip runs as "python -m pip" and the apps as "python script"
        done = subprocess.run([str(partial / "bin" / "python"), "-m", "pip", "install", "--quiet",
                               "--disable-pip-version-check", "--retries", "1", "--timeout", "30", *requirements],
                              capture_output=True, text=True, timeout=INSTALL_TIMEOUT)
    except subprocess.TimeoutExpired:
        shutil.rmtree(partial, ignore_errors=True)
        return f"skip: pip install {requirement} took over {INSTALL_TIMEOUT} s (package index not reachable?)"
    except subprocess.CalledProcessError as e:
        shutil.rmtree(partial, ignore_errors=True)
        return f"skip: python -m venv failed: {e.stderr.decode(errors='replace')[-300:]}"
    if done.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        errors = "\n".join(line for line in done.stderr.splitlines() if not line.startswith("WARNING: Location"))
        return f"skip: pip install {requirement} failed (package index not reachable?): {errors.strip()[-400:]}"
    (partial / "installed").write_text("\n".join(requirements) + "\n")
    try:
        partial.rename(home)
    except OSError:  # another process finished first: use its venv
        shutil.rmtree(partial, ignore_errors=True)
        if not made():
            return f"skip: the venv {home} could not be put in place"
    INSTALL_SECONDS[requirement] = time.monotonic() - started
    return str(python)


def app_python(*requirements: str) -> str:
    """The python of the venv holding ``requirements``; skips the calling test when it cannot be made."""
    got = _venv(requirements)
    if got.startswith("skip: "):
        pytest.skip(got[len("skip: "):])
    return got


class AppProcess:
    """One run of an application script: started, watched, stopped (SIGTERM) or killed (SIGKILL).

    Its standard output and error go to ``log_path`` (appended across runs, so a failure shows every
    run's story)."""

    def __init__(self, python: str, script: str, args: list[str], log_path: Path, env: dict[str, str] | None = None):
        self.python, self.script, self.args = python, HERE / script, args
        self.log_path = log_path
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        self.env.update({"PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1", **(env or {})})
        self.proc: subprocess.Popen | None = None
        self.runs = 0

    def start(self) -> "AppProcess":
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.runs += 1
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== run {self.runs} =====\n".encode())
            log.flush()
            self.proc = subprocess.Popen([self.python, str(self.script), *self.args], stdout=log, stderr=log,
                                         stdin=subprocess.DEVNULL, env=self.env, cwd=self.log_path.parent,
                                         start_new_session=True)
        return self

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL to the app's whole process group (an app may have helper processes or threads)."""
        if self.running:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait for a clean exit; SIGKILL after ``timeout``."""
        if not self.running:
            return self.proc.returncode if self.proc else 0
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"the app did not stop within {timeout} s of SIGTERM; log:\n{self.log_tail()}") from None

    def log_tail(self, chars: int = 6000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""

    def check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"the app exited with {self.proc.returncode}; log:\n{self.log_tail()}")


def wait_until(condition: Callable[[], object], timeout: float, what: str, app: AppProcess | None = None,
               interval: float = 0.1):
    """Poll ``condition`` until it returns something true (returned), failing after ``timeout`` seconds
    with ``what`` and the app's log; fails at once if ``app`` exits meanwhile."""
    deadline = time.monotonic() + timeout
    while True:
        got = condition()
        if got:
            return got
        if app is not None:
            app.check_alive()
        if time.monotonic() > deadline:
            tail = f"; app log:\n{app.log_tail()}" if app is not None else ""
            raise AssertionError(f"timed out after {timeout} s waiting until {what}{tail}")
        time.sleep(interval)


def read_topic(data_dir: Path, topic: str, isolation: str = READ_UNCOMMITTED) -> list[Record]:
    """Every record of ``topic`` a consumer at ``isolation`` would see now, partition by partition, read
    from the data directory the running server owns (its lock is not taken). A topic not made yet
    reads as empty."""
    meta = topic_metadata(data_dir).get(topic)
    if meta is None:
        return []
    out: list[Record] = []
    for p in range(meta["partitions"]):
        with open_snapshot(data_dir, topic, p) as snap:
            out.extend(read_records(snap, topic, p, snap.log_start_offset, snap.log_end_offset, isolation=isolation))
    return out


# -- the counting scenario both apps run ----------------------------------------------------------------

def key_of(seq: int) -> str:
    """The key of input ``seq``: seven keys, k6 four times as used as each other one."""
    return f"k{min(seq % 10, 6)}"


def produce_inputs(bootstrap: str, topic: str, seqs: range) -> None:
    """Input records ``{"seq": N}`` under ``key_of(N)``, acknowledged before returning."""
    from confluent_kafka import Producer

    failed = []

    def delivered(err, msg) -> None:
        if err is not None:
            failed.append(err)

    # small batches: the test server's segments are small, and a batch larger than one is refused
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "enable.idempotence": True, "batch.size": 1024})
    for seq in seqs:
        p.produce(topic, key=key_of(seq).encode(), value=json.dumps({"seq": seq}).encode(), on_delivery=delivered)
    assert p.flush(30) == 0
    assert not failed, f"{len(failed)} inputs not stored: {failed[0]}"


def expected_counts(seqs: range) -> dict[int, int]:
    """What a correct counter writes for each input: the input's place among its key's inputs (one key's
    inputs share a partition, so the app sees them in the order they were produced)."""
    seen: dict[str, int] = {}
    out = {}
    for seq in seqs:
        k = key_of(seq)
        seen[k] = seen.get(k, 0) + 1
        out[seq] = seen[k]
    return out


def outputs(records: list[Record]) -> list[dict]:
    """The output records' JSON values ``{"key", "seq", "count"}``, checked against their record key."""
    got = []
    for r in records:
        v = json.loads(r.value)
        assert r.key is not None and r.key.decode() == v["key"] == key_of(v["seq"]), (r, v)
        got.append(v)
    return got


def check_exactly_once(records: list[Record], seqs: range, once: bool = True) -> None:
    """Each input's effect is in the output exactly once (``once=False``: at least once), each time with
    the count a correct counter gives it."""
    got = outputs(records)
    by_seq: dict[int, list[int]] = {}
    for v in got:
        by_seq.setdefault(v["seq"], []).append(v["count"])
    twice = {s: c for s, c in by_seq.items() if len(c) > 1}
    assert not once or not twice, \
        f"inputs whose effect is in the output more than once (seq: counts): {dict(list(twice.items())[:10])}"
    want = expected_counts(seqs)
    assert sorted(by_seq) == sorted(want), (f"missing: {sorted(set(want) - set(by_seq))[:20]}, "
                                            f"unexpected: {sorted(set(by_seq) - set(want))[:20]}")
    wrong = {s: (c, want[s]) for s, c in by_seq.items() if any(n != want[s] for n in c)}
    assert not wrong, f"inputs counted wrong (seq: (got, want)): {dict(list(wrong.items())[:10])}"


def final_counts(seqs: range) -> dict[str, int]:
    want: dict[str, int] = {}
    for seq in seqs:
        want[key_of(seq)] = want.get(key_of(seq), 0) + 1
    return want


def latest_by_key(records: list[Record]) -> dict[bytes, bytes | None]:
    """What a restore from a compacted topic ends with: the last value per key (None: deleted)."""
    out: dict[bytes, bytes | None] = {}
    for r in records:
        out[r.key] = r.value
    return out


def cleaned_offsets(data_dir: Path, topic: str) -> dict[int, int]:
    """Per partition of ``topic``, the offset the broker's log cleaner has compacted up to, from the
    data directory's ``cleaner-offset-checkpoint``; empty before the cleaner has done anything to it."""
    from compactlog.storage.checkpoint import OffsetCheckpointFile

    done = OffsetCheckpointFile(data_dir / "cleaner-offset-checkpoint").read()
    return {p: o for (t, p), o in done.items() if t == topic}


def topic_config(data_dir: Path, topic: str) -> dict[str, str]:
    """A topic's config overrides as the broker keeps them."""
    return topic_metadata(data_dir)[topic]["config"]


def output_count(data_dir: Path, sink: str, isolation: str) -> int:
    return len(read_topic(data_dir, sink, isolation))


RUN_TIMEOUT = 40.0  # what one phase of an application's run may take before a test gives up on it


def start_then_produce(server, app: AppProcess, source: str, seqs: range,
                       ready: Callable[[AppProcess], bool] | None) -> None:
    """Start a run of the app with inputs ``seqs`` to read: produced before it starts, or (``ready``
    given) once it says it is ready, so that none is fetched while it is still starting (faust 0.15
    resumes fetching before its seek to the committed offsets and its flow, and drops what arrives in
    between)."""
    if ready is None:
        produce_inputs(server.bootstrap, source, seqs)
        app.start()
        return
    app.start()
    wait_until(lambda: ready(app), RUN_TIMEOUT, "the app says it is ready", app)
    produce_inputs(server.bootstrap, source, seqs)


def restore_after_wiping_state(server, app: AppProcess, state_dir: Path, source: str, sink: str, changelog: str,
                               changelog_counts: Callable[[list[Record]], dict[str, int]],
                               ready: Callable[[AppProcess], bool] | None = None) -> None:
    """At-least-once, stopped cleanly between runs: the app counts 150 inputs; its changelog is a
    compacted topic the broker's cleaner compacts and holds the counts; with its local state wiped it
    restores them from the changelog and counts 50 more inputs on from there. Stopped cleanly, the app
    counts exactly. ``ready``: the inputs of each run are produced once it says the app is ready (see
    ``start_then_produce``)."""

    def check(seqs: range) -> None:
        check_exactly_once(read_topic(server.data_dir, sink), seqs)
        assert changelog_counts(read_topic(server.data_dir, changelog)) == final_counts(seqs)

    first = range(0, 150)
    start_then_produce(server, app, source, first, ready)
    try:
        wait_until(lambda: output_count(server.data_dir, sink, READ_UNCOMMITTED) >= len(first), RUN_TIMEOUT,
                   f"{len(first)} outputs", app)
        assert app.stop() == 0, app.log_tail()
        assert topic_config(server.data_dir, changelog).get("cleanup.policy") == "compact"
        wait_until(lambda: any(cleaned_offsets(server.data_dir, changelog).values()), RUN_TIMEOUT,
                   f"the log cleaner compacted {changelog}")
        check(first)

        shutil.rmtree(state_dir)
        everything = range(0, 200)
        start_then_produce(server, app, source, range(150, 200), ready)
        wait_until(lambda: output_count(server.data_dir, sink, READ_UNCOMMITTED) >= len(everything), RUN_TIMEOUT,
                   f"{len(everything)} outputs", app)
        assert app.stop() == 0, app.log_tail()
        # counts of the last 50 that go on from the restored ones: a run that began from nothing would
        # have counted them from 1
        check(everything)
    finally:
        app.kill()


def transaction_open(data_dir: Path, *topics: str) -> bool:
    """Whether some partition of ``topics`` holds a transaction not yet committed or aborted (its last
    stable offset short of its end)."""
    for topic in topics:
        meta = topic_metadata(data_dir).get(topic)
        for p in range(meta["partitions"] if meta else 0):
            with open_snapshot(data_dir, topic, p) as snap:
                if snap.last_stable_offset < snap.log_end_offset:
                    return True
    return False


def committed_seqs(data_dir: Path, sink: str) -> set[int]:
    """The inputs whose effect a read_committed consumer of the output sees now."""
    return {json.loads(r.value)["seq"] for r in read_topic(data_dir, sink, READ_COMMITTED)}


def exactly_once_through_kills(server, app: AppProcess, state_dir: Path, source: str, sink: str, changelog: str,
                               changelog_counts: Callable[[list[Record]], dict[str, int]],
                               output_in_transactions: bool = True, kill_app: bool = True,
                               ready: Callable[[AppProcess], bool] | None = None) -> None:
    """Exactly-once through failures: the app (slowed a little per record) is SIGKILLed once it has
    written some output, restarted, sees the server SIGKILLed and restarted on the same directory and
    port while it works, is stopped, loses its local state, and restores it from the compacted
    changelog to count more inputs. For a read_committed reader the output then holds each input's
    effect exactly once, with the count a correct counter gives it, and the changelog ends with the
    exact count per key.

    ``output_in_transactions=False``: an app whose output is not part of its transactions (faust sends to
    other topics outside them) may repeat an input's effect after a kill; each repeat must still carry
    the right count, which holds only if the state it restored was exactly the committed one.
    ``kill_app=False``: the app is not SIGKILLed (only the server is), for an app that cannot count
    exactly after a SIGKILL of its own. ``ready``: as for ``restore_after_wiping_state``."""
    first = range(0, 200)
    start_then_produce(server, app, source, first, ready)
    try:
        # each kill lands while the app has a transaction open: the coordinator then aborts it when the
        # next run fences this one (or completes it, had the commit reached it), or carries it across
        # the server's restart
        if kill_app:
            wait_until(lambda: output_count(server.data_dir, sink, READ_UNCOMMITTED) >= 30
                       and transaction_open(server.data_dir, sink, changelog), RUN_TIMEOUT,
                       "the first run wrote some output and has a transaction open", app, interval=0.01)
            app.kill()
            app.start()
        wait_until(lambda: len(committed_seqs(server.data_dir, sink)) >= 100
                   and transaction_open(server.data_dir, sink, changelog), RUN_TIMEOUT,
                   "the app committed output for half the inputs and has a transaction open", app, interval=0.01)
        server.restart(kill=True)
        wait_until(lambda: committed_seqs(server.data_dir, sink) >= set(first), RUN_TIMEOUT,
                   f"the second run committed output for all {len(first)} inputs across the server's restart", app)
        assert app.stop() == 0, app.log_tail()
        assert topic_config(server.data_dir, changelog).get("cleanup.policy") == "compact"
        wait_until(lambda: any(cleaned_offsets(server.data_dir, changelog).values()), RUN_TIMEOUT,
                   f"the log cleaner compacted {changelog}")
        assert changelog_counts(read_topic(server.data_dir, changelog, READ_COMMITTED)) == final_counts(first)

        shutil.rmtree(state_dir)
        everything = range(0, 260)
        start_then_produce(server, app, source, range(200, 260), ready)
        wait_until(lambda: committed_seqs(server.data_dir, sink) >= set(everything), RUN_TIMEOUT,
                   f"the run restored from the changelog committed output for all {len(everything)} inputs", app)
        assert app.stop() == 0, app.log_tail()
        check_exactly_once(read_topic(server.data_dir, sink, READ_COMMITTED), everything, once=output_in_transactions)
        assert changelog_counts(read_topic(server.data_dir, changelog, READ_COMMITTED)) == final_counts(everything)
    finally:
        app.kill()
