"""Kafka's classic group coordinator for ``compactlog serve``, stored in a compacted ``__consumer_offsets``.

One module per Kafka concept:

- ``state``: the group states, the legal transitions and what each state answers, as tables;
- ``member``: one member's metadata and its parked JoinGroup/SyncGroup answers;
- ``group``: one group's metadata (members, generation, protocol, committed offsets), pure bookkeeping;
- ``rebalance``: the timers (join phase, initial delay, sessions, late SyncGroups);
- ``coordinator``: the rules of every group API (``GroupCoordinator``);
- ``manager``: appends to and replay of ``__consumer_offsets`` (``GroupMetadataManager``);
- ``offsets``: committed offsets, their expiry, and group deletion (``OffsetMetadataManager``);
- ``txn_offsets``: offsets committed in transactions, pending until their marker (``TxnOffsetManager``);
- ``handlers``: the wire handlers (``HANDLERS``) and ``setup(broker)``.

The key and value schemas of ``__consumer_offsets`` are ``compactlog.group_records`` (the CLI and the
console decode them too).
"""

GROUP_COORDINATOR = "group_coordinator"  # the broker's extras key of its group coordinator


def running_group_coordinator(broker):
    """The broker's ``GroupCoordinator``; None on a broker set up without one (some tests build such)."""
    return broker.extras.get(GROUP_COORDINATOR)
