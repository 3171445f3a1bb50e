"""The table of API handlers: each API module exports ``HANDLERS`` (api key -> coroutine).

The broker is built below its APIs and knows none of them; ``install`` fills its handler table from
the modules listed here and runs each module's ``setup`` (state of its own: the group coordinator,
the credentials, the authorizer, the check before a SASL login). An API is advertised in ApiVersions
only when a handler for it is installed, so a version range in ``versions.py`` never promises
something that is not served.
"""

from __future__ import annotations

from . import (acls, admin, configs, delegation_tokens, fetch, list_offsets, log_dirs, metadata, produce, producer_ids,
               producers, quotas, reassignments, sasl, scram_credentials, topic_partitions, transactions_admin,
               txn_handlers, txn_markers)
from .broker import Broker
from .coordinator import handlers as groups  # the group coordinator, __consumer_offsets

MODULES = [metadata, produce, fetch, list_offsets, producer_ids, admin, configs,
           topic_partitions, log_dirs, producers, reassignments, quotas,  # the rest of Kafka's admin APIs
           delegation_tokens, transactions_admin,
           txn_handlers, txn_markers,  # the transaction coordinator, __transaction_state, markers
           sasl, scram_credentials, acls,  # security: logins on SASL listeners, the credentials they check,
           # the ACL APIs and the authorizer
           groups]


def install(broker: Broker) -> Broker:
    """``broker`` answering every API of ``MODULES``; its logs are closed if a module cannot set up."""
    try:
        for module in MODULES:
            for key, handler in module.HANDLERS.items():
                assert key not in broker.handlers, f"two handlers for api key {key}"
                broker.handlers[key] = handler
            setup = getattr(module, "setup", None)
            if setup is not None:  # modules with state of their own (the group coordinator)
                setup(broker)
    except BaseException:
        broker.close()
        raise
    return broker
