"""Suite-wide checks."""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import pytest

import compactlog
from compactlog.records import BatchInfo, build_batch

OFFSETS = "__consumer_offsets"


def pytest_sessionstart(session: pytest.Session) -> None:
    """With COMPACTLOG_EXPECT_NATIVE=1, stop at once if the compiled record kernels are not in use.

    A failed compile falls back to the Python twin quietly (by design, for installs without a compiler),
    so CI would otherwise pass on the slow path without anyone noticing. The twin run of the suite sets
    COMPACTLOG_NO_EXTENSIONS=1, which asks for the twin, so the expectation does not apply there.
    """
    if os.environ.get("COMPACTLOG_EXPECT_NATIVE") != "1" or os.environ.get("COMPACTLOG_NO_EXTENSIONS"):
        return
    from compactlog.records import kernels

    if kernels.NATIVE is not True:
        pytest.exit("COMPACTLOG_EXPECT_NATIVE=1 but the compiled record kernels are not in use "
                    "(compactlog.records._native did not build or import)", returncode=1)


@pytest.fixture
def damaged(tmp_path):
    """A data directory whose topic t (one partition) holds three one-record batches with one byte of
    the second one's value flipped, and a clean-shutdown marker (so recovery trusts the files, as it
    does after any clean close). The flip turns "value-1" into "value-0", a plausible value that only
    the CRC tells apart."""
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1)
        for v in (b"value-0", b"value-1", b"value-2"):
            cl.produce("t", v, key=b"k")
        seg = cl.log("t").active_segment.log_path
    raw = bytearray(seg.read_bytes())
    raw[raw.index(b"value-1") + 6] ^= 0x01
    seg.write_bytes(bytes(raw))
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    return tmp_path


def commit_marker(base_offset: int) -> bytes:
    """A transaction COMMIT control batch as a Kafka leader writes one (key: version 0, type 1)."""
    return build_batch([struct.pack(">hh", 0, 1)], [struct.pack(">hi", 0, 0)], [1_700_000_000_000],
                       info=BatchInfo(base_offset=base_offset, producer_id=7, producer_epoch=0,
                                      is_transactional=True, is_control=True))


def kafka_log_dir(root: Path) -> dict:
    """Write a log directory the way a Kafka broker leaves one, and return what it holds."""
    with compactlog.open(root) as cl:
        cl.create_topic("prices", 2, {"segment.bytes": "2000"})
        cl.create_topic(OFFSETS, 3, {"cleanup.policy": "compact", "segment.bytes": "2000"})
        cl.produce_batch("prices", [(b"p%d" % (i % 9), b"%d" % i) for i in range(300)], batch_bytes=200)
        for p in (0, 2):
            cl.produce_batch(OFFSETS, [(b"group-%d" % (i % 4), b"offset-%d" % i) for i in range(200)], partition=p,
                             batch_bytes=200)
        lg = cl.log("prices", 0)
        lg.append_as_follower(commit_marker(lg.log_end_offset))
        expected = {t: [(r.partition, r.offset, r.key, r.value) for r in cl.consume(t, from_beginning=True)
                        if r.key != struct.pack(">hh", 0, 1)] for t in ("prices", OFFSETS)}
        ids = {t: cl.describe_topic(t).topic_id for t in ("prices", OFFSETS)}
    # What a Kafka broker has and compactlog does not write: no topic metadata folder, its own files.
    shutil.rmtree(root / "__topics")
    shutil.rmtree(root / f"{OFFSETS}-1")  # held by another broker of the cluster
    expected[OFFSETS] = [r for r in expected[OFFSETS] if r[0] != 1]
    (root / "meta.properties").write_text("version=1\ncluster.id=q1Sh-9_ISia_zwGINzRvyQ\nnode.id=1\n")
    (root / "replication-offset-checkpoint").write_text("0\n1\nprices 0 301\n")
    for d in [root / "prices-0", root / "prices-1", root / f"{OFFSETS}-0", root / f"{OFFSETS}-2"]:
        (d / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")
        (d / "00000000000000000123.snapshot").write_bytes(b"producer state")
    (root / "prices-7.4b2e2a1f0b8c4f4d9c0d3d0e0a0b0c0d-delete").mkdir()
    return {"expected": expected, "ids": ids}


@pytest.fixture
def kafka_dir(tmp_path):
    """A log directory as a Kafka broker leaves one (see ``kafka_log_dir``): (its path, what it holds)."""
    return tmp_path, kafka_log_dir(tmp_path)
