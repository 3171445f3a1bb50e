"""``--command-config FILE``: Kafka's tools' file of client settings (Java properties), for the commands
that reach a broker with ``--bootstrap-server``.

Kafka's tools hand the file to Kafka's Java client; ours go through librdkafka (and, for the requests
librdkafka has no call for, a socket of our own: ``sasl_client.py``). So the Java client's names are
mapped to what librdkafka takes: ``sasl.mechanism`` to ``sasl.mechanisms``, ``sasl.jaas.config``'s PLAIN
or SCRAM login module to ``sasl.username``/``sasl.password``, a PEM ``ssl.truststore.location`` to
``ssl.ca.location``. A setting that cannot be honoured (a JKS truststore, another login module, a name
neither Kafka's mapping here nor librdkafka knows) is refused in one line that names it, rather than
quietly connecting without it.

A command line process runs one command, so the settings of the command being run are kept here, set by
the option's callback (``use``) and read where the clients are made (``wire.client_config``,
``sasl_client.connect``); the callback runs for every invocation, so a command without the option gets
none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

import click

from ..errors import CompactLogError, shown
from ..storage.configdef import parse_properties

MAX_FILE_BYTES = 1 << 20  # a client settings file is a few lines
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
LOGIN_MODULES = {  # sasl.jaas.config's login module -> the mechanisms it logs in with
    "org.apache.kafka.common.security.plain.PlainLoginModule": ("PLAIN",),
    "org.apache.kafka.common.security.scram.ScramLoginModule": ("SCRAM-SHA-256", "SCRAM-SHA-512"),
}
# Java-only settings that change nothing for librdkafka here (a PEM truststore needs no password)
_IGNORED = {"ssl.truststore.password", "ssl.truststore.type", "ssl.keystore.type"}


@dataclass(frozen=True)
class ClientSettings:
    """What the file asked for, as librdkafka's settings and as what the hand-built requests need."""

    librdkafka: dict[str, Any] = field(default_factory=dict)
    protocol: str = "PLAINTEXT"
    mechanism: str = "GSSAPI"  # Kafka's default sasl.mechanism
    username: str | None = None
    password: str | None = None
    ca_location: str | None = None
    check_hostname: bool = True  # Kafka's default ssl.endpoint.identification.algorithm is https


NONE = ClientSettings()
_current: ClientSettings = NONE


def current() -> ClientSettings:
    """The settings of the command being run (none: PLAINTEXT)."""
    return _current


