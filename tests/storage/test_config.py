"""The config table against Kafka 3.9: names, defaults, validators and their exact wording, string parsing,
server.properties synonyms and priorities, describe sources, alter semantics and the generated docs."""

from __future__ import annotations

import logging

import pytest

from compactlog.errors import InvalidConfigError, InvalidRequestError
from compactlog.storage.broker_config import BROKER_CONFIGS, BrokerConfig
from compactlog.storage.log_config import LogConfig, alter, validate_topic_overrides
from compactlog.storage.topic_config import TOPIC_CONFIGS, docs_table
from compactlog.storage.configdef import java_double, parse_properties, parse_value

LONG_MAX = str(2**63 - 1)

# What `kafka-configs --describe --all` prints for a fresh topic on Kafka 3.9, plus our two configs.
KAFKA_3_9_TOPIC_DEFAULTS = {
    "cleanup.policy": "delete", "compression.gzip.level": "-1", "compression.lz4.level": "9",
    "compression.type": "producer", "compression.zstd.level": "3", "delete.retention.ms": "86400000",
    "file.delete.delay.ms": "60000", "flush.messages": LONG_MAX, "flush.ms": LONG_MAX,
    "follower.replication.throttled.replicas": "", "index.interval.bytes": "4096",
    "leader.replication.throttled.replicas": "", "local.retention.bytes": "-2", "local.retention.ms": "-2",
    "max.compaction.lag.ms": LONG_MAX, "max.message.bytes": "1048588", "message.downconversion.enable": "true",
    "message.format.version": "3.0-IV1", "message.timestamp.after.max.ms": LONG_MAX,
    "message.timestamp.before.max.ms": LONG_MAX, "message.timestamp.difference.max.ms": LONG_MAX,
    "message.timestamp.type": "CreateTime", "min.cleanable.dirty.ratio": "0.5", "min.compaction.lag.ms": "0",
    "min.insync.replicas": "1", "preallocate": "false", "remote.log.copy.disable": "false",
    "remote.log.delete.on.disable": "false", "remote.storage.enable": "false", "retention.bytes": "-1",
    "retention.ms": "604800000", "segment.bytes": "1073741824", "segment.index.bytes": "10485760",
    "segment.jitter.ms": "0", "segment.ms": "604800000", "unclean.leader.election.enable": "false",
}
OURS = {"compaction.strategy": "offset", "compaction.threshold.bytes": "0"}


def rejects(name: str, value: str) -> str:
    with pytest.raises(InvalidConfigError) as exc:
        validate_topic_overrides({name: value})
    return str(exc.value)


# --- the table -------------------------------------------------------------------------------------

def test_topic_configs_and_defaults_are_kafkas():
    rows = LogConfig().describe()
    assert {r.name: r.value for r in rows} == {**KAFKA_3_9_TOPIC_DEFAULTS, **OURS}
    assert [r.name for r in rows] == sorted(r.name for r in rows)
    assert {r.source for r in rows} == {"DEFAULT_CONFIG"} and not any(r.read_only for r in rows)


def test_typed_defaults():
    c = LogConfig()
    assert (c.segment_bytes, c.segment_ms, c.segment_jitter_ms, c.segment_index_bytes) == (2**30, 604800000, 0, 10485760)
    assert (c.retention_ms, c.retention_bytes, c.delete_retention_ms, c.file_delete_delay_ms) == (604800000, -1, 86400000, 60000)
    assert (c.min_cleanable_dirty_ratio, c.min_compaction_lag_ms, c.max_compaction_lag_ms) == (0.5, 0, 2**63 - 1)
    assert (c.compression_type, c.compression_gzip_level, c.compression_lz4_level, c.compression_zstd_level) == ("producer", -1, 9, 3)
    assert (c.max_message_bytes, c.index_interval_bytes, c.preallocate, c.message_timestamp_type) == (1048588, 4096, False, "CreateTime")
    assert (c.cleanup_policy, c.delete, c.compact) == (("delete",), True, False)
    assert (c.compaction_strategy, c.compaction_threshold_bytes) == ("offset", 0)


