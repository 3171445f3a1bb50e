"""Java's ``String.hashCode`` and the partition of a coordinator's internal topic that holds a key.

Kafka's coordinators keep each key in one partition of their internal topic: a group's offsets and
metadata in ``__consumer_offsets`` (``abs(groupId.hashCode()) % offsets.topic.num.partitions``), a
transactional id's state in ``__transaction_state`` (``abs(transactionalId.hashCode()) %
transaction.state.log.num.partitions``), and AddOffsetsToTxn names the group's offsets partition. A
directory Kafka wrote must load here with every key where Kafka put it, so the hash is Java's to the bit:
over UTF-16 code units (a character outside the Basic Multilingual Plane counts as two), wrapping in
signed 32 bits, with Kafka's ``Utils.abs``, which maps Integer.MIN_VALUE to 0 (Java's ``Math.abs`` would
leave it negative). It lives at the ground so that the group coordinator (server/) and the transaction
coordinator (transactions/) both use this one definition.
"""

from __future__ import annotations

_MASK = 0xFFFFFFFF


def string_hash_code(s: str) -> int:
    """Java's ``String.hashCode``: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units, in signed 32 bits."""
    h = 0
    units = s.encode("utf-16-be", "surrogatepass")  # a lone surrogate is one code unit in Java too
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & _MASK
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs`` of a signed 32-bit int: |n|, and 0 for Integer.MIN_VALUE."""
    return 0 if n == -(2**31) else abs(n)


def coordinator_partition(key: str, partitions: int) -> int:
    """The partition of a coordinator's internal topic of ``partitions`` partitions that holds ``key``
    (a group id, a transactional id): ``Utils.abs(key.hashCode()) % partitions``."""
    if partitions < 1:
        raise ValueError(f"an internal topic has at least one partition, not {partitions}")
    return kafka_abs(string_hash_code(key)) % partitions
