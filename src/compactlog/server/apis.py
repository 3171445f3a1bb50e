"""The table of API handlers: each API module exports ``HANDLERS`` (api key -> coroutine).

An API is advertised in ApiVersions only when a handler for it is installed, so a version range in
``versions.py`` never promises something that is not served.
"""

from __future__ import annotations

from . import admin, configs, fetch, list_offsets, metadata, produce, producer_ids
from . import acls, sasl  # security: logins on SASL listeners; the ACL APIs and the authorizer

MODULES = [metadata, produce, fetch, list_offsets, producer_ids, admin, configs]
MODULES += [sasl, acls]
from .coordinator import handlers as groups  # noqa: E402 - the group coordinator, __consumer_offsets
MODULES += [groups]


def install(broker) -> None:
    for module in MODULES:
        for key, handler in module.HANDLERS.items():
            assert key not in broker.handlers, f"two handlers for api key {key}"
            broker.handlers[key] = handler
        setup = getattr(module, "setup", None)
        if setup is not None:  # modules with state of their own (the group coordinator)
            setup(broker)