def test_broker_defaults_are_kafkas():
    b = BrokerConfig()
    expected = {
        "num.partitions": 1, "log.cleaner.enable": True, "log.cleaner.threads": 1,
        "log.cleaner.dedupe.buffer.size": 134217728, "log.cleaner.io.buffer.size": 524288,
        "log.cleaner.io.buffer.load.factor": 0.9, "log.cleaner.backoff.ms": 15000,
        "log.cleaner.io.max.bytes.per.second": 1.7976931348623157e308, "log.retention.check.interval.ms": 300000,
        "log.flush.offset.checkpoint.interval.ms": 60000, "log.flush.start.offset.checkpoint.interval.ms": 60000,
        "log.flush.scheduler.interval.ms": 2**63 - 1, "log.dir": "/tmp/kafka-logs",
        "log.dirs": None, "log.retention.hours": 168, "log.retention.minutes": None, "log.retention.ms": None,
        "log.roll.hours": 168, "log.roll.ms": None, "log.segment.bytes": 1073741824, "message.max.bytes": 1048588,
        "log.cleaner.min.cleanable.ratio": 0.5, "log.cleanup.policy": ["delete"], "compression.type": "producer",
    }
    assert {name: b.get(name) for name in expected} == expected
    assert b.log_cleaner_threads == 1 and b.log_dirs == ["/tmp/kafka-logs"]
    # every topic config's broker synonyms are broker configs in turn
    assert {s for k in TOPIC_CONFIGS.values() for s in k.synonyms} <= set(BROKER_CONFIGS)


def test_every_default_survives_render_and_parse():
    for key in [*TOPIC_CONFIGS.values(), *BROKER_CONFIGS.values()]:
        if key.default is not None:
            assert key.parse(key.render(key.default)) == key.default, key.name


@pytest.mark.parametrize("name, text", [
    ("segment.bytes", "[14,...]"), ("retention.ms", "[-1,...]"), ("min.cleanable.dirty.ratio", "[0,...,1]"),
    ("cleanup.policy", "[compact, delete]"), ("compression.type", "[uncompressed, zstd, lz4, snappy, gzip, producer]"),
    ("compression.gzip.level", "[1,...,9] or -1"), ("compression.lz4.level", "[1,...,17]"),
    ("compression.zstd.level", "[-131072,...,22]"), ("message.timestamp.type", "[CreateTime, LogAppendTime]"),
    ("max.compaction.lag.ms", "[1,...]"), ("retention.bytes", ""), ("preallocate", ""),
    ("compaction.strategy", "[offset, timestamp, header:<name>]"),
    ("leader.replication.throttled.replicas", "[partitionId]:[brokerId],[partitionId]:[brokerId],..."),
])
def test_valid_values_text_matches_kafkas_docs(name, text):
    assert TOPIC_CONFIGS[name].valid_values == text


# --- validators: each bound accepted, one past it rejected with Kafka's words ------------------------

AT_LEAST = [
    ("segment.bytes", 14), ("segment.ms", 1), ("segment.jitter.ms", 0), ("segment.index.bytes", 4),
    ("flush.messages", 1), ("flush.ms", 0), ("retention.ms", -1), ("max.message.bytes", 0),
    ("index.interval.bytes", 0), ("delete.retention.ms", 0), ("min.compaction.lag.ms", 0),
    ("max.compaction.lag.ms", 1), ("file.delete.delay.ms", 0), ("min.insync.replicas", 1),
    ("message.timestamp.before.max.ms", 0), ("message.timestamp.after.max.ms", 0),
    ("message.timestamp.difference.max.ms", 0), ("local.retention.ms", -2), ("local.retention.bytes", -2),
    ("compaction.threshold.bytes", 0), ("compression.lz4.level", 1), ("compression.zstd.level", -131072),
]


@pytest.mark.parametrize("name, lo", AT_LEAST)
def test_lower_bounds(name, lo):
    assert validate_topic_overrides({name: str(lo)}) == {name: str(lo)}
    assert rejects(name, str(lo - 1)) == f"Invalid value {lo - 1} for configuration {name}: Value must be at least {lo}"


