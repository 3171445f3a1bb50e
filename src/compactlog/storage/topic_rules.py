"""The rules a new or grown topic must meet before anything is written: its name is free, its partition
directories can be named, and the partition counts stay within bounds.

Pure functions over the topics a data directory holds (name -> metadata with a ``partitions`` count);
the log manager calls them under its lock, so the counts they see are the ones a create would change.
"""

from __future__ import annotations

from typing import Mapping

from ..errors import InvalidPartitionsError, PolicyViolationError, TopicAlreadyExistsError, shown
from . import files

# Kafka's controller writes at most this many metadata records for one request (QuorumController's
# MAX_RECORDS_PER_USER_OP) and refuses a larger one: the bound under any max.broker.partitions.
MAX_RECORDS_PER_CHANGE = 10_000


def check_name_free(topics: Mapping[str, dict], name: str) -> None:
    """A legal name no topic has, nor one that differs from it only by '.' against '_' (Kafka's metrics
    names cannot tell those apart)."""
    files.validate_topic_name(name)
    if name in topics:
        raise TopicAlreadyExistsError(f"Topic {shown(name)} already exists.")
    collisions = [t for t in topics if t.replace(".", "_") == name.replace(".", "_")]
    if collisions:
        raise TopicAlreadyExistsError(
            f"Topic {shown(name)} collides with existing topic: {collisions[0]} ('.' and '_' are treated alike, as in Kafka)"
        )


def check_dir_names(name: str, n: int) -> None:
    """Every one of ``n`` partition directories gets a name the file system takes."""
    longest = files.partition_dir_name(name, n - 1)
    if len(longest.encode()) > files.MAX_FILE_NAME:
        raise InvalidPartitionsError(f"Topic {shown(name)} cannot have {n} partitions: the directory name {longest} "
                                     f"would be longer than {files.MAX_FILE_NAME} bytes.")


def check_partition_limit(topics: Mapping[str, dict], limit: int, adding: int, what: str,
                          records: int | None = None) -> None:
    """``max.broker.partitions`` (``limit``) bounds the partitions of every topic together, and, as in
    Kafka, one change writes at most ``MAX_RECORDS_PER_CHANGE`` metadata records (a topic record, one per
    config override and one per partition; a growth one per new partition), whatever the limit is set
    to. The one place partition counts are bounded: the API, the CLI, the console and CreateTopics /
    CreatePartitions all come here before a directory is made. Both are refused with POLICY_VIOLATION;
    the second in the words Kafka's controller uses for a request bigger than it writes at once, the
    first naming the limit (Kafka has no such broker limit to quote)."""
    have = sum(m["partitions"] for m in topics.values())
    if have + adding > limit:
        raise PolicyViolationError(f"{what}: the data directory holds {have} partitions and "
                                   f"max.broker.partitions is {limit}.")
    records = adding if records is None else records
    if records > MAX_RECORDS_PER_CHANGE:
        raise PolicyViolationError(f"Unable to perform excessively large batch operation. {what}: one change "
                                   f"writes at most {MAX_RECORDS_PER_CHANGE} records, and this one needs {records}.")
