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
                for i in range(3000):
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