@pytest.mark.parametrize("name, hi", [("compression.lz4.level", 17), ("compression.zstd.level", 22)])
def test_upper_bounds(name, hi):
    validate_topic_overrides({name: str(hi)})
    assert rejects(name, str(hi + 1)) == f"Invalid value {hi + 1} for configuration {name}: Value must be no more than {hi}"


def test_type_limits():
    validate_topic_overrides({"segment.bytes": str(2**31 - 1), "retention.bytes": str(-(2**63))})
    assert rejects("segment.bytes", "2147483648") == \
        "Invalid value 2147483648 for configuration segment.bytes: Not a number of type INT"
    assert rejects("retention.bytes", str(-(2**63) - 1)) == \
        f"Invalid value {-(2**63) - 1} for configuration retention.bytes: Not a number of type LONG"
    assert rejects("segment.bytes", "abc") == "Invalid value abc for configuration segment.bytes: Not a number of type INT"


@pytest.mark.parametrize("name, typ", [("retention.ms", "LONG"), ("segment.ms", "LONG"), ("segment.bytes", "INT")])
@pytest.mark.parametrize("digits", ["9" * 5000, "-" + "1" * 4301, "1" * 20])
def test_numbers_of_any_length_are_refused_with_kafkas_message(name, typ, digits):
    """Python's int() raises on strings over 4,300 digits; the parse never gets there, and the message
    shows the value's head and length instead of the whole value."""
    message = rejects(name, digits)
    assert message.endswith(f"for configuration {name}: Not a number of type {typ}")
    assert len(message) < 300
    if len(digits) > 200:
        assert f"({len(digits)} characters)" in message


def test_leading_zeros_of_any_length_parse_as_java_does():
    assert parse_value("retention.ms", "long", "0" * 5000 + "42") == 42
    assert parse_value("retention.ms", "long", "-" + "0" * 5000) == 0


def test_dirty_ratio_bounds_print_as_java_does():
    assert validate_topic_overrides({"min.cleanable.dirty.ratio": "0"}) == {"min.cleanable.dirty.ratio": "0.0"}
    assert validate_topic_overrides({"min.cleanable.dirty.ratio": "1"}) == {"min.cleanable.dirty.ratio": "1.0"}
    assert rejects("min.cleanable.dirty.ratio", "-0.1") == \
        "Invalid value -0.1 for configuration min.cleanable.dirty.ratio: Value must be at least 0"
    assert rejects("min.cleanable.dirty.ratio", "2") == \
        "Invalid value 2.0 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"


@pytest.mark.parametrize("ok", ["-1", "1", "9"])
def test_gzip_level_accepts_its_range_and_minus_one(ok):
    validate_topic_overrides({"compression.gzip.level": ok})


@pytest.mark.parametrize("bad", ["0", "10", "-2"])
def test_gzip_level_rejects_the_rest(bad):
    assert rejects("compression.gzip.level", bad) == \
        f"Invalid value {bad} for configuration compression.gzip.level: Value must be between 1 and 9 or equal to -1"


def test_string_choices_are_case_sensitive():
    for codec in ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"):
        validate_topic_overrides({"compression.type": codec})
    assert rejects("compression.type", "zip") == ("Invalid value zip for configuration compression.type: "
                                                  "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer")
    assert "String must be one of" in rejects("compression.type", "GZIP")
    assert "String must be one of" in rejects("compression.type", "none")  # the producer's name, not the broker's
    validate_topic_overrides({"message.timestamp.type": "LogAppendTime"})
    assert rejects("message.timestamp.type", "createtime") == ("Invalid value createtime for configuration "
                                                              "message.timestamp.type: String must be one of: CreateTime, LogAppendTime")


def test_cleanup_policy_items():
    assert validate_topic_overrides({"cleanup.policy": " compact , delete "}) == {"cleanup.policy": "compact,delete"}
    assert rejects("cleanup.policy", "compact,purge") == \
        "Invalid value purge for configuration cleanup.policy: String must be one of: compact, delete"
    assert "String must be one of" in rejects("cleanup.policy", "compact,")  # an empty item
    empty = LogConfig({"cleanup.policy": ""})  # accepted, as Kafka 3.9's validator does: keep everything
    assert (empty.cleanup_policy, empty.compact, empty.delete) == ((), False, False)
    both = LogConfig({"cleanup.policy": "delete,compact"})
    assert both.compact and both.delete


