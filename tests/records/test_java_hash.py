"""Java's String.hashCode and Kafka's coordinator partition rule (``compactlog.java_hash``), against values
worked out from Java's definition, h = s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units in signed 32
bits, and Kafka's Utils.abs (Integer.MIN_VALUE -> 0). Both coordinators place keys with it: a wrong bit
puts a group's offsets or a transactional id's state where Kafka does not look for them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compactlog.java_hash import coordinator_partition, kafka_abs, string_hash_code
from compactlog.group_records import java_string_hash, partition_for
from compactlog.transactions.coordinator import transaction_partition

INT_MIN = -(2**31)


@pytest.mark.parametrize("s, java_hash", [
    ("", 0),
    ("a", 97),
    ("ab", 3105),  # 97*31 + 98
    ("Aa", 2112),  # 65*31 + 97, and Java's classic collision:
    ("BB", 2112),  # 66*31 + 66
    ("g1", 3242),  # 103*31 + 49
    ("\u00e9", 233),  # é is one code unit, 0x00E9 (not its two UTF-8 bytes)
    ("\u20ac", 8364),  # € is one code unit, 0x20AC
    ("\U0001F600", 1772899),  # 😀 is two code units, 0xD83D 0xDE00: 55357*31 + 56832
    ("my-group", -1906497762),  # wraps past 2^31
    ("billing-1", 1828025695),
    ("gr\u00fcppe-\u03b1\u03b2", -1041690822),
    ("polygenelubricants", INT_MIN),
    ("GydZG_", INT_MIN),
    ("DESIGNING WORKHOUSES", INT_MIN),
])
def test_string_hash_code_is_javas(s, java_hash):
    assert string_hash_code(s) == java_hash
    assert java_string_hash(s) == java_hash  # the group coordinator's name for the same function


def _by_definition(s: str) -> int:
    """Java's definition written out as a polynomial in big integers, wrapped once at the end."""
    data = s.encode("utf-16-be", "surrogatepass")
    units = [int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2)]
    total = sum(u * 31 ** (len(units) - 1 - i) for i, u in enumerate(units)) % 2**32
    return total - 2**32 if total >= 2**31 else total


@given(st.text(max_size=40))
def test_string_hash_code_is_the_polynomial_of_utf16_code_units(s):
    assert string_hash_code(s) == _by_definition(s)


def test_kafka_abs_maps_int_min_to_zero():
    assert [kafka_abs(n) for n in (INT_MIN, INT_MIN + 1, -5, 0, 7, 2**31 - 1)] == [0, 2**31 - 1, 5, 0, 7, 2**31 - 1]


@pytest.mark.parametrize("key, of_50", [
    ("", 0), ("g1", 42), ("my-group", 12), ("billing-1", 45), ("\U0001F600", 49),
    ("polygenelubricants", 0),  # Integer.MIN_VALUE: Math.abs would give a negative partition
])
def test_both_coordinators_place_a_key_in_the_same_partition(key, of_50):
    assert coordinator_partition(key, 50) == of_50
    assert partition_for(key, 50) == of_50  # __consumer_offsets
    assert transaction_partition(key, 50) == of_50  # __transaction_state


@pytest.mark.parametrize("partitions", [0, -1])
def test_a_topic_without_partitions_is_refused(partitions):
    with pytest.raises(ValueError, match="at least one partition"):
        coordinator_partition("g", partitions)
