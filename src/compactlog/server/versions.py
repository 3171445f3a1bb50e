"""Which Kafka APIs the broker serves, at which versions, and the schema classes of each.

The ranges are Kafka 3.7's, flexible versions included, so that the newest clients take their modern
paths, cut below at what kio has (its schemas start where Kafka 4.0 does, which dropped the oldest
versions); docs/broker.md lists them. The schemas are kio's, generated from Kafka's own message JSON
files, so field names are Kafka's.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache
from types import MappingProxyType
from typing import Mapping


@dataclass(frozen=True)
class ApiRange:
    key: int
    name: str  # kio's module name, Kafka's message name in snake case
    min_version: int
    max_version: int


def _table(*rows: tuple[int, str, int, int]) -> Mapping[int, ApiRange]:
    return MappingProxyType({key: ApiRange(key, name, lo, hi) for key, name, lo, hi in sorted(rows)})


SERVED: Mapping[int, ApiRange] = _table(
    (0, "produce", 3, 10),
    (1, "fetch", 4, 16),
    (2, "list_offsets", 1, 8),
    (3, "metadata", 0, 12),
    # The group APIs at Kafka 3.7's versions (ListGroups v5, its types filter, is 3.8's). OffsetCommit v9
    # and OffsetFetch v9 exist for the KIP-848 consumer protocol; for a classic group they mean v8.
    (8, "offset_commit", 2, 9),
    (9, "offset_fetch", 1, 9),
    (10, "find_coordinator", 0, 4),
    (11, "join_group", 0, 9),
    (12, "heartbeat", 0, 4),
    (13, "leave_group", 0, 5),
    (14, "sync_group", 0, 5),
    (15, "describe_groups", 0, 5),
    (16, "list_groups", 0, 5),
    # SASL: every client in scope sends SaslHandshake v1 then SaslAuthenticate v0-2; v0 of the handshake
    # (bare tokens after it, before KIP-152) is served for older clients (kafka-python 2.0).
    (17, "sasl_handshake", 0, 1),
    (18, "api_versions", 0, 4),
    (19, "create_topics", 2, 7),
    (20, "delete_topics", 1, 6),
    (21, "delete_records", 0, 2),
    (22, "init_producer_id", 0, 4),
    (23, "offset_for_leader_epoch", 2, 4),
    # TxnOffsetCommit at Kafka 3.7's: v3 names the consumer's member and generation (KIP-447)
    (28, "txn_offset_commit", 0, 3),
    # The transactional producer's classic flow (transactions served by txn_handlers.py): AddPartitionsToTxn
    # v4 batches transactions between brokers and EndTxn v4/v5 are Kafka 4.0's (v5: Transactions V2), so
    # advertising 0-3 keeps every client on the flow Kafka 3.7 serves. WriteTxnMarkers v0 predates kio's
    # schemas (Kafka 4.0 dropped it); Kafka 3.7's admin client sends v1.
    (24, "add_partitions_to_txn", 0, 3),
    (25, "add_offsets_to_txn", 0, 3),
    (26, "end_txn", 0, 3),
    (27, "write_txn_markers", 1, 1),
    # ACLs at v1-3, as Kafka 3.7 (v2 is v1 made flexible; v3 adds the USER resource type, kept like the
    # others). kafka-python reads DescribeAcls v3 as "a Kafka 3.3 broker"; what that turns on in it
    # (KIP-735's 45 s session timeout by default) is served.
    (29, "describe_acls", 1, 3),
    (30, "create_acls", 1, 3),
    (31, "delete_acls", 1, 3),
    (32, "describe_configs", 1, 4),
    (33, "alter_configs", 0, 2),
    (34, "alter_replica_log_dirs", 1, 2),
    (35, "describe_log_dirs", 1, 4),
    (36, "sasl_authenticate", 0, 2),
    (37, "create_partitions", 0, 3),
    (38, "create_delegation_token", 1, 3),
    (39, "renew_delegation_token", 1, 2),
    (40, "expire_delegation_token", 1, 2),
    (41, "describe_delegation_token", 1, 3),
    (42, "delete_groups", 0, 2),
    (43, "elect_leaders", 0, 2),
    (44, "incremental_alter_configs", 0, 1),
    (45, "alter_partition_reassignments", 0, 0),
    (46, "list_partition_reassignments", 0, 0),
    (47, "offset_delete", 0, 0),
    (48, "describe_client_quotas", 0, 1),
    (49, "alter_client_quotas", 0, 1),
    # SCRAM credentials over the wire (KIP-554), from the store the SASL logins use
    (50, "describe_user_scram_credentials", 0, 0),
    (51, "alter_user_scram_credentials", 0, 0),
    (60, "describe_cluster", 0, 1),
    (61, "describe_producers", 0, 0),
    # answered from the transaction coordinator's state (transactions_admin.py)
    (65, "describe_transactions", 0, 0),
    (66, "list_transactions", 0, 0),
    (75, "describe_topic_partitions", 0, 0),
)

API_VERSIONS = 18


@cache
def request_class(key: int, version: int) -> type:
    """kio's request entity for ``key`` at ``version`` (served versions only)."""
    return _entity(key, version, "request", "Request")


@cache
def response_class(key: int, version: int) -> type:
    return _entity(key, version, "response", "Response")


def _entity(key: int, version: int, module: str, suffix: str) -> type:
    name = SERVED[key].name
    mod = importlib.import_module(f"kio.schema.{name}.v{version}.{module}")
    wanted = "".join(part.capitalize() for part in name.split("_")) + suffix
    return getattr(mod, wanted)


def is_flexible(key: int, version: int) -> bool:
    return bool(request_class(key, version).__flexible__)