def test_booleans():
    assert validate_topic_overrides({"preallocate": " TRUE "}) == {"preallocate": "true"}
    assert LogConfig({"preallocate": "True"}).preallocate is True
    assert rejects("preallocate", "yes") == "Invalid value yes for configuration preallocate: Expected value to be either true or false"


@pytest.mark.parametrize("value", ["offset", "timestamp", "header:version", "header:v 2"])
def test_compaction_strategy_accepts(value):
    assert LogConfig({"compaction.strategy": value}).compaction_strategy == value


@pytest.mark.parametrize("value", ["header:", "header: x", "latest", "Offset", "header"])
def test_compaction_strategy_rejects(value):
    assert rejects("compaction.strategy", value).endswith(
        "Must be offset, timestamp or header:<name> with a non-empty header name")


def test_throttled_replicas_and_message_format_version():
    for ok in ("*", "0:1,1:2", "", " 0:1 , 3:4 "):
        validate_topic_overrides({"leader.replication.throttled.replicas": ok})
    assert rejects("follower.replication.throttled.replicas", "0-1,2:3") == (
        "Invalid value [0-1, 2:3] for configuration follower.replication.throttled.replicas: "
        "follower.replication.throttled.replicas must be the literal '*' or a list of replicas in the following "
        "format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")
    for ok in ("3.0-IV1", "2.8", "0.10.0-IV1", "3.9", "3.0.1", "0.8.2.2"):
        validate_topic_overrides({"message.format.version": ok})
    for bad in ("3.10", "3.0-IV2", "4.0", "x"):
        assert rejects("message.format.version", bad).endswith(f"Version {bad} is not a valid version")


def test_unknown_names_are_rejected_before_values():
    assert rejects("retention.msx", "1") == "Unknown topic config name: retention.msx"
    with pytest.raises(InvalidConfigError, match="Unknown topic config name: bogus"):
        validate_topic_overrides({"segment.bytes": "bad", "bogus": "1"})
    with pytest.raises(InvalidConfigError, match="Unknown topic config name: log.retention.ms"):
        LogConfig({"log.retention.ms": "5"})  # broker names are not topic configs


def test_min_lag_above_max_lag_is_rejected_naming_both():
    msg = "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"
    with pytest.raises(InvalidConfigError) as exc:
        validate_topic_overrides({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})
    assert str(exc.value) == msg
    validate_topic_overrides({"min.compaction.lag.ms": "5", "max.compaction.lag.ms": "5"})
    broker = BrokerConfig({"log.cleaner.max.compaction.lag.ms": "5"})
    validate_topic_overrides({"min.compaction.lag.ms": "10"})  # fine against Kafka's defaults
    with pytest.raises(InvalidConfigError, match=r"\(10\) > max.compaction.lag.ms \(5\)"):
        validate_topic_overrides({"min.compaction.lag.ms": "10"}, broker)  # not against this broker's


# --- parsing strings ---------------------------------------------------------------------------------

@pytest.mark.parametrize("typ, raw, value", [
    ("int", " 42 ", 42), ("int", "+7", 7), ("int", "-2147483648", -(2**31)), ("long", "9223372036854775807", 2**63 - 1),
    ("double", "0.5", 0.5), ("double", ".5", 0.5), ("double", "1e-3", 0.001), ("double", "2d", 2.0),
    ("double", "Infinity", float("inf")), ("double", 1, 1.0), ("boolean", "FALSE", False), ("boolean", True, True),
    ("string", "  lz4 ", "lz4"), ("list", "a, b ,c", ["a", "b", "c"]), ("list", "  ", []), ("list", ("x ", "y"), ["x", "y"]),
])
def test_parse_value(typ, raw, value):
    assert parse_value("k", typ, raw) == value


