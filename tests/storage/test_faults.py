"""Resource faults for real: a full file system, a file-size limit, a small descriptor limit.

The promises under test: an append that failed is not stored (a reopen does not find part of it), every
acknowledged append is found after a reopen at the offset it was given, no offset is handed out twice,
and the directory refuses writes with a clear error once one failed, until it is reopened.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

import compactlog
from compactlog.errors import KafkaStorageError, PolicyViolationError

T = "t"
VALUE = b"x" * 1000


def _mount_tmpfs(where: Path, size: str) -> bool:
    where.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                              capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@pytest.fixture
def small_fs(tmp_path):
    """A 5 MiB tmpfs: a file system that really fills up (needs the right to mount, as root has)."""
    where = tmp_path / "small"
    if not _mount_tmpfs(where, "5m"):
        pytest.skip("cannot mount a tmpfs here (mounting needs root); the file-size limit test covers short writes")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=30)


def _produce_until_refused(cl, limit: int = 100_000) -> tuple[dict[int, bytes], KafkaStorageError]:
    """Produce batches of growing size until the storage refuses one; returns what was acknowledged."""
    acked: dict[int, bytes] = {}
    for i in range(limit):
        rows = [(b"k%d" % i, VALUE + b"%d-%d" % (i, j)) for j in range(1 + i % 7)]
        try:
            res = cl.produce_batch(T, rows)
        except KafkaStorageError as exc:
            return acked, exc
        for off, (_, v) in zip(range(res[0].first_offset, res[0].last_offset + 1), rows):
            acked[off] = v
    raise AssertionError("the storage never filled up")


def _check_stored(cl, acked: dict[int, bytes]) -> None:
    got = {r.offset: r.value for r in cl.consume(T, from_beginning=True)}
    assert got == acked  # every acknowledged record, at its offset; nothing of the refused append


def test_a_full_file_system_loses_nothing_acknowledged(small_fs):
    ballast = small_fs / "ballast"
    ballast.write_bytes(b"\0" * (1 << 20))  # room to free later
    data = small_fs / "data"
    cl = compactlog.open(data)
    cl.create_topic(T, 1, {"segment.bytes": str(1 << 20)})
    acked, exc = _produce_until_refused(cl)
    assert "No space left on device" in str(exc) and "offline" in str(exc)
    assert len(acked) > 1000
    with pytest.raises(KafkaStorageError, match="offline"):  # refused until reopened, even a small append
        cl.produce(T, b"small")
    _check_stored(cl, acked)  # reads go on
    try:
        cl.close()
    except KafkaStorageError:
        pass
    assert not (data / ".kafka_cleanshutdown").exists()  # the next open checks the logs

    ballast.unlink()
    with compactlog.open(data) as cl:
        _check_stored(cl, acked)
        nxt = max(acked) + 1
        assert cl.produce(T, b"after", key=b"k").offset == nxt  # no offset handed out twice
    with compactlog.open(data) as cl:
        _check_stored(cl, {**acked, nxt: b"after"})


CHILD = textwrap.dedent(
    """
    import json, resource, sys
    import compactlog
    from compactlog.errors import KafkaStorageError
    data, limit = sys.argv[1], int(sys.argv[2])
    cl = compactlog.open(data)
    cl.create_topic("t", 1, {"segment.bytes": str(1 << 20), "index.interval.bytes": "100"})
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    acked = {}
    i = 0
    while True:
        rows = [(b"k%d" % i, b"x" * 1000 + b"%d-%d" % (i, j)) for j in range(1 + i % 7)]
        try:
            res = cl.produce_batch("t", rows)
        except KafkaStorageError as exc:
            error = str(exc)
            break
        for off, (_, v) in zip(range(res[0].first_offset, res[0].last_offset + 1), rows):
            acked[off] = v.decode()
        i += 1
    try:
        cl.produce("t", b"small")
        refused = False
    except KafkaStorageError:
        refused = True
    try:
        cl.close()
    except KafkaStorageError:
        pass
    print(json.dumps({"acked": acked, "error": error, "refused": refused}))
    """
)


def test_a_file_size_limit_rolls_the_partial_batch_back(tmp_path):
    """RLIMIT_FSIZE makes a write stop short (EFBIG): the same short write a full disk gives, without
    needing to mount anything."""
    data = tmp_path / "data"
    out = subprocess.run([sys.executable, "-c", CHILD, str(data), str(300_000)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    acked = {int(k): v.encode() for k, v in report["acked"].items()}
    assert "File too large" in report["error"] and report["refused"]
    assert len(acked) > 100
    seg = data / "t-0" / "00000000000000000000.log"
    assert seg.stat().st_size <= 300_000
    with compactlog.open(data) as cl:
        _check_stored(cl, acked)
        nxt = max(acked) + 1
        assert cl.produce(T, b"after").offset == nxt


FD_CHILD = textwrap.dedent(
    """
    import resource, sys
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    import compactlog
    data = sys.argv[1]
    with compactlog.open(data) as cl:
        cl.create_topic("many", 600, {"segment.bytes": "2000"})
        for p in range(600):
            cl.produce_batch("many", [(b"k", b"v" * 300)] * 20, partition=p, batch_bytes=1500)
    with compactlog.open(data) as cl:
        total = sum(1 for _ in cl.consume("many", from_beginning=True))
        segments = sum(len(cl.log("many", p).segments) for p in range(600))
        cl.delete_topic("many")
        print(total, segments, cl.list_topics())
    """
)


def test_six_hundred_partitions_under_a_256_descriptor_limit(tmp_path):
    out = subprocess.run([sys.executable, "-c", FD_CHILD, str(tmp_path / "data")], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    total, segments, topics = out.stdout.split(maxsplit=2)
    assert int(total) == 600 * 20
    assert int(segments) > 600 * 3  # several segments each: far more files than descriptors
    assert topics.strip() == "[]"


def test_a_huge_partition_count_is_refused_before_anything_is_written(tmp_path):
    with compactlog.open(tmp_path) as cl:
        with pytest.raises(PolicyViolationError, match="max.broker.partitions"):
            cl.create_topic(T, 10**9)
        assert cl.list_topics() == []
    assert [p.name for p in tmp_path.iterdir() if p.is_dir()] == []  # not a folder made


def test_a_failed_create_leaves_no_half_made_topic(tmp_path):
    """A partition directory that cannot be made (a file is in the way) fails the create as a whole."""
    (tmp_path / "__topics").mkdir()
    (tmp_path / f"{T}-2").write_text("in the way")
    with compactlog.open(tmp_path) as cl:
        with pytest.raises(KafkaStorageError, match=f"{T}-2"):
            cl.create_topic(T, 4)
        assert cl.list_topics() == []
    assert not (tmp_path / "__topics" / f"{T}.json").exists()
    assert not any((tmp_path / f"{T}-{p}").is_dir() for p in range(4))
    (tmp_path / f"{T}-2").unlink()
    with compactlog.open(tmp_path) as cl:
        cl.create_topic(T, 4)
        assert cl.describe_topic(T).partitions[3].log_end_offset == 0


def test_the_longest_legal_topic_name_works_end_to_end(tmp_path):
    name = "n" * 249
    with compactlog.open(tmp_path) as cl:
        cl.create_topic(name, 1, {"cleanup.policy": "compact"})
        cl.produce(name, b"1", key=b"a")
        cl.alter_topic_config(name, set={"retention.ms": "1000"})
    with compactlog.open(tmp_path) as cl:
        assert [r.value for r in cl.consume(name, from_beginning=True)] == [b"1"]
        cl.delete_topic(name)
        assert cl.list_topics() == []
    with compactlog.open(tmp_path) as cl:
        assert cl.list_topics() == []


def test_a_read_only_directory_is_named(tmp_path):
    if os.geteuid() == 0:
        where = tmp_path / "ro"
        if not _mount_tmpfs(where, "1m"):
            pytest.skip("cannot mount a tmpfs here")
        try:
            subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True, capture_output=True)
            with pytest.raises(KafkaStorageError, match=str(where)):
                compactlog.open(where / "data")
        finally:
            subprocess.run(["umount", "-l", str(where)], capture_output=True)
    else:
        where = tmp_path / "ro"
        where.mkdir()
        where.chmod(0o500)
        with pytest.raises(KafkaStorageError, match=str(where)):
            compactlog.open(where / "data")


def test_a_data_dir_under_a_regular_file_is_named(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(KafkaStorageError, match=r"cannot use .*file/data as a data directory"):
        compactlog.open(f / "data")


def test_unique_names_do_not_leak_into_a_reopen(tmp_path):
    """A topic deleted while its directory could not be removed at once is gone after a reopen."""
    with compactlog.open(tmp_path) as cl:
        cl.create_topic(T, 2)
    marked = tmp_path / f"{T}-0.{uuid.uuid4().hex}-delete"
    (tmp_path / f"{T}-0").rename(marked)
    with compactlog.open(tmp_path) as cl:
        assert not marked.exists()
        assert cl.end_offsets(T) == {0: 0, 1: 0}


def test_the_decompression_bound_is_the_broker_setting(tmp_path):
    from compactlog.errors import CorruptRecordError
    from compactlog.records import Codec, build_batch

    with compactlog.open(tmp_path, {"message.max.decompressed.bytes": "65536"}) as cl:
        cl.create_topic(T, 1, {"compression.type": "lz4"})  # appends are rebuilt: the records get decompressed
        fits = build_batch([b"k"], [b"a" * 60_000], [1], codec=Codec.ZSTD)
        cl.append_batch(T, 0, fits)
        bomb = build_batch([b"k"], [b"a" * 70_000], [1], codec=Codec.ZSTD)
        with pytest.raises(CorruptRecordError, match="decompress to more than 65536 bytes"):
            cl.append_batch(T, 0, bomb)
        assert [len(r.value) for r in cl.consume(T, from_beginning=True)] == [60_000]


BOMB_CHILD = textwrap.dedent(
    """
    import resource, sys
    import compactlog
    from compactlog.errors import CorruptRecordError
    from compactlog.records import Codec, build_batch
    with open("/proc/self/status") as f:
        size = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
    bomb = build_batch([b"k"] * 64, [b"\\0" * (1 << 24)] * 64, [1] * 64, codec=Codec[sys.argv[2]])  # 1 GiB of zeros
    cl = compactlog.open(sys.argv[1])
    cl.create_topic("t", 1, {"compression.type": "gzip", "max.message.bytes": str(len(bomb) + 1000)})
    resource.setrlimit(resource.RLIMIT_AS, (size + (400 << 20), resource.RLIM_INFINITY))
    try:
        cl.append_batch("t", 0, bomb)
        print("accepted")
    except CorruptRecordError as exc:
        print("refused", exc)
    """
)


@pytest.mark.parametrize("codec", ["ZSTD", "GZIP", "LZ4"])
def test_a_compression_bomb_is_refused_within_bounded_memory(tmp_path, codec):
    out = subprocess.run([sys.executable, "-c", BOMB_CHILD, str(tmp_path / codec), codec], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("refused") and "decompress to more than" in out.stdout, out.stdout


def test_a_full_disk_while_cleaning_leaves_the_log_whole_and_is_reported(small_fs):
    data = small_fs / "data"
    with compactlog.open(data) as cl:
        cl.create_topic(T, 1, {"cleanup.policy": "compact", "segment.bytes": "200000", "min.cleanable.dirty.ratio": "0.01"})
        for i in range(200):  # every key once: the cleaned copy is as big as the log
            cl.produce_batch(T, [(b"k%d-%d" % (i, j), b"%d" % j * 100) for j in range(20)])
        before = [(r.offset, r.value) for r in cl.consume(T, from_beginning=True)]
    free = os.statvfs(small_fs).f_bavail * os.statvfs(small_fs).f_frsize
    (small_fs / "ballast").write_bytes(b"\0" * (free - 100_000))  # less room than one cleaned segment takes
    out = subprocess.run([sys.executable, "-m", "compactlog", "clean", "--data-dir", str(data), "--topic", T],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert "t-0: cleaning failed: No space left on device" in out.stderr and "Traceback" not in out.stderr
    assert not [p for p in (data / "t-0").iterdir() if p.name.endswith((".cleaned", ".swap"))]
    with compactlog.open(data) as cl:
        assert [(r.offset, r.value) for r in cl.consume(T, from_beginning=True)] == before
        assert cl.produce(T, b"after", key=b"k").offset == len(before)


def test_a_full_disk_while_building_the_compacted_view_is_named_and_changes_nothing(small_fs):
    data = small_fs / "data"
    with compactlog.open(data) as cl:
        cl.create_topic(T, 1, {"segment.bytes": "200000"})
        for i in range(200):
            cl.produce_batch(T, [(b"k%d-%d" % (i, j), b"%d" % j * 100) for j in range(20)])
    free = os.statvfs(small_fs).f_bavail * os.statvfs(small_fs).f_frsize
    (small_fs / "ballast").write_bytes(b"\0" * (free - 100_000))
    out = subprocess.run([sys.executable, "-m", "compactlog", "compact-topic", "--data-dir", str(data), "--topic", T],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "compaction of t-0 failed: No space left on device" in out.stderr
    (small_fs / "ballast").unlink()
    with compactlog.open(data) as cl:
        [status] = cl.compaction_status(T)
        assert status.status == "ERROR" and "No space left on device" in status.error
        assert sum(1 for _ in cl.consume(T, from_beginning=True, read_compacted=True)) == 4000
        assert cl.compact_topic(T)[0] is not None  # with room again, a run succeeds
