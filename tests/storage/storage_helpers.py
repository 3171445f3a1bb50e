"""Helpers for storage tests: topic configs from python names, and small batches."""

from __future__ import annotations

from compactlog.records import Codec, build_batch
from compactlog.storage.broker_config import BrokerConfig
from compactlog.storage.log_config import LogConfig


def make_config(**overrides) -> LogConfig:
    """A LogConfig from Kafka-named overrides given as python names (segment_bytes=...)."""
    return LogConfig({k.replace("_", "."): str(v) for k, v in overrides.items()}, BrokerConfig({}))


def batch(keys, values=None, ts=1_700_000_000_000, codec=Codec.NONE, **kw) -> bytes:
    keys = [k if k is None or isinstance(k, bytes) else str(k).encode() for k in keys]
    if values is None:
        values = [b"v-" + (k or b"null") for k in keys]
    return build_batch(keys, values, [ts] * len(keys), codec=codec, **kw)
