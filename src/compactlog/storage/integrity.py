"""When a stored batch can be trusted: the rule recovery, the checked reader and ``verify`` share.

A pure function of the batch, the segment it sits in and the offset the batch before it ended at, so
the three cannot disagree about what is damage.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import CorruptRecordError
from ..records.batch import MAGIC, RecordBatch

MAX_RELATIVE_OFFSET = 2**31 - 1  # a segment holds offsets base..base + this (4-byte relative offsets)


@dataclass(frozen=True)
class Damage:
    """A stretch of a segment that cannot be trusted: where it is and why."""

    file: str  # "<partition dir>/<segment file>"
    position: int
    reason: str
    tail: bool  # nothing valid follows it in its file (a torn write), so recovery may cut it

    def __str__(self) -> str:
        return f"{self.file} position {self.position}: {self.reason}"



@dataclass(frozen=True)
class Bounds:
    """What the owner of a segment knows about where its offsets may lie, beyond the segment itself.

    The 17 header bytes the CRC does not cover (base offset, batch length, leader epoch, magic) are
    checked against these, since a flipped bit there passes the CRC. A segment opened on its own (a
    dump, a side log) has the lenient default: offsets may jump anywhere and a partial batch at the end
    may be a tail still being written. The owner's log writes whole batches before readers see a new
    size, so to its readers a partial batch is always damage.
    """

    upper: int | None = None  # offsets stay below this: the next segment's base offset
    gaps_below: int | None = None  # offsets may jump only below this (cleaning left gaps); None: anywhere
    growing: bool = True  # another process may be appending: a partial batch at its end may be a write in flight


LENIENT = Bounds()


def header_problem(batch: RecordBatch, segment_base: int, expected_next: int, bounds: Bounds = LENIENT,
                   jumps_checked: bool = True) -> str | None:
    """Why a stored batch's header cannot be trusted, or None, from the header alone (no CRC): magic 2,
    a lastOffsetDelta that is not negative, offsets that follow the batch before it (``expected_next``:
    its next offset, or the segment's base for the first batch) and stay inside the segment and below
    the next one. Offsets may jump past ``expected_next`` only where cleaning removed records
    (``bounds.gaps_below``), and only when ``jumps_checked`` (the batch before is known).

    This is the one statement of these rules. ``records.kernels.walk_headers`` is their fast form (in C,
    ``_native.c``, and its Python twin, ``_py.py``; records cannot import storage): it says only whether a
    header passes, readers come here for the message. A rule changed here is changed there too, and
    ``tests/storage/test_header_walk.py`` fails until all three agree."""
    if batch.magic != MAGIC:
        return f"batch at offset {batch.base_offset} has magic {batch.magic} (only v2 is stored)"
    if batch.last_offset_delta < 0:
        return f"batch at offset {batch.base_offset} has a negative lastOffsetDelta {batch.last_offset_delta}"
    if batch.base_offset < expected_next:
        return (f"batch offsets {batch.base_offset}..{batch.last_offset} do not follow offset {expected_next - 1}"
                if expected_next > segment_base else
                f"batch offsets {batch.base_offset}..{batch.last_offset} are below the segment's base offset {segment_base}")
    if batch.last_offset - segment_base > MAX_RELATIVE_OFFSET:
        return f"batch offset {batch.last_offset} is beyond the range of the segment with base offset {segment_base}"
    if bounds.upper is not None and batch.last_offset >= bounds.upper:
        return (f"batch offsets {batch.base_offset}..{batch.last_offset} reach the next segment's base offset "
                f"{bounds.upper}")
    gaps_below = bounds.gaps_below
    if jumps_checked and gaps_below is not None and batch.base_offset > max(expected_next, gaps_below):
        return (f"batch offsets {batch.base_offset}..{batch.last_offset} jump from offset {expected_next - 1} "
                f"(offsets go missing only where the cleaner removed records, below offset {gaps_below})")
    return None


def batch_problem(batch: RecordBatch, segment_base: int, expected_next: int, check_crc: bool = True,
                  gaps_below: int | None = None, upper: int | None = None) -> str | None:
    """Why a stored batch cannot be trusted, or None: its size, magic and CRC (Kafka's ``ensureValid``;
    ``check_crc=False`` skips the CRC, as a consumer with ``check.crcs=false`` does), then its header
    (:func:`header_problem`). The base offset is outside the CRC, so only the offset checks catch a
    flipped bit there.

    ``gaps_below`` (the cleaner's checkpoint, when known): offsets may jump only where cleaning removed
    records, so a batch starting beyond ``expected_next`` and beyond it is damaged too.
    """
    if check_crc:
        try:
            batch.ensure_valid()
        except CorruptRecordError as exc:
            return str(exc)
    return header_problem(batch, segment_base, expected_next, Bounds(upper, gaps_below))