@pytest.mark.parametrize("typ, raw", [
    ("int", "1_000"), ("int", "4.0"), ("int", ""), ("int", "0x10"), ("int", True), ("long", "1e3"),
    ("double", "NaN"), ("double", "1_0.5"), ("double", "abc"), ("boolean", "1"),
])
def test_parse_value_rejects(typ, raw):
    with pytest.raises(InvalidConfigError, match="Invalid value .* for configuration k: "):
        parse_value("k", typ, raw)


@pytest.mark.parametrize("x, text", [
    (0.5, "0.5"), (1.0, "1.0"), (0.0, "0.0"), (0.001, "0.001"), (1e-5, "1.0E-5"), (1234567.0, "1234567.0"),
    (12345678.9, "1.23456789E7"), (1e7, "1.0E7"), (-2.5e-4, "-2.5E-4"), (1.7976931348623157e308, "1.7976931348623157E308"),
])
def test_doubles_print_as_java_does(x, text):
    assert java_double(x) == text


# --- server.properties -------------------------------------------------------------------------------

def test_parse_properties_handles_real_files():
    text = (
        "# a comment\n"
        "   ! another one \\\n"
        "plain=1\n"
        "colon: 2\n"
        "space   3\n"
        "  indented = 4  \n"
        "continued = a,\\\n"
        "            b\n"
        "two.backslashes=x\\\\\n"
        "not.continued=y\n"
        "escaped\\=key\\:x = v\n"
        "tabs=\\tq\\u00e9\n"
        "path=C:\\dir\n"
        "eq=a=b\n"
        "lonely\n"
        "empty=\r\n"
        "utf8=é\n"
        "plain=5\n"
    )
    assert parse_properties(text) == {
        "plain": "5", "colon": "2", "space": "3", "indented": "4  ", "continued": "a,b", "two.backslashes": "x\\",
        "not.continued": "y", "escaped=key:x": "v", "tabs": "\tqé", "path": "C:dir", "eq": "a=b", "lonely": "",
        "empty": "", "utf8": "é",
    }


def test_synonyms_and_priorities_from_server_properties():
    def broker(text: str) -> LogConfig:
        return LogConfig({}, BrokerConfig.from_properties(text))

    assert broker("log.retention.hours=48").retention_ms == 48 * 3_600_000
    assert broker("log.retention.hours=48\nlog.retention.minutes=90").retention_ms == 90 * 60_000
    assert broker("log.retention.hours=48\nlog.retention.minutes=90\nlog.retention.ms=7").retention_ms == 7
    assert broker("log.retention.hours=-1").retention_ms == -1  # any negative retention means forever
    assert broker("log.roll.hours=2").segment_ms == 7_200_000
    assert broker("log.roll.hours=2\nlog.roll.ms=5").segment_ms == 5
    assert broker("log.roll.jitter.hours=1").segment_jitter_ms == 3_600_000
    assert broker("log.flush.scheduler.interval.ms=300").flush_ms == 300
    assert broker("log.flush.scheduler.interval.ms=300\nlog.flush.interval.ms=9").flush_ms == 9
    cfg = broker(
        "message.max.bytes=2000\nlog.cleaner.min.cleanable.ratio: 0.2\nlog.segment.bytes 1048576\n"
        "log.cleanup.policy=compact\ncompression.type=lz4\nlog.cleaner.delete.retention.ms=5\nlog.preallocate=true\n"
        "log.index.size.max.bytes=4096\nlog.index.interval.bytes=10\nlog.segment.delete.delay.ms=0\n"
        "log.message.timestamp.type=LogAppendTime\nlog.cleaner.min.compaction.lag.ms=3\n"
    )
    assert (cfg.max_message_bytes, cfg.min_cleanable_dirty_ratio, cfg.segment_bytes) == (2000, 0.2, 1048576)
    assert (cfg.compact, cfg.delete, cfg.compression_type, cfg.delete_retention_ms, cfg.preallocate) == (True, False, "lz4", 5, True)
    assert (cfg.segment_index_bytes, cfg.index_interval_bytes, cfg.file_delete_delay_ms) == (4096, 10, 0)
    assert (cfg.message_timestamp_type, cfg.min_compaction_lag_ms) == ("LogAppendTime", 3)


