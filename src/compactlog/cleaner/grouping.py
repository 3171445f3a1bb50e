"""Which segments are rewritten together into one cleaned segment (Kafka's ``groupSegmentsBySize``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

MAX_RELATIVE = 2**31 - 1


@dataclass(frozen=True)
class SegmentSize:
    base_offset: int
    size: int
    offset_index_bytes: int
    time_index_bytes: int


def group_segments_by_size(
    segments: Sequence[SegmentSize], max_size: int, max_index_size: int, first_uncleanable: int
) -> list[list[int]]:
    """Greedy groups of consecutive segment indexes whose sum of log sizes, offset-index bytes and
    time-index bytes stay within the limits and whose offsets fit one relative-offset range."""
    groups: list[list[int]] = []
    i = 0
    n = len(segments)

    def estimated_last_offset(j: int) -> int:
        return (segments[j + 1].base_offset if j + 1 < n else first_uncleanable) - 1

    while i < n:
        group = [i]
        size = segments[i].size
        oidx = segments[i].offset_index_bytes
        tidx = segments[i].time_index_bytes
        first_base = segments[i].base_offset
        j = i + 1
        while j < n:
            s = segments[j]
            if (
                size + s.size <= max_size
                and oidx + s.offset_index_bytes <= max_index_size
                and tidx + s.time_index_bytes <= max_index_size
                and (s.size == 0 or estimated_last_offset(j) - first_base <= MAX_RELATIVE)
            ):
                group.append(j)
                size += s.size
                oidx += s.offset_index_bytes
                tidx += s.time_index_bytes
                j += 1
            else:
                break
        groups.append(group)
        i = j
    return groups
