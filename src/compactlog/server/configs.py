"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs: kafka-configs over the wire.

Topic configs come from the one config table (``storage/topic_config.py``): every topic config is listed
with its value, where the value comes from (the topic's override, ``server.properties``, or Kafka's
default), its type and documentation, none read-only. Clients depend on the full list: kafka-python's
``alter_configs`` first describes the topic and refuses, on its side, any name missing from the answer.

Changes go through ``CompactLog.alter_topic_config``, the call behind ``compactlog configs --alter``, so
the logs and the cleaner take the new config at once, and the override file is written as it is
there. AlterConfigs replaces a topic's whole set of overrides (names left out go back to their
defaults); IncrementalAlterConfigs sets, deletes, or appends to and subtracts from list-valued configs
(``cleanup.policy``), starting from the value in effect.

Each resource is authorized first, as in Kafka: DESCRIBE_CONFIGS or ALTER_CONFIGS on the topic
(refused: TOPIC_AUTHORIZATION_FAILED) or on the cluster for the broker (CLUSTER_AUTHORIZATION_FAILED).

The broker itself (resource name: its node id) is described from its static settings
(``server.properties`` and ``--override``), all read-only: they cannot change while it runs, so
altering them is refused. The empty broker name stands for cluster-wide dynamic defaults, of which
there are none.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..errors import CompactLogError, InvalidConfigError, InvalidRequestError, shown
from ..storage.configdef import ConfigKey, describe_key, parse_value
from ..storage.log_config import DEFAULT_CONFIG, DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DescribeRow
from ..storage.topic_config import TOPIC_CONFIGS
from .broker import NO_THROTTLE, Broker, Session, error_code
from .entities import make, response, schema
from .protocol import Request
from .server_config import SENSITIVE_CONFIGS, ServerConfig

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8  # Kafka's resource types
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3  # IncrementalAlterConfigs operations
OPERATIONS = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}
TOPIC_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED = 29, 31

# Kafka's numbers for where a value comes from (DescribeConfigs v1+) and for config types (v3+).
SOURCE_NUMBERS = {DYNAMIC_TOPIC_CONFIG: 1, "DYNAMIC_BROKER_CONFIG": 2, "DYNAMIC_DEFAULT_BROKER_CONFIG": 3,
                  STATIC_BROKER_CONFIG: 4, DEFAULT_CONFIG: 5}
TYPE_NUMBERS = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7, "class": 8,
                "password": 9}


# rows -----------------------------------------------------------------------------------------------

def _shown(key: ConfigKey, value: Any) -> str | None:
    """A broker value as describe shows it (a list default written as text stays that text)."""
    if isinstance(value, str) and key.type == "list":
        return value
    return key.render(value)


def _sensitive(key: ConfigKey) -> bool:
    """Secrets (key store passwords and keys) are described without their value, as Kafka's are."""
    return key.name in SENSITIVE_CONFIGS or key.type == "password"


SERVED_DIR_CONFIGS = ("log.dir", "log.dirs")


def broker_rows(config: ServerConfig, data_dir: str) -> list[DescribeRow]:
    """The broker's settings as describe rows: set ones from ``server.properties``/``--override``, the
    rest at Kafka's (or our) defaults; secrets are never shown. Read-only: nothing changes them while
    the broker runs. ``log.dir`` and ``log.dirs`` are the directory served (``--data-dir``), whatever
    the file says: it is the one setting of them the broker uses, as a static setting."""
    rows = []
    for name, key in config.TABLE.items():
        if name in SERVED_DIR_CONFIGS:
            value, source = data_dir, STATIC_BROKER_CONFIG
        elif config.is_set(name):
            value, source = config.originals[name], STATIC_BROKER_CONFIG
        else:
            value, source = _shown(key, key.default), DEFAULT_CONFIG
        if _sensitive(key):
            value = None
        rows.append(DescribeRow(name, value, source, True, describe_key(key)["doc"], ((source, name, value),)))
    return rows