def test_broker_values_are_typed_and_validated():
    b = BrokerConfig({"log.cleaner.threads": 3, "log.cleaner.enable": "false", "log.dirs": "/a, /b"})
    assert (b.get("log.cleaner.threads"), b.log_cleaner_enable, b.log_dirs) == (3, False, ["/a", "/b"])
    assert b.is_set("log.cleaner.threads") and not b.is_set("num.partitions")
    with pytest.raises(InvalidConfigError, match="^Invalid value -1 for configuration log.cleaner.threads: Value must be at least 0$"):
        BrokerConfig({"log.cleaner.threads": "-1"})
    with pytest.raises(InvalidConfigError, match="Value must be at least 14"):
        BrokerConfig({"log.segment.bytes": "13"})
    with pytest.raises(InvalidConfigError, match="Unknown broker config name: nope"):
        b.get("nope")
    with pytest.raises(AttributeError):
        b.no_such_config  # noqa: B018
    with pytest.raises(AttributeError):
        b.x = 1


@pytest.mark.parametrize("props, message", [
    ({"log.retention.ms": "0"}, "log.retention.ms must be unlimited (-1) or, greater than or equal to 1"),
    ({"log.retention.minutes": "0"}, "log.retention.ms must be unlimited (-1) or, greater than or equal to 1"),
    ({"log.roll.ms": "0"}, "log.roll.ms must be greater than or equal to 1"),
    ({"log.roll.jitter.ms": "-1"}, "log.roll.jitter.ms must be greater than or equal to 0"),
])
def test_broker_requirements(props, message):
    with pytest.raises(InvalidConfigError) as exc:
        BrokerConfig(props)
    assert str(exc.value) == message


def test_unknown_broker_keys_are_kept_but_warned(caplog):
    with caplog.at_level(logging.DEBUG, logger="compactlog.storage.broker_config"):
        b = BrokerConfig.from_properties("broker.id=0\nlog.cleaner.threads=2\nmy.setting=x\nsegment.bytes=5\n")
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warned == ["The configuration my.setting was supplied but isn't a known config.",
                      "The configuration segment.bytes was supplied but isn't a known config."]
    assert b.get("my.setting") == "x" and b.get("broker.id") == "0"
    assert LogConfig({}, b).segment_bytes == 2**30  # a topic name in server.properties sets nothing


# --- LogConfig ---------------------------------------------------------------------------------------

def test_override_precedence_and_describe_sources():
    broker = BrokerConfig.from_properties("log.retention.hours=1\ncompression.type=lz4\nlog.segment.bytes=4096\n")
    cfg = LogConfig({"compression.type": "zstd", "segment.ms": "100"}, broker)
    assert (cfg.compression_type, cfg.retention_ms, cfg.segment_bytes, cfg.segment_ms) == ("zstd", 3_600_000, 4096, 100)
    rows = {r.name: r for r in cfg.describe()}
    assert (rows["compression.type"].value, rows["compression.type"].source) == ("zstd", "DYNAMIC_TOPIC_CONFIG")
    assert rows["compression.type"].synonyms == (
        ("DYNAMIC_TOPIC_CONFIG", "compression.type", "zstd"), ("STATIC_BROKER_CONFIG", "compression.type", "lz4"),
        ("DEFAULT_CONFIG", "compression.type", "producer"))
    assert (rows["retention.ms"].value, rows["retention.ms"].source) == ("3600000", "STATIC_BROKER_CONFIG")
    assert rows["retention.ms"].synonyms == (
        ("STATIC_BROKER_CONFIG", "log.retention.hours", "1"), ("DEFAULT_CONFIG", "log.retention.hours", "168"))
    assert (rows["segment.bytes"].source, rows["delete.retention.ms"].source) == ("STATIC_BROKER_CONFIG", "DEFAULT_CONFIG")
    assert rows["segment.ms"].source == "DYNAMIC_TOPIC_CONFIG" and cfg.source("segment.ms") == "DYNAMIC_TOPIC_CONFIG"
    assert "No effect here" in rows["unclean.leader.election.enable"].doc and "No effect" not in rows["segment.ms"].doc


