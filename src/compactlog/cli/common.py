"""Flags and helpers shared by every command, so a flag means the same thing everywhere.

How a command ends (``error_surface``, applied by the ``compactlog`` group to every subcommand and by
``kafka_errors`` to each command):

* a :class:`~compactlog.errors.CompactLogError` is something the user can fix: ``Error: <message>``, exit 1;
* click's own usage errors keep click's handling: ``Error: ...``, exit 2;
* Ctrl-C (KeyboardInterrupt) exits 130, as a shell reports a command stopped by SIGINT, without a traceback;
* standard output closed early (``compactlog consume ... | head -1``) exits 141 without a word, as a tool
  stopped by SIGPIPE does;
* anything else is a bug in compactlog: the traceback, then one line asking to report it, exit 3.
"""

from __future__ import annotations

import functools
import os
import sys
import traceback
from contextlib import contextmanager
from typing import Callable, Iterator, Mapping

import click

from ..errors import CompactLogError, shown  # noqa: F401 (shown: the commands quote refused values with it)
from ..numbers import INT_MAX, LONG_MAX, LONG_MIN, read_integer  # noqa: F401 (the commands take the bounds from here)

EXIT_ERROR = 1  # a CompactLogError: the message says what was wrong
EXIT_USAGE = 2  # click's usage errors (a flag or value the command does not take)
EXIT_BUG = 3  # an exception compactlog did not mean to raise
EXIT_INTERRUPTED = 128 + 2  # SIGINT
EXIT_OUTPUT_CLOSED = 128 + 13  # SIGPIPE

EXIT_STATUS_HELP = f"""\b
Exit status:
  0    done
  {EXIT_ERROR}    error: the message says what was wrong (Error: ...)
  {EXIT_USAGE}    usage: a flag or value the command does not take
  {EXIT_BUG}    a bug in compactlog: the traceback is printed; please report it
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C)
  {EXIT_OUTPUT_CLOSED}  standard output closed early (a pipe into head)"""

_CLICK_EXITS = (click.ClickException, click.exceptions.Exit, click.exceptions.Abort)


@contextmanager
def error_surface() -> Iterator[None]:
    """Turn whatever the block raises into the exit statuses above (click's own exceptions pass)."""
    try:
        yield
    except CompactLogError as exc:
        raise click.ClickException(str(exc)) from None
    except _CLICK_EXITS:
        raise
    except KeyboardInterrupt:
        _quiet_flush()
        if _isatty(sys.stderr):
            click.echo(err=True)  # end the terminal's ^C line
        raise click.exceptions.Exit(EXIT_INTERRUPTED) from None
    except BrokenPipeError as exc:
        if not _stdout_closed():
            _report_bug(exc)
            raise click.exceptions.Exit(EXIT_BUG) from None
        _discard_stdout()
        raise click.exceptions.Exit(EXIT_OUTPUT_CLOSED) from None
    except Exception as exc:
        _report_bug(exc)
        raise click.exceptions.Exit(EXIT_BUG) from None


def kafka_errors(f: Callable) -> Callable:
    """Run a command inside :func:`error_surface` (``Error: ...`` and exit 1 for our typed errors)."""

    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        with error_surface():
            return f(*args, **kwargs)

    return wrapper


class CompactLogGroup(click.Group):
    """A command group whose subcommands, however deep and with or without ``kafka_errors``, end the
    same way; standard output is flushed inside, so a closed pipe is seen here and not at exit.

    ``lazy_commands`` maps a command's name to a function that imports its module and returns it: the
    module is imported the first time the command is looked up, so running one command does not import
    the others (``--help`` looks every one up, for its line of help)."""

    def __init__(self, *args, lazy_commands: Mapping[str, Callable[[], click.Command]] | None = None,
                 **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy_commands:
            self.add_command(self.lazy_commands[cmd_name](), cmd_name)
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context):
        with error_surface():
            rv = super().invoke(ctx)
            sys.stdout.flush()
            return rv


