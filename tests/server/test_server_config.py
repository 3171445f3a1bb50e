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