def _entries(s, rows: Sequence[DescribeRow], keys, synonyms: bool, docs: bool, table) -> tuple:
    wanted = None if keys is None else set(keys)  # null: every config; an empty list: none, as in Kafka
    out = []
    for row in rows:
        if wanted is not None and row.name not in wanted:
            continue
        key = table[row.name]
        out.append(make(
            s.DescribeConfigsResourceResult, name=row.name, value=row.value, read_only=row.read_only,
            config_source=SOURCE_NUMBERS[row.source], is_sensitive=_sensitive(key),
            synonyms=tuple(make(s.DescribeConfigsSynonym, name=n, value=v, source=SOURCE_NUMBERS[src])
                           for src, n, v in row.synonyms) if synonyms else (),
            config_type=TYPE_NUMBERS[key.type], documentation=row.doc if docs else None))
    return tuple(out)


def _check_broker_name(broker: Broker, name: str) -> None:
    if name not in ("", str(broker.node_id)):
        raise InvalidRequestError(f"There is no broker {shown(name)}: this cluster's only broker is {broker.node_id}.")


def _refusal(broker: Broker, session: Session, operation: str, res) -> tuple[int, str] | None:
    """The error for a resource ``session`` may not describe or alter, None when it may."""
    if res.resource_type == TOPIC and not broker.authorize(session, operation, "TOPIC", res.resource_name):
        return TOPIC_AUTHORIZATION_FAILED, f"Not authorized to {operation.lower()} of topic {shown(res.resource_name)}."
    if res.resource_type in (BROKER, BROKER_LOGGER) and not broker.authorize(session, operation, "CLUSTER"):
        return CLUSTER_AUTHORIZATION_FAILED, f"Not authorized to {operation.lower()} of the broker."
    return None


def _describe_one(broker: Broker, res, s, synonyms: bool, docs: bool) -> tuple:
    """(error code, message, config entries) of one resource."""
    try:
        if res.resource_type == TOPIC:
            rows = broker.cl.describe_topic(res.resource_name).config.describe()
            return 0, None, _entries(s, rows, res.configuration_keys, synonyms, docs, TOPIC_CONFIGS)
        if res.resource_type == BROKER:
            _check_broker_name(broker, res.resource_name)
            rows = broker_rows(broker.config, str(broker.cl.data_dir.resolve())) if res.resource_name else []
            return 0, None, _entries(s, rows, res.configuration_keys, synonyms, docs, broker.config.TABLE)
        raise _unsupported(res.resource_type)
    except CompactLogError as exc:
        return int(error_code(exc)), str(exc), ()


def _unsupported(resource_type: int) -> InvalidRequestError:
    if resource_type == BROKER_LOGGER:
        return InvalidRequestError("compactlog does not describe or alter its loggers over the wire (use -v at start).")
    return InvalidRequestError(f"Resource type {resource_type} has no configs here; topics (2) and the broker (4) do.")


async def describe_configs(broker: Broker, req: Request, session: Session):
    s = schema(req)
    body = req.body
    synonyms = bool(getattr(body, "include_synonyms", False))
    docs = bool(getattr(body, "include_documentation", False))
    results = []
    for res in body.resources:  # all in memory: the table and the open topics' configs
        refused = _refusal(broker, session, "DESCRIBE_CONFIGS", res)
        code, message, entries = (*refused, ()) if refused else _describe_one(broker, res, s, synonyms, docs)
        results.append(make(s.DescribeConfigsResult, error_code=error_code(code), error_message=message,
                            resource_type=res.resource_type, resource_name=res.resource_name, configs=entries))
    return response(req, throttle_time=NO_THROTTLE, results=tuple(results))


# altering -------------------------------------------------------------------------------------------

def _known(name: str) -> ConfigKey:
    key = TOPIC_CONFIGS.get(name)
    if key is None:
        raise InvalidConfigError(f"Unknown topic config name: {shown(name, '')}")
    return key


