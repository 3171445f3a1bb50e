"""Every numeric and enumerated flag of every command, given what a user can type by mistake: a
negative number, zero, a 5,000-digit number, nothing, digits of another script, a letter with an
accent, a word. Each is either taken (a value the flag allows) or refused with one line that names the
flag; never a traceback, never Python's advice about its digit limit, within a bounded time.

The flags are found by walking the command tree and each option's type, so a flag added later is
covered without a line here; a flag typed with click's own int or float (which take '٣' and answer
thousands of digits with Python's message) fails the test. The parsing runs in-process through click's
``make_context`` (no command body runs); a few whole processes check what a user sees.
"""

from __future__ import annotations

import subprocess
import sys
import time

import click
import pytest

from compactlog.cli import main
from compactlog.cli.common import Decimal, Number, OneOf

BAD = ["-3", "0", "9" * 5000, "", "\u0663", "\u00e9", "garbage"]
# Flags whose text is read as one of a fixed set, or a format, by the command itself (not by click's type),
# with the rest of a command line that reaches the parsing: they are run whole, in-process, against a data
# directory or a closed port (each is parsed before any connection is tried). None of BAD is valid for them.
TEXT_ENUMS = {
    "--operation": ["acls", "--data-dir", "DATA", "--list"],
    "--resource-pattern-type": ["acls", "--data-dir", "DATA", "--list"],
    "--state": ["consumer-groups", "--bootstrap-server", "127.0.0.1:9", "--list"],
    "--by-duration": ["consumer-groups", "--bootstrap-server", "127.0.0.1:9", "--reset-offsets", "--group", "g",
                      "--all-topics"],
    "--to-datetime": ["consumer-groups", "--bootstrap-server", "127.0.0.1:9", "--reset-offsets", "--group", "g",
                      "--all-topics"],
}
NUMERIC = (Number, Decimal)
LIMIT_S = 5.0  # a refusal is parsing: well under this, even for 5,000 digits


def commands(group: click.Group = main, path: tuple[str, ...] = ()):
    """(path, command) for every command under ``group``, subcommands of subgroups included."""
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        if isinstance(cmd, click.Group):
            yield from commands(cmd, (*path, name))
        else:
            yield (*path, name), cmd


def typed_options():
    """(path, command, option) for every option whose value has a type other than plain text or a path."""
    for path, cmd in commands():
        for p in cmd.params:
            if isinstance(p, click.Option) and not p.is_flag and not isinstance(p.type, (click.types.StringParamType,
                                                                                         click.Path)):
                yield path, cmd, p


def required_args(cmd: click.Command, skip: click.Parameter, data_dir: str) -> list[str]:
    """Valid values for the command's required options, so that only the flag under test can fail."""
    args: list[str] = []
    for p in cmd.params:
        if p is skip or not isinstance(p, click.Option) or not p.required:
            continue
        name = p.opts[0]
        if isinstance(p.type, click.Choice):
            value = str(p.type.choices[0])
        elif name == "--data-dir":
            value = data_dir
        elif name == "--bootstrap-server":
            value = "127.0.0.1:9"
        elif isinstance(p.type, Number):
            value = str(max(p.type.low, 0))
        else:
            value = "x"
        args += [name, value]
    return args


def allowed(p: click.Option, value: str) -> bool:
    """Whether ``value`` is one the option's type should take."""
    t = p.type
    if isinstance(t, Number):
        return value in ("-3", "0") and t.low <= int(value) <= t.high
    if isinstance(t, Decimal):
        return value in ("-3", "0") and float(value) >= t.low
    if isinstance(t, click.Choice):
        return value in t.choices
    if t.name == "offset":
        return value == "0"
    raise AssertionError(f"{p.opts[0]}: a type this test does not know ({t!r}); teach allowed() its rule")


CASES = [(path, p.opts[0], value) for path, _, p in typed_options() for value in BAD]


def test_the_walk_finds_the_flags():
    found = {(" ".join(path), p.opts[0]) for path, _, p in typed_options()}
    for expected in [("topics", "--partitions"), ("consume", "--offset"), ("consume", "--timeout-ms"),
                     ("produce", "--compression-codec"), ("consumer-groups", "--shift-by"),
                     ("spark advise", "--min-compress-mbps"), ("configs", "--entity-type")]:
        assert expected in found
    assert len(found) >= 20


def test_no_flag_uses_clicks_own_number_types():
    """click.INT/FLOAT and their ranges hand the text to int()/float(): '٣' is 3, '1_0' is 10, and 5,000
    digits answer with Python's advice. Every number goes through Number or Decimal instead."""
    loose = [(" ".join(path), p.opts[0]) for path, _, p in typed_options()
             if isinstance(p.type, (click.types.IntParamType, click.types.FloatParamType))]
    assert loose == []


def test_every_choice_flag_cuts_a_long_value_short():
    """click's own Choice repeats a refused value whole (and click 8.4 raised StopIteration on a very
    long one); OneOf names it by its head and length."""
    from compactlog.cli.common import OneOf

    loose = [(" ".join(path), p.opts[0]) for path, _, p in typed_options()
             if isinstance(p.type, click.Choice) and not isinstance(p.type, OneOf)]
    assert loose == []