def bug_line(exc: BaseException) -> str:
    from .. import __version__

    kind = type(exc)
    name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    return f"Error: this is a bug in compactlog {__version__} (an unexpected {name}); please report it with the traceback above."


def _report_bug(exc: BaseException) -> None:
    _quiet_flush()
    traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    click.echo(bug_line(exc), err=True)


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _quiet_flush() -> None:
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass


def _stdout_closed() -> bool:
    """Whether standard output is a pipe or socket whose reader has gone (the BrokenPipeError was ours
    to expect, not a bug elsewhere). A stream without a descriptor (a test runner's buffer) cannot break."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):
        return False
    import select

    if not hasattr(select, "poll"):
        return True  # no way to ask: the likeliest pipe is standard output
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


def _discard_stdout() -> None:
    """Point standard output at /dev/null, so the interpreter's last flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (AttributeError, ValueError, OSError):
        pass


def _not_empty(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None and not value.strip():
        raise click.BadParameter("must name a directory, not be empty", ctx=ctx, param=param)
    return value


def data_dir_option(f: Callable | None = None, *, may_create: str = "", wire: bool = False) -> Callable:
    """``--data-dir`` and ``--server-properties``. The directory must exist unless ``may_create`` says
    who makes a missing one (``topics --create``; ``serve``, as a Kafka broker makes its log.dirs), so
    that a mistyped path given to any other command is an error, not a new empty directory.

    ``wire``: the command also takes ``--bootstrap-server HOST:PORT`` instead, for a data directory a
    running broker owns (``compactlog serve``), as Kafka's tools do; exactly one of the two is given,
    and the command gets both arguments (the other is None)."""

    def decorate(f: Callable) -> Callable:
        if wire:
            f = _one_target(f)
            f = click.option("--bootstrap-server", "bootstrap_server", metavar="HOST:PORT", callback=host_ports,
                             help="A running broker (compactlog serve) to work through, instead of --data-dir.")(f)
            from .client_properties import command_config_option

            f = command_config_option(f)
        f = click.option("--server-properties", "server_properties", type=click.Path(exists=True, dir_okay=False),
                         help="Broker defaults in server.properties format (log.retention.ms=..., num.partitions=...).")(f)
        where = f"; {may_create} makes it if missing." if may_create else "; it must exist."
        return click.option("--data-dir", required=not wire, type=click.Path(file_okay=False, exists=not may_create),
                            callback=_not_empty, help="The data directory (Kafka's log.dirs)" + where)(f)

    return decorate(f) if f is not None else decorate


def _one_target(f: Callable) -> Callable:
    @functools.wraps(f)
    def checked(*args, **kwargs):
        data_dir, bootstrap = kwargs.get("data_dir"), kwargs.get("bootstrap_server")
        if (data_dir is None) == (bootstrap is None):
            raise click.UsageError("Give exactly one of --data-dir (a data directory) and --bootstrap-server "
                                   "(a running broker, HOST:PORT).")
        if bootstrap is not None and kwargs.get("server_properties"):
            raise click.UsageError("--server-properties goes with --data-dir; a running broker has its own settings.")
        from .client_properties import NONE, current

        if data_dir is not None and current() is not NONE:
            raise click.UsageError("--command-config goes with --bootstrap-server: it holds a client's settings.")
        return f(*args, **kwargs)

    return checked


def host_ports(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """HOST:PORT[,HOST:PORT...], checked before any connection is tried."""
    if value is None:
        return None
    for entry in value.split(","):
        host, sep, port = entry.strip().rpartition(":")
        try:
            ok = bool(sep and host) and port.isascii() and port.isdigit() and 0 < parse_number(port, 1, 65535)
        except ValueError:
            ok = False
        if not ok:
            raise click.BadParameter(f"expected HOST:PORT (a port 1-65535), got {shown(entry.strip())}", ctx=ctx,
                                     param=param)
    return value


def open_target(data_dir: str | None, server_properties: str | None, bootstrap_server: str | None):
    """What a command with ``data_dir_option(wire=True)`` works on: the data directory, opened here, or the
    broker at ``bootstrap_server`` (``wire.WireClient``, which answers the same CompactLog calls)."""
    if bootstrap_server is not None:
        from .wire import WireClient

        return WireClient(bootstrap_server)
    return open_data_dir(data_dir, server_properties)


def parse_number(text: str, low: int = LONG_MIN, high: int = LONG_MAX) -> int:
    """An integer as Java's ``Long.parseLong`` reads one (``numbers.read_integer``: ASCII digits after
    an optional sign, nothing else, and thousands of digits refused without being converted), within
    [low, high]. ValueError says what was wrong, in the words click uses for its own numbers."""
    value = read_integer(text)
    if value is None:
        raise ValueError(f"{shown(text)} is not a valid integer.")
    if not low <= value <= high:
        shown_value = value if LONG_MIN <= value <= LONG_MAX else shown(text)
        raise ValueError(f"{shown_value} is not in the range {range_text(low, high, value > high)}.")
    return value


def range_text(low: int | float, high: int | float, above: bool = False) -> str:
    """click's way of writing a range: ``x>=0``, ``0<=x<=9``. A bound that is only the type's own
    limit (a long's, an int's) is left out for a value below ``low``, and named for one above it, which
    ``x>=0`` alone would seem to allow."""
    if high in (LONG_MAX, INT_MAX) and not above:
        return f"x>={low}"
    return f"{low}<=x<={high}"


class Number(click.ParamType):
    """A flag's whole number, parsed by :func:`parse_number` within [low, high]: one line naming the
    flag for anything else (click's own int type hands the text to int(), which takes '٣', '1_0' and
    ' 7 ', and answers a 5,000-digit value with Python's advice about its digit limit)."""

    name = "integer"

    def __init__(self, low: int = LONG_MIN, high: int = LONG_MAX) -> None:
        self.low, self.high = low, high

    def convert(self, value, param, ctx):
        try:  # a default comes as an int: it is held to the same bounds
            return parse_number(str(value), self.low, self.high)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)

    def get_metavar(self, param, ctx=None) -> str:
        return "N"

    def __repr__(self) -> str:
        return f"Number({self.low}, {self.high})"


class Decimal(click.ParamType):
    """A flag's decimal number (``50``, ``12.5``, ``1e3``) in ASCII, finite, at least ``low``: Python's
    float() also takes other scripts' digits, ``nan``, ``inf`` and ``1e999``, which is infinite."""

    name = "number"

    def __init__(self, low: float = 0.0) -> None:
        self.low = low

    def convert(self, value, param, ctx):
        import math

        from ..numbers import read_decimal

        text = str(value)
        number = read_decimal(text)
        if number is None:
            self.fail(f"{shown(text)} is not a valid float.", param, ctx)
        if not math.isfinite(number) or number < self.low:
            self.fail(f"{number} is not in the range x>={self.low}.", param, ctx)
        return number


class OneOf(click.Choice):
    """click's Choice, whose refusal repeats a long value cut short (:func:`shown`) instead of whole."""

    def get_invalid_choice_message(self, value, ctx) -> str:
        choices = ", ".join(map(repr, self.choices))
        return f"{shown(str(value))} is not one of {choices}."


def parse_key_values(items: tuple[str, ...] | list[str], what: str, *, commas: bool = False,
                     strip: bool = True) -> dict[str, str]:
    """``k=v`` pairs from repeated flags. Each flag holds one ``k=v`` whose value may hold commas
    (``--config cleanup.policy=compact,delete``, ``--property key.separator=,``), as kafka-topics and
    the console tools take them. ``commas``: kafka-configs' ``--add-config`` rule instead, several pairs
    in one flag split on commas, except inside [...] (``a=1,b=[x,y]``: the brackets keep a list value
    whole and are dropped). ``strip``: spaces around the name and the value are dropped, as kafka-topics
    and kafka-configs drop them; the console tools keep a value as typed (``key.separator= `` is a space)."""
    out: dict[str, str] = {}
    for item in items:
        for part in (_split_top_level(item) if commas else [item]):
            if commas and not part:
                continue
            key, sep, value = part.partition("=")
            if not sep or not key.strip() or commas and _outside_brackets(value).count("="):
                raise click.BadParameter(f"expected key=value, got {shown(part)}", param_hint=f"'{what}'")
            if commas:  # the brackets only keep a list value whole
                value = value.replace("[", "").replace("]", "")
            out[key.strip()] = value.strip() if strip else value
    return out


def _split_top_level(text: str) -> list[str]:
    """Split on commas, except inside [...] (kafka-configs lets list values be bracketed)."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    parts.append("".join(cur))
    return parts


def _outside_brackets(text: str) -> str:
    """``text`` without what is inside [...]: where kafka-configs looks for a second '='."""
    out, depth = [], 0
    for ch in text:
        depth += ch == "["
        if depth == 0:
            out.append(ch)
        depth -= ch == "]" and depth > 0
    return "".join(out)


def check_property_names(props: dict[str, str], known: set[str], what: str) -> None:
    unknown = sorted(set(props) - known)
    if unknown:
        raise click.BadParameter(f"unknown {what} property {shown(unknown[0], '')} (known: {', '.join(sorted(known))})",
                                 param_hint="'--property'")


def bool_property(props: dict[str, str], name: str, default: bool) -> bool:
    """A true/false ``--property``; anything else is refused rather than read as false."""
    if name not in props:
        return default
    value = props[name].strip().lower()
    if value not in ("true", "false"):
        raise click.BadParameter(f"{name} must be true or false, got {shown(props[name])}", param_hint="'--property'")
    return value == "true"


def unescape_property(props: dict[str, str], name: str, default: str) -> str:
    r"""A separator ``--property`` with its backslash escapes (``\t``, ``\n``, ``\u0001``) applied, as
    Kafka's console tools are usually given them; other characters are kept as typed."""
    text = props.get(name, default)
    try:
        # latin-1 with backslashreplace keeps every character: what unicode_escape reads back is the text.
        return text.encode("latin-1", "backslashreplace").decode("unicode_escape")
    except UnicodeDecodeError as exc:
        raise click.BadParameter(f"{name}={text}: bad escape ({exc.reason})", param_hint="'--property'") from None


def check_compression_level(codec_name: str, level: int | None, flag: str = "--compression-level") -> None:
    """A producer-side level for ``codec_name``, checked as Kafka checks ``compression.<codec>.level``."""
    if level is None:
        return
    from ..records.codecs import LEVELS, codec_from_name
    from ..storage.topic_config import TOPIC_CONFIGS

    codec = codec_from_name(codec_name)
    if codec not in LEVELS:
        *some, last = [c.config_name for c in LEVELS]
        raise click.BadParameter(f"the {codec.config_name} codec has no levels ({', '.join(some)} and {last} have)",
                                 param_hint=f"'{flag}'")
    TOPIC_CONFIGS[f"compression.{codec.config_name}.level"].parse(level)  # InvalidConfigError in Kafka's words


def open_data_dir(data_dir: str, server_properties: str | None):
    """Open ``--data-dir``. A ``server.properties`` is read as ``serve`` reads it (the server's own settings,
    ``listeners`` and the like, are known names there, not warned about), and its storage settings apply."""
    from .. import open as open_dir

    if server_properties is None:
        return open_dir(data_dir)
    from ..server.server_config import ServerConfig

    return open_dir(data_dir, ServerConfig.from_file(server_properties))