def _no_repeats(names: Sequence[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise InvalidRequestError(f"Config {shown(name, '')} is named more than once in one resource; name each config once.")
        seen.add(name)


def _needs_value(name: str, value: str | None, what: str) -> str:
    if value is None:
        raise InvalidConfigError(f"{what} {shown(name, '')} needs a value, not null (delete the config to reset it).")
    return value


def replace_all(broker: Broker, topic: str, configs, validate_only: bool) -> None:
    """AlterConfigs on a topic: the given configs become its whole set of overrides."""
    cl = broker.cl
    with cl.admin_lock:
        _no_repeats([c.name for c in configs])
        wanted = {c.name: _needs_value(c.name, c.value, "Config") for c in configs}
        current = cl.describe_topic(topic).config.overrides
        cl.alter_topic_config(topic, wanted, [n for n in current if n not in wanted], validate_only)


def apply_operations(broker: Broker, topic: str, ops, validate_only: bool) -> None:
    """IncrementalAlterConfigs on a topic: each operation on the config in effect, all applied at once
    or none. Deleting a config the topic does not override changes nothing; APPEND adds the items not
    yet in the list and SUBTRACT removes the items given, both from the value in effect (its default
    when not overridden)."""
    cl = broker.cl
    with cl.admin_lock:
        _no_repeats([o.name for o in ops])
        config = cl.describe_topic(topic).config
        changes: dict[str, str] = {}
        removed: list[str] = []
        for o in ops:
            key = _known(o.name)
            op = o.config_operation
            if op == SET:
                changes[o.name] = _needs_value(o.name, o.value, "SET of")
            elif op == DELETE:
                if o.name in config.overrides:
                    removed.append(o.name)
            elif op in (APPEND, SUBTRACT):
                if key.type != "list":
                    raise InvalidConfigError(f"{OPERATIONS[op]} works on list configs only; {o.name} is a {key.type}.")
                items = parse_value(o.name, "list", _needs_value(o.name, o.value, f"{OPERATIONS[op]} to"))
                have = list(config.get(o.name))
                if op == APPEND:
                    now = have + [i for i in dict.fromkeys(items) if i not in have]
                else:
                    now = [i for i in have if i not in items]
                changes[o.name] = ",".join(now)
            else:
                raise InvalidRequestError(f"Unknown config operation {op} for {shown(o.name, '')} (0 SET, 1 DELETE, 2 APPEND, "
                                          f"3 SUBTRACT).")
        cl.alter_topic_config(topic, changes, removed, validate_only)


def _alter_one(broker: Broker, res, validate_only: bool, incremental: bool) -> tuple[int, str | None]:
    try:
        if res.resource_type == TOPIC:
            change = apply_operations if incremental else replace_all
            change(broker, res.resource_name, res.configs, validate_only)
            return 0, None
        if res.resource_type == BROKER:
            _check_broker_name(broker, res.resource_name)
            raise InvalidRequestError(
                "Broker settings are read at start (server.properties and --override) and cannot change while the "
                "broker runs; restart it with the new values.")
        raise _unsupported(res.resource_type)
    except CompactLogError as exc:
        return int(error_code(exc)), str(exc)


def _alter_all(broker: Broker, resources, validate_only: bool, incremental: bool,
               refusals: list) -> list[tuple[int, str | None]]:
    return [refused or _alter_one(broker, res, validate_only, incremental) for res, refused in zip(resources, refusals)]


async def _alter(broker: Broker, req: Request, session: Session, incremental: bool):
    s = schema(req)
    body = req.body
    refusals = [_refusal(broker, session, "ALTER_CONFIGS", res) for res in body.resources]
    outcomes = await broker.blocking(_alter_all, broker, body.resources, body.validate_only, incremental, refusals)
    return response(req, throttle_time=NO_THROTTLE, responses=tuple(
        make(s.AlterConfigsResourceResponse, error_code=error_code(code), error_message=message,
             resource_type=res.resource_type, resource_name=res.resource_name)
        for res, (code, message) in zip(body.resources, outcomes)))


async def alter_configs(broker: Broker, req: Request, session: Session):
    return await _alter(broker, req, session, incremental=False)


async def incremental_alter_configs(broker: Broker, req: Request, session: Session):
    return await _alter(broker, req, session, incremental=True)


HANDLERS = {32: describe_configs, 33: alter_configs, 44: incremental_alter_configs}