def test_log_config_is_immutable_and_keeps_normalized_overrides():
    cfg = LogConfig({"segment.bytes": " 1024 ", "cleanup.policy": "compact, delete"})
    assert dict(cfg.overrides) == {"segment.bytes": "1024", "cleanup.policy": "compact,delete"}
    assert cfg.get("segment.bytes") == 1024 and cfg.get("cleanup.policy") == ["compact", "delete"]
    with pytest.raises(AttributeError):
        cfg.segment_bytes = 5
    with pytest.raises(TypeError):
        cfg.overrides["segment.bytes"] = "5"  # type: ignore[index]
    with pytest.raises(InvalidConfigError, match="Unknown topic config name: segment.size"):
        cfg.get("segment.size")
    changed = cfg.with_overrides({"retention.ms": 5}, segment_bytes=2048)
    assert (changed.segment_bytes, changed.retention_ms, cfg.segment_bytes) == (2048, 5, 1024)
    assert changed != cfg and LogConfig(dict(cfg.overrides)) == cfg


def test_timestamp_window_falls_back_to_the_deprecated_difference():
    cfg = LogConfig({"message.timestamp.difference.max.ms": "1000"})
    assert (cfg.message_timestamp_before_max_ms, cfg.message_timestamp_after_max_ms) == (1000, 1000)
    cfg = LogConfig({"message.timestamp.difference.max.ms": "1000", "message.timestamp.before.max.ms": "50"})
    assert (cfg.message_timestamp_before_max_ms, cfg.message_timestamp_after_max_ms) == (50, 1000)
    assert LogConfig().message_timestamp_after_max_ms == 2**63 - 1


# --- alter (kafka-configs --alter) -------------------------------------------------------------------

def test_alter_adds_replaces_and_deletes():
    current = {"retention.ms": "5", "segment.ms": "9"}
    assert alter(current, {"retention.ms": "6", "preallocate": "TRUE"}, ["segment.ms"]) == \
        {"retention.ms": "6", "preallocate": "true"}
    assert current == {"retention.ms": "5", "segment.ms": "9"}  # the input is left alone
    assert alter(current, delete=["retention.ms", "segment.ms"]) == {}


def test_alter_errors_use_kafkas_wording():
    with pytest.raises(InvalidConfigError) as exc:
        alter({"segment.ms": "9"}, {}, ["foo", "retention.ms", "segment.ms"])  # unknown, and known but unset
    assert str(exc.value) == "Invalid config(s): foo,retention.ms"
    with pytest.raises(InvalidRequestError, match="^Error due to duplicate config keys$"):
        alter({"segment.ms": "9"}, {"segment.ms": "10"}, ["segment.ms"])
    with pytest.raises(InvalidConfigError, match="Invalid value 0 for configuration segment.ms"):
        alter({}, {"segment.ms": "0"})
    with pytest.raises(InvalidConfigError, match="conflict topic config setting"):
        alter({"max.compaction.lag.ms": "5"}, {"min.compaction.lag.ms": "6"})


# --- docs --------------------------------------------------------------------------------------------

def test_docs_table_lists_every_topic_config():
    table = docs_table()
    lines = table.splitlines()
    assert lines[0] == "| config | default | valid values | server default property | meaning |"
    assert len(lines) == 2 + len(TOPIC_CONFIGS)
    for name, key in TOPIC_CONFIGS.items():
        row = next(line for line in lines if line.startswith(f"| `{name}` |"))
        assert key.doc.replace("|", "\\|") in row
        if key.valid_values:
            assert f"`{key.valid_values}`" in row
    assert "| `segment.bytes` | `1073741824` | `[14,...]` | `log.segment.bytes` |" in table
    assert "| `follower.replication.throttled.replicas` | `\"\"` |" in table


def test_plain_docs_and_broker_docs():
    text = docs_table(markdown=False)
    assert "retention.ms\n    Age, by the newest record" in text
    assert "    Type: long  Default: 604800000\n    Valid values: [-1,...]\n    Server default property: log.retention.ms" in text
    broker = docs_table(configs=BROKER_CONFIGS)
    assert all(f"| `{name}` |" in broker for name in BROKER_CONFIGS)
    assert "| `log.retention.minutes` | `null` |" in broker
