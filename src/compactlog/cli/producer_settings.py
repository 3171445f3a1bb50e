"""The console producer's settings over ``--bootstrap-server``: ``--producer.config FILE``, then
``--producer-property k=v`` over it, then the named flags (``--request-required-acks``,
``--request-timeout-ms``...) over both, as kafka-console-producer merges them.

Kafka's producer names go to librdkafka through the same mapping as ``--command-config``
(``client_properties.settings``: security settings mapped, names librdkafka does not know refused,
named). Two are not librdkafka's: ``max.block.ms`` bounds, here, how long a send waits for room in the
producer's queue; ``key.serializer``/``value.serializer`` are dropped, as the console producer sets its
own (bytes) whatever the file says.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..errors import CompactLogError, shown
from ..numbers import LONG_MAX
from .client_properties import read_properties, settings
from .common import parse_number

SERIALIZERS = ("key.serializer", "value.serializer")


def producer_settings(config_file: str | None, properties: Mapping[str, str],
                      flags: Mapping[str, str]) -> tuple[dict[str, Any], int | None]:
    """(librdkafka settings, max.block.ms or None) for the merged producer settings."""
    props = {**(read_properties(config_file) if config_file else {}), **properties, **flags}
    for name in SERIALIZERS:
        props.pop(name, None)
    block = props.pop("max.block.ms", None)
    block_ms = None
    if block is not None:
        try:
            block_ms = parse_number(block.strip(), 0, LONG_MAX)
        except ValueError:
            raise CompactLogError(f"Invalid value {shown(block)} for configuration max.block.ms: "
                                  "Not a number of type LONG") from None
    return settings(props, "producer settings").librdkafka, block_ms
