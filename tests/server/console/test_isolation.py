"""The console never makes the broker wait: pages queue on the console's own threads, produce does not.

Forty pages that each read and format 500 records are asked for at once; they take seconds to answer
on the console's page thread. A produce request sent while they are queued must be acknowledged
before they have all been answered (an order, not a timing), and every page must still answer.
"""

from __future__ import annotations

import threading
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

PAGES = 40


def test_a_produce_is_acknowledged_while_slow_pages_are_queued(console_server):
    admin = AdminClient({"bootstrap.servers": console_server.bootstrap})
    admin.create_topics([NewTopic("busy", 1)])["busy"].result(30)
    p = Producer({"bootstrap.servers": console_server.bootstrap, "linger.ms": 20, "compression.type": "lz4"})
    value = ('{"sku": "%d", "price": 12.5, "tags": ["a", "b", "c"], "note": "' + "x" * 400 + '"}')
    for i in range(5000):
        p.produce("busy", key=f"k{i}".encode(), value=(value % i).encode())
    assert p.flush(60) == 0

    answered = 0
    lock = threading.Lock()
    first = threading.Event()
    url = f"{console_server.console_url}/topics/busy/messages?partition=0&offset=0&limit=500&format=json"

    def load(_: int) -> int:
        nonlocal answered
        with urllib.request.urlopen(url, timeout=300) as r:
            r.read()
            status = r.status
        with lock:
            answered += 1
        first.set()
        return status

    with ThreadPoolExecutor(PAGES) as pool:
        futures = [pool.submit(load, i) for i in range(PAGES)]
        assert first.wait(120), "no page answered"
        acked = []
        p.produce("busy", key=b"now", value=b"while pages are queued",
                  on_delivery=lambda err, msg: acked.append((err, answered)))
        assert p.flush(60) == 0
        statuses = [f.result() for f in futures]
    err, pages_answered_by_then = acked[0]
    assert err is None
    assert pages_answered_by_then < PAGES, "the produce waited for every page"
    assert statuses == [200] * PAGES
