"""A --bootstrap-server that takes the connection and then closes it (a SASL or SSL listener does, to a
PLAINTEXT client) is told apart from one where nothing listens: both were 'no broker answered', which sent
operators looking for a broker that was running."""

from __future__ import annotations

import socket
import threading

from click.testing import CliRunner

from compactlog.cli import main


def test_a_listener_that_closes_the_connection_is_named_as_such(monkeypatch):
    from compactlog.cli import wire

    monkeypatch.setattr(wire, "CONNECT_TIMEOUT_S", 2.0)  # librdkafka retries the closing listener until then
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.2)
    port = server.getsockname()[1]
    stop = threading.Event()

    def close_each() -> None:  # what a SASL listener does to a request before the login, here to every one
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            conn.close()

    thread = threading.Thread(target=close_each, daemon=True)
    thread.start()
    try:
        result = CliRunner().invoke(main, ["topics", "--bootstrap-server", f"127.0.0.1:{port}", "--list"])
    finally:
        stop.set()
        thread.join(5)
        server.close()
    assert result.exit_code == 1, result.output
    assert result.output.startswith(f"Error: the listener at 127.0.0.1:{port} took the connection but answered no "
                                    "PLAINTEXT request (a listener of another security protocol? give its client settings "
                                    "with --command-config FILE)")

    with socket.socket() as free:  # nothing listens here once it is closed
        free.bind(("127.0.0.1", 0))
        closed = free.getsockname()[1]
    result = CliRunner().invoke(main, ["topics", "--bootstrap-server", f"127.0.0.1:{closed}", "--list"])
    assert result.exit_code == 1 and result.output.startswith(f"Error: no broker answered at 127.0.0.1:{closed}: ")
