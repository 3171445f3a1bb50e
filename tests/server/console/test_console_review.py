"""The console's robustness against a running broker: a stop during a job, topics that go away while
a page reads them, Kafka's figures on the pages, and the overview's cost with many partitions.

Each test runs a real ``compactlog serve`` and speaks plain HTTP to its console (a cookie jar keeps the
session, and the CSRF token is read from a form like a browser would read it).
"""

from __future__ import annotations

import http.cookiejar
import os
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import compactlog

CSRF = re.compile(r'name="csrf" value="([^"]+)"')


class Client:
    """A browser's cookies and CSRF token, without the browser; redirects are answers, not followed."""

    class _NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    def __init__(self, base: str) -> None:
        self.base = base
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()),
                                                  self._NoRedirect)
        self.csrf = ""

    def request(self, path: str, form: dict | None = None) -> tuple[int, dict, str]:
        data = None
        if form is not None:
            if not self.csrf:
                self.csrf = CSRF.search(self.request("/topics/new")[2]).group(1)
            data = urllib.parse.urlencode({**form, "csrf": self.csrf}).encode()
        req = urllib.request.Request(self.base + path, data=data, method="POST" if form is not None else "GET")
        try:
            with self.opener.open(req, timeout=60) as r:
                return r.status, dict(r.headers), r.read().decode(errors="replace")
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read().decode(errors="replace")

    def get(self, path: str) -> tuple[int, str]:
        status, _, text = self.request(path)
        return status, text

    def post(self, path: str, **form: str) -> tuple[int, dict, str]:
        return self.request(path, form)


def fill_compacted_topic(data_dir: Path, name: str, batches: int, records: int = 1000, value_bytes: int = 900) -> None:
    """A compacted topic written through the embedded API before the server opens the directory
    (much faster than a client for hundreds of MB)."""
    value = os.urandom(value_bytes)
    with compactlog.open(str(data_dir)) as cl:
        cl.create_topic(name, 1, {"cleanup.policy": "compact", "segment.bytes": str(8 << 20)})
        for i in range(batches):
            cl.produce_batch(name, [(b"k%d" % (j + i * records), value) for j in range(records)], partition=0)


def test_sigterm_during_a_compaction_job_stops_the_job_before_the_logs_close(serve_factory, tmp_path):
    """The job gives up (its unpublished side log removed), the server stops within seconds, and the
    clean-shutdown marker is the last thing written: no compaction state appears after it."""
    data = tmp_path / "data"
    fill_compacted_topic(data, "big", 300)  # ~280 MB: a compaction of some seconds
    s = serve_factory(data, **{"http.listeners": "http://127.0.0.1:0", "log.cleaner.enable": "false"})
    c = Client(s.console_url)
    status, headers, _ = c.post("/cleaner/compact/big")
    assert status == 303, status
    job = headers["Location"]
    deadline = time.monotonic() + 20
    while not re.search(r'data-state="running".*?read of about', c.get(job)[1], re.DOTALL):
        assert time.monotonic() < deadline, c.get(job)[1]
        time.sleep(0.02)

    t0 = time.monotonic()
    assert s.stop(timeout=30) == 0
    stopped_in = time.monotonic() - t0
    marker = data / ".kafka_cleanshutdown"
    assert marker.exists()
    partition = data / "big-0"
    assert not (partition / "compaction-state").exists(), "the compaction published after the shutdown began"
    assert not list(partition.glob("compacted.*")), "an unpublished side log was left behind"
    assert stopped_in < 10, stopped_in
    assert "stopped cleanly" in s.proc.stdout.read().decode()


