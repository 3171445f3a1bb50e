"""The settings of ``compactlog serve``: the storage's broker settings widened with the server's own."""

from __future__ import annotations

import logging

import pytest

from compactlog.errors import InvalidConfigError
from compactlog.server.server_config import SERVER_CONFIGS, ServerConfig
from compactlog.storage.broker_config import BROKER_CONFIGS, BrokerConfig


def test_a_server_properties_file_holds_both_kinds_of_settings(caplog):
    text = "broker.id=0\nlisteners=PLAINTEXT://:9092\nlog.cleaner.threads=2\nsasl.enabled.mechanisms=PLAIN\nmy.setting=x\n"
    with caplog.at_level(logging.DEBUG, logger="compactlog.storage.broker_config"):
        config = ServerConfig.from_properties(text)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warned == ["The configuration my.setting was supplied but isn't a known config."]
    assert config.get("listeners") == ["PLAINTEXT://:9092"] and config.log_cleaner_threads == 2
    assert config.get("sasl.enabled.mechanisms") == ["PLAIN"] and config.get("group.max.size") == 2**31 - 1
    assert config.get("auto.create.topics.enable") is True and config.get("node.id") == 1  # Kafka's defaults
    assert isinstance(config, BrokerConfig)  # the storage takes it as its broker config


def test_the_server_settings_are_checked_as_the_storage_ones_are():
    with pytest.raises(InvalidConfigError, match="Invalid value abc for configuration max.connections"):
        ServerConfig({"max.connections": "abc"})
    with pytest.raises(InvalidConfigError, match="Unknown broker config name: listeners"):
        BrokerConfig({}).get("listeners")  # the storage alone has no listeners


def test_no_setting_is_declared_twice():
    assert not set(SERVER_CONFIGS) & set(BROKER_CONFIGS)
    assert set(ServerConfig.TABLE) == set(SERVER_CONFIGS) | set(BROKER_CONFIGS)


TRANSACTION_CONFIGS = {  # Kafka's TransactionLogConfig and TransactionStateManagerConfig defaults
    "transaction.state.log.num.partitions": 50,
    "transaction.state.log.segment.bytes": 104857600,
    "transaction.state.log.replication.factor": 3,
    "transaction.state.log.min.isr": 2,
    "transaction.max.timeout.ms": 900000,
    "transactional.id.expiration.ms": 604800000,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 10000,
    "transaction.remove.expired.transaction.cleanup.interval.ms": 3600000,
}


def test_the_transaction_coordinators_settings_have_kafkas_defaults():
    config = ServerConfig({})
    assert {name: config.get(name) for name in TRANSACTION_CONFIGS} == TRANSACTION_CONFIGS
    for name in TRANSACTION_CONFIGS:  # the coordinator reads them now
        assert "Not used until" not in SERVER_CONFIGS[name].doc, name


def test_kafkas_sample_transaction_settings_load_without_a_warning(caplog):
    text = "transaction.state.log.replication.factor=1\ntransaction.state.log.min.isr=1\n"
    with caplog.at_level(logging.WARNING):
        config = ServerConfig.from_properties(text)
    assert not caplog.records
    assert (config.get("transaction.state.log.replication.factor"), config.get("transaction.state.log.min.isr")) == (1, 1)


@pytest.mark.parametrize("name, value", [
    ("transaction.state.log.num.partitions", "0"),
    ("transaction.max.timeout.ms", "-1"),
    ("transactional.id.expiration.ms", "0"),
    ("transaction.abort.timed.out.transaction.cleanup.interval.ms", "0"),
    ("transaction.remove.expired.transaction.cleanup.interval.ms", "0"),
    ("transaction.state.log.min.isr", "0"),
    ("transaction.state.log.segment.bytes", "3000000000"),  # not an int
    ("transaction.state.log.replication.factor", "0"),
    ("transaction.state.log.replication.factor", "32768"),  # a short in Kafka
    ("transaction.max.timeout.ms", "1" * 5000),
])
def test_a_transaction_setting_out_of_its_range_is_refused_naming_it(name, value):
    with pytest.raises(InvalidConfigError, match=rf"Invalid value .* for configuration {name}"):
        ServerConfig({name: value})