def use(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """The option's callback: read the file (or forget an earlier command's settings)."""
    global _current
    _current = NONE
    if value is None:
        return None
    try:
        _current = load(value)
    except CompactLogError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None
    return value


def command_config_option(f: Callable) -> Callable:
    return click.option("--command-config", "command_config", metavar="FILE", callback=use, expose_value=False,
                        help="Client settings (Java properties, as Kafka's tools take): security.protocol, "
                             "sasl.mechanism, sasl.jaas.config, ssl.truststore.location (PEM)...")(f)


def load(path: str) -> ClientSettings:
    return settings(read_properties(path))


def read_bounded(path: str, limit: int, what: str) -> bytes:
    """The bytes of a file a flag names (a reset plan, client settings), never more than ``limit`` read;
    ValueError in one line naming the file when it cannot be read or is larger than ``what`` would be."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise ValueError(f"cannot read {shown(path)}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise ValueError(f"{shown(path)} is larger than {limit:,} bytes: not {what}")
    return data


def read_properties(path: str) -> dict[str, str]:
    """A Java properties file's settings, read within a bound."""
    try:
        data = read_bounded(path, MAX_FILE_BYTES, "a client settings file")
    except ValueError as exc:
        raise CompactLogError(str(exc)) from None
    # Java reads .properties files as ISO-8859-1 (with \\u escapes); UTF-8 is what people write now
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return parse_properties(text)


def settings(props: dict[str, str], source: str = "--command-config") -> ClientSettings:
    """The Java client's properties mapped to librdkafka's, or the one we cannot honour named."""
    props = {k: v.strip() for k, v in props.items()}
    conf: dict[str, Any] = {}
    given_protocol = "security.protocol" in props
    protocol = props.pop("security.protocol", "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise CompactLogError(f"security.protocol: {shown(protocol)} is not one of {', '.join(PROTOCOLS)}")
    if given_protocol:  # else another file's (--command-config's) stands
        conf["security.protocol"] = protocol
    mechanism = props.pop("sasl.mechanism", "GSSAPI").upper()
    username = password = None
    jaas = props.pop("sasl.jaas.config", None)
    if protocol.startswith("SASL"):
        conf["sasl.mechanisms"] = mechanism
        if jaas is not None:
            module, options = parse_jaas(jaas)
            if mechanism not in LOGIN_MODULES.get(module, ()):
                raise CompactLogError(f"sasl.jaas.config: the login module {shown(module)} does not log in with "
                                      f"sasl.mechanism={mechanism} (PlainLoginModule: PLAIN; ScramLoginModule: "
                                      "SCRAM-SHA-256, SCRAM-SHA-512)")
            username, password = options.get("username"), options.get("password")
            if username is None or password is None:
                raise CompactLogError("sasl.jaas.config: the login module needs username=\"...\" and password=\"...\"")
            conf["sasl.username"], conf["sasl.password"] = username, password
    ca = check_hostname = None
    trust_type = props.get("ssl.truststore.type", "JKS").upper()
    if "ssl.truststore.location" in props:
        if trust_type != "PEM":
            raise CompactLogError(f"ssl.truststore.type={trust_type}: this client reads PEM truststores only; "
                                  "export the certificates to a PEM file and set ssl.truststore.type=PEM")
        ca = conf["ssl.ca.location"] = props.pop("ssl.truststore.location")
    if "ssl.truststore.certificates" in props:
        conf["ssl.ca.pem"] = props.pop("ssl.truststore.certificates")
    if "ssl.keystore.location" in props and props.get("ssl.keystore.type", "JKS").upper() != "PKCS12":
        raise CompactLogError(f"ssl.keystore.type={props.get('ssl.keystore.type', 'JKS')}: this client reads "
                              "PKCS12 keystores only (ssl.keystore.type=PKCS12)")
    if "ssl.endpoint.identification.algorithm" in props:
        algorithm = props.pop("ssl.endpoint.identification.algorithm").lower()
        check_hostname = algorithm == "https"
        if algorithm not in ("", "https"):
            raise CompactLogError(f"ssl.endpoint.identification.algorithm: {shown(algorithm)} is neither https nor empty")
        conf["ssl.endpoint.identification.algorithm"] = "https" if check_hostname else "none"
    props.pop("bootstrap.servers", None)  # --bootstrap-server says where
    for key, value in props.items():
        if key not in _IGNORED:
            conf[key] = value
    _check_librdkafka(conf, source)
    return ClientSettings(conf, protocol, mechanism, username, password, ca,
                          True if check_hostname is None else check_hostname)


def _check_librdkafka(conf: dict[str, Any], source: str) -> None:
    """Every setting librdkafka is given must be one it knows, with a value it takes: asked of librdkafka
    itself, by a producer handle that connects nowhere (its refusal names the setting)."""
    from confluent_kafka import KafkaException, Producer

    try:
        Producer({**conf, "logger": _Quiet()})
    except (KafkaException, ValueError, TypeError) as exc:
        message = exc.args[0].str() if exc.args and hasattr(exc.args[0], "str") else str(exc)
        message = message.removeprefix("Failed to create producer: ").strip()
        raise CompactLogError(f"{source}: a setting this client cannot honour: {message}") from None


class _Quiet:
    def log(self, *_args: Any) -> None:
        pass


_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([^\s=;"]+)|(=)|(;))', re.S)


def parse_jaas(text: str) -> tuple[str, dict[str, str]]:
    """``LoginModule flag key=value ...;`` (one entry, as a client's sasl.jaas.config holds): the module
    and its options. Values may be quoted, with backslash escapes inside the quotes."""
    tokens: list[tuple[str, str]] = []  # (kind, text): kind w (word), q (quoted), = or ;
    pos, text = 0, text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise CompactLogError(f"sasl.jaas.config: cannot read it at {shown(text[pos:pos + 20])}")
        quoted, word, eq, semi = m.groups()
        if quoted is not None:
            tokens.append(("q", re.sub(r"\\(.)", r"\1", quoted, flags=re.S)))
        elif word is not None:
            tokens.append(("w", word))
        else:
            tokens.append((eq or semi, eq or semi))
        pos = m.end()
    form = "expected 'LoginModule required key=\"value\" ...;'"
    if len(tokens) < 3 or tokens[0][0] != "w" or tokens[1][0] != "w" or tokens[-1][0] != ";":
        raise CompactLogError(f"sasl.jaas.config: {form}")
    if tokens[1][1].lower() not in ("required", "requisite", "sufficient", "optional"):
        raise CompactLogError(f"sasl.jaas.config: {shown(tokens[1][1])} is not a login module flag "
                              "(required, requisite, sufficient, optional)")
    options: dict[str, str] = {}
    body = tokens[2:-1]
    if len(body) % 3:
        raise CompactLogError(f"sasl.jaas.config: {form}")
    for i in range(0, len(body), 3):
        (k_kind, key), (eq, _), (v_kind, value) = body[i:i + 3]
        if k_kind != "w" or eq != "=" or v_kind not in ("w", "q"):
            raise CompactLogError(f"sasl.jaas.config: {form}")
        options[key] = value
    return tokens[0][1], options