def test_pages_answer_while_a_topic_is_created_grown_and_deleted_under_them(serve_factory):
    """Never a 500: a page that loses the race with a delete says the topic does not exist, and one
    reading during a CreatePartitions sees the old count or the new one."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

    s = serve_factory(**{"http.listeners": "http://127.0.0.1:0", "auto.create.topics.enable": "false"})
    stop = threading.Event()
    answers: list[tuple[str, int, str]] = []
    cycles = [0]

    def churn() -> None:
        admin = AdminClient({"bootstrap.servers": s.bootstrap})
        producer = Producer({"bootstrap.servers": s.bootstrap, "linger.ms": 0})
        while not stop.is_set():
            admin.create_topics([NewTopic("churn", 2)])["churn"].result(10)
            for i in range(200):
                producer.produce("churn", key=b"k%d" % (i % 7), value=b"x" * 50)
            producer.flush(10)
            admin.create_partitions([NewPartitions("churn", 5)])["churn"].result(10)
            admin.delete_topics(["churn"])["churn"].result(10)
            cycles[0] += 1

    def read(paths: list[str]) -> None:
        c = Client(s.console_url)
        while not stop.is_set():
            for p in paths:
                status, text = c.get(p)
                answers.append((p, status, text))

    threads = [threading.Thread(target=churn),
               threading.Thread(target=read, args=(["/", "/topics/churn"],)),
               threading.Thread(target=read, args=(["/topics/churn/messages?partition=4", "/topics/churn/compression",
                                                     "/cleaner"],))]
    for t in threads:
        t.start()
    time.sleep(6)
    stop.set()
    for t in threads:
        t.join(30)
    assert cycles[0] >= 3, cycles
    failed = [(p, status, text[:300]) for p, status, text in answers if status >= 500]
    assert not failed, failed[:3]
    gone = [text for p, status, text in answers if p == "/topics/churn" and status == 404]
    assert all("Topic &#39;churn&#39; does not exist." in t for t in gone), [re.sub(r"\s+", " ", t)[-600:] for t in gone if "Topic &#39;churn&#39; does not exist." not in t][:2]
    assert "Traceback" not in s.log_text()


def test_the_active_segment_is_summarised_from_where_the_last_look_stopped(tmp_path, monkeypatch):
    """The overview reads only what was appended since its last look, and a truncation (the segment
    shrinks, then grows again past the old position) starts the count over."""
    from compactlog import segment_summaries
    from compactlog.console import inventory

    def full(lg) -> tuple:
        s = segment_summaries.summarize(lg.segments[-1], lg.log_end_offset)
        return s.batches, s.records, s.codecs, s.first_timestamp, s.max_timestamp, s.size

    with compactlog.open(str(tmp_path / "data")) as cl:
        cl.create_topic("t", 1)
        cl.produce_batch("t", [(b"k", b"v" * 100)] * 50, partition=0, compression="zstd")
        lg = cl.log("t", 0)
        facts = inventory.partition_facts(cl, "t", 0)
        assert facts.records == 50
        looked = lg.segments[-1].size
        read: list[tuple[int, int | None]] = []
        batches = type(lg.segments[-1]).batches
        monkeypatch.setattr(type(lg.segments[-1]), "batches",
                            lambda seg, position=0, end=None: (read.append((position, end)), batches(seg, position, end))[1])
        cl.produce_batch("t", [(b"k", b"w" * 100)] * 30, partition=0)
        facts = inventory.partition_facts(cl, "t", 0)
        assert facts.records == 80
        # the last batch counted is checked (one batch), then only the new bytes are read
        assert read == [(0, looked), (looked, lg.segments[-1].size)], read
        s = facts.segments[-1]
        assert (s.batches, s.records, s.codecs, s.first_timestamp, s.max_timestamp, s.size) == full(lg)
        assert s.codecs == ("zstd", "none")

        cl.truncate("t", 0, 50)  # back to the first batch, then longer than before
        cl.produce_batch("t", [(b"k", b"x" * 300)] * 40, partition=0, compression="gzip")
        s = inventory.partition_facts(cl, "t", 0).segments[-1]
        assert s.records == 90
        assert (s.batches, s.records, s.codecs, s.first_timestamp, s.max_timestamp, s.size) == full(lg)


def test_processed_megabytes_are_kafkas_bytes_read_alone():
    """Kafka's "MB of log processed in S seconds (R MB/sec)" counts the cleaning pass's bytesRead over
    the whole round, not the indexing pass's bytes too (LogCleaner.recordStats); the console's runs
    table shows the same rate."""
    from compactlog.cleaner.cleaner import CleanerStats
    from compactlog.cleaner.log_cleaner import CleanResult, stats_report
    from compactlog.console.render import environment

    mb = 1 << 20
    s = CleanerStats(bytes_read=30 * mb, bytes_written=10 * mb, map_bytes_read=20 * mb, messages_read=9,
                     messages_written=3, started=100.0, map_done=102.0, ended=110.0)
    lines = stats_report(0, "t-0", 0, 9, s).splitlines()
    assert lines[1] == "\t30.0 MB of log processed in 10.0 seconds (3.0 MB/sec)."
    assert lines[2].startswith("\tIndexed 20.0 MB in 2.0 seconds (10.0 Mb/sec")
    assert lines[4].startswith("\tCleaned 30.0 MB in 8.0 seconds (3.8 Mb/sec")

    table = environment().from_string('{% from "cleaner_runs.html" import runs_table %}{{ runs_table(runs) }}')
    html = table.render(runs=[CleanResult("t", 0, 0, 9, s, 0, "kafka-log-cleaner-thread-0")])
    cells = re.findall(r'<td class="num">([^<]*)</td>', html)
    assert "3.0" in cells and "5.0" not in cells, cells