@pytest.mark.parametrize("path, flag, value", CASES, ids=[f"{' '.join(c[0])} {c[1]} {c[2][:8]!r}" for c in CASES])
def test_a_flag_takes_its_values_or_names_itself(path, flag, value, tmp_path):
    cmd = dict(commands())[path]
    param = next(p for p in cmd.params if isinstance(p, click.Option) and p.opts[0] == flag)
    args = [*required_args(cmd, param, str(tmp_path)), flag, value]
    began = time.monotonic()
    try:
        cmd.make_context(" ".join(path), args)
    except click.UsageError as exc:  # BadParameter included
        message = exc.format_message()
        assert not allowed(param, value), f"{flag} {value!r} refused: {message}"
        assert "\n" not in message and len(message) < 400, message
        assert flag in message or any(o in message for o in param.opts), message
        assert "int_max_str_digits" not in message and "Traceback" not in message
    else:
        assert allowed(param, value), f"{' '.join(path)} {flag} took {value[:30]!r}"
    assert time.monotonic() - began < LIMIT_S


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    import compactlog

    d = tmp_path_factory.mktemp("bad-values") / "data"
    with compactlog.open(d) as cl:
        cl.create_topic("t", 1)
        cl.produce_batch("t", [(b"k", b"v")])
    return d


@pytest.mark.parametrize("flag", sorted(TEXT_ENUMS))
@pytest.mark.parametrize("value", BAD, ids=lambda v: repr(v[:8]))
def test_text_read_as_an_enumeration_is_refused_by_name(flag, value, data_dir):
    from click.testing import CliRunner

    began = time.monotonic()
    args = [a.replace("DATA", str(data_dir)) for a in TEXT_ENUMS[flag]]
    res = CliRunner().invoke(main, [*args, flag, value])
    assert res.exit_code in (1, 2), res.output
    errors = [line for line in res.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "Traceback" not in res.output, res.output
    if flag == "--state" and value.startswith("-"):  # an optional value: click reads '-3' as a flag
        assert errors == [f"Error: No such option '{value}'."]
    assert (flag in errors[0] or flag == "--state" and value.startswith("-")) and len(errors[0]) < 400, errors
    assert time.monotonic() - began < LIMIT_S


@pytest.mark.parametrize("args", [
    ["topics", "--data-dir", "DATA", "--create", "--topic", "n", "--partitions", "9" * 5000],
    ["topics", "--data-dir", "DATA", "--create", "--topic", "n", "--partitions", "-3"],
    ["consume", "--data-dir", "DATA", "--topic", "t", "--partition", "0", "--offset", "\u0663"],
    ["produce", "--data-dir", "DATA", "--topic", "t", "--batch-size", ""],
    ["consumer-groups", "--bootstrap-server", "127.0.0.1:9", "--reset-offsets", "--group", "g", "--topic", "t",
     "--shift-by", "9" * 5000],
    ["topics", "--data-dir", "DATA", "--create", "--topic", "n", "--config", "segment.ms=" + "9" * 5000],
], ids=["partitions-5000-digits", "partitions-negative", "offset-arabic-digit", "batch-size-empty",
        "shift-by-5000-digits", "config-5000-digits"])
def test_a_real_process_prints_one_error_line(args, data_dir):
    argv = [a.replace("DATA", str(data_dir)) for a in args]
    began = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "compactlog", *argv], input=b"", capture_output=True, timeout=60)
    took = time.monotonic() - began
    err = proc.stderr.decode()
    assert proc.returncode in (1, 2), err
    assert "Traceback" not in err and "int_max_str_digits" not in err
    errors = [line for line in err.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and len(errors[0]) < 400, err
    assert [line for line in err.splitlines() if line and not line.startswith(("Error:", "Usage:", "Try "))] == []
    assert took < 20, took


ADDRESS_FLAGS = ("--bootstrap-server",)  # HOST:PORT, checked by a callback as the command line is parsed
ADDRESS_CASES = [(path, flag, value) for path, cmd in commands() for flag in ADDRESS_FLAGS
                 if any(flag in getattr(p, "opts", ()) for p in cmd.params) for value in BAD]


@pytest.mark.parametrize("path, flag, value", ADDRESS_CASES,
                         ids=[f"{' '.join(c[0])} {c[1]} {c[2][:8]!r}" for c in ADDRESS_CASES])
def test_an_address_takes_a_port_of_ascii_digits_only(path, flag, value, tmp_path):
    cmd = dict(commands())[path]
    param = next(p for p in cmd.params if flag in getattr(p, "opts", ()))
    began = time.monotonic()
    with pytest.raises(click.BadParameter) as refused:
        cmd.make_context(" ".join(path), [*required_args(cmd, param, str(tmp_path)), flag, f"127.0.0.1:{value}"])
    message = refused.value.format_message()
    assert "\n" not in message and len(message) < 400 and "expected HOST:PORT" in message, message
    assert refused.value.param is param
    assert time.monotonic() - began < LIMIT_S


@pytest.mark.parametrize("value", ["9" * 5000, "\u0663", "127.0.0.1:65536"], ids=["5000-digits", "arabic", "65536"])
def test_serve_http_port_is_refused_by_name(value, tmp_path):
    from click.testing import CliRunner

    res = CliRunner().invoke(main, ["serve", "--data-dir", str(tmp_path / "d"), "--http", value])
    assert res.exit_code == 2 and "Traceback" not in res.output
    errors = [line for line in res.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "'--http'" in errors[0] and len(errors[0]) < 400, errors
    assert not (tmp_path / "d").exists()  # refused before the server (which makes the directory) starts
