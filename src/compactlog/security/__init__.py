"""Who may connect and what they may do: SASL credentials, SCRAM and PLAIN, and ACLs.

Nothing here touches the network; the broker (``compactlog.server``) and the command line
(``compactlog configs --entity-type users``, ``compactlog acls``) both build on it, as Kafka's broker
and its ``kafka-configs.sh``/``kafka-acls.sh`` share one metadata store.

* ``scram``: SCRAM credentials (salt, stored key, server key, iterations: never a password) and the
  server side of the SCRAM-SHA-256/512 and PLAIN exchanges, sans-IO.
* ``credentials``: the users' credentials in the data directory (``__security/credentials.json``).
* ``acls``: ACL bindings, the authorizer's decision and their file (``__security/acls.json``).
* ``store``: the JSON file both keep, re-read when another process changed it.
"""
