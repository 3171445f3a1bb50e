"""Cleaning runs beside appends and reads: producers are never blocked for a round, readers never see
a record twice, out of order or changed, and the latest value per key is always readable."""

from __future__ import annotations

import threading

import compactlog

CFG = {"cleanup.policy": "compact", "segment.bytes": "3000", "min.cleanable.dirty.ratio": "0.01",
       "file.delete.delay.ms": "0"}


def test_appends_and_reads_during_cleaning(tmp_path):
    with compactlog.open(tmp_path) as cl:
        cl.create_topic("t", 1, CFG)
        appended: dict[int, tuple[bytes, bytes]] = {}
        stop = threading.Event()
        errors: list[BaseException] = []

        def produce():
            try:
                # bounded: beside a reader that walks the log from its start in a loop, each append waits
                # far longer than alone (300 appends: 14 s here, 0.2 s without the reader; not yet explained)
                for i in range(300):
                    rows = [(b"key-%d" % (i % 40), b"value-%d" % i)]
                    res = cl.produce_batch("t", rows, partition=0)
                    appended[res[0].first_offset] = rows[0]
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)
            finally:
                stop.set()

        def read():
            try:
                while not stop.is_set():
                    seen = [(r.offset, r.key, r.value) for r in cl.consume("t", 0, from_beginning=True)]
                    offs = [o for o, _, _ in seen]
                    assert offs == sorted(set(offs)), "a reader saw a record twice or out of order"
                    for o, k, v in seen:
                        assert v == b"value-%d" % int(v.split(b"-")[1]) and k == b"key-%d" % (int(v.split(b"-")[1]) % 40)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=produce), threading.Thread(target=read)]
        for t in threads:
            t.start()
        rounds = 0
        while not stop.is_set():
            rounds += len(cl.clean("t").compactions)
        for t in threads:
            t.join()
        assert not errors, errors
        assert rounds > 0
        final = {r.offset: (r.key, r.value) for r in cl.consume("t", 0, from_beginning=True)}
        for off, kv in final.items():
            assert appended[off] == kv
        latest = {}
        for off in sorted(appended):
            latest[appended[off][0]] = off
        assert all(off in final for off in latest.values())


def _dirty_topic(cl, name: str) -> None:
    cl.create_topic(name, 1, CFG)
    for i in range(300):
        cl.produce_batch(name, [(b"key-%d" % (i % 10), b"value-%d" % i)], partition=0)


def test_a_topic_being_deleted_is_never_handed_to_the_cleaner(tmp_path):
    """Deleting a topic pauses its partitions until they have left the logs. (They used to be resumed
    first: a cleaner thread could take one in between and swap segments into a directory already renamed
    for deletion, an I/O error that took the whole data directory offline.)"""
    from compactlog.api import CompactLog

    cl = CompactLog(tmp_path, background=False)
    try:
        _dirty_topic(cl, "doomed")
        handed = []

        def cleaner_looks(tp) -> None:  # runs after the cleaner's own hook, while the log is still listed
            chosen, _ = cl.cleaner.manager.grab_filthiest(dict(cl.manager.logs), cl.cleaner.time.milliseconds())
            handed.append(chosen)

        assert cl.cleaner is not None  # built (it is built on first use) before this hook, so its own hook runs first
        cl.manager.on_partition_deleted.append(cleaner_looks)
        assert cl.cleaner.manager.to_clean(("doomed", 0), cl.log("doomed", 0), 0).dirty_ratio > 0.5
        cl.delete_topic("doomed")
        assert handed == [None]
        assert ("doomed", 0) not in cl.cleaner.manager.states  # forgotten once gone
        _dirty_topic(cl, "doomed")  # the name again: a new log the cleaner takes
        assert [r.partition for r in cl.clean("doomed").compactions] == [0]
    finally:
        cl.close()


def test_topics_deleted_while_cleaner_threads_run_leave_the_directory_online(tmp_path):
    with compactlog.open(tmp_path, config={"log.cleaner.backoff.ms": "1", "log.cleaner.threads": "2"}) as cl:
        cl.create_topic("keeps", 1, {"cleanup.policy": "compact"})
        for round_ in range(25):
            _dirty_topic(cl, f"churn-{round_ % 3}")
            cl.delete_topic(f"churn-{round_ % 3}")
        cl.produce("keeps", b"still writable", key=b"k")  # raises if the directory went offline
        assert cl.cleaner.dead_threads == 0
        assert not cl.cleaner.manager.uncleanable
        assert [r.value for r in cl.consume("keeps", 0, from_beginning=True)] == [b"still writable"]
