"""``serve``: the data directory as a Kafka broker on the wire (``kafka-server-start.sh``'s place)."""

from __future__ import annotations

import sys

import click

from .common import data_dir_option, kafka_errors, parse_number, shown


def _overrides(items) -> dict[str, str]:
    """One NAME=VALUE per --override, as kafka-server-start.sh takes them: the value may hold commas
    (listeners=SSL://127.0.0.1:9093,SASL_SSL://127.0.0.1:9094) and '=' (inline PEM, JAAS lines)."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise click.BadParameter(f"expected NAME=VALUE, got {shown(item)}", param_hint="'--override'")
        out[name.strip()] = value.strip()
    return out


def _check_http(text: str) -> None:
    """--http's port when it is digits: ASCII ones, 0-65535 (0: a free port), checked here so that the
    refusal names the flag and a long number is cut short; the listener parser judges the rest."""
    port = text.rpartition(":")[2].rstrip("/")
    if port.isdigit():  # str.isdigit() is true of other scripts' digits too
        try:
            parse_number(port, 0, 65535)
        except ValueError:
            raise click.BadParameter(f"expected HOST:PORT or PORT (a port 0-65535), got {shown(text)}",
                                     param_hint="'--http'") from None


@click.command("serve")
@data_dir_option(may_create="serve")
@click.option("--override", "overrides", multiple=True, metavar="NAME=VALUE",
              help="A broker setting over server.properties, as kafka-server-start.sh --override takes it "
                   "(listeners=PLAINTEXT://127.0.0.1:0, auto.create.topics.enable=false, ...). Repeatable.")
@click.option("--http", "http", default=None, metavar="HOST:PORT",
              help="Serve the web console here too (http.listeners=http://HOST:PORT), e.g. 127.0.0.1:8080; "
                   "a port alone binds loopback.")
@kafka_errors
def serve(data_dir, server_properties, overrides, http):
    """Serve the data directory to Kafka clients (producers, consumer groups, admin tools) until SIGTERM or
    Ctrl-C, with the log cleaner, retention and Pulsar-style compaction running in the background.

    Listens on PLAINTEXT://127.0.0.1:9092 unless listeners= says otherwise; prints one line per listener
    once it accepts connections.

    With --http (or http.listeners=) the web console is served by the same process; it prints where.

    Example: compactlog serve --data-dir data --http 127.0.0.1:8080
    """
    import asyncio

    from ..console.listeners import parse_http_listeners
    from ..server.network import KafkaServer
    from ..server.server_config import ServerConfig

    extra = _overrides(overrides)
    if http:
        _check_http(http)
        if http.isdigit():  # a port alone: no host, which http.listeners reads as loopback
            http = f":{http}"
        extra["http.listeners"] = http if "://" in http else f"http://{http}"
    config = (ServerConfig.from_file(server_properties, extra) if server_properties else ServerConfig(extra))
    http_listeners = parse_http_listeners(config.get("http.listeners"))  # a bad one is refused before any bind

    def listening(url: str) -> None:
        click.echo(f"compactlog serve: listening on {url}")
        sys.stdout.flush()

    def console(url: str) -> None:
        click.echo(f"compactlog serve: web console at {url}/")
        sys.stdout.flush()

    def web_console(server: KafkaServer):
        """The console, on the broker's process and event loop; aiohttp and jinja load only for it."""
        from ..console.app import build

        return build(server.broker, server, http_listeners, on_url=console)

    # The broker and the console are composed here: the server knows nothing of the console.
    server = KafkaServer(data_dir, config, on_listening=listening, services=[web_console] if http_listeners else [])
    asyncio.run(server.run())
    click.echo("compactlog serve: stopped cleanly")
