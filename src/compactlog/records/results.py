"""What the record kernels return and raise, defined once for both implementations.

The Python twin builds these classes; the compiled module imports this file when it loads and builds
the same ones, so a caller reads ``summary.null_keys`` whichever kernel ran. Results are NamedTuples:
they still unpack like the plain tuples they replace.
"""

from __future__ import annotations

from typing import NamedTuple


class KernelError(ValueError):
    """Records that do not parse: ``reason`` says what is wrong; ``section`` is set by ``scan_many``
    and names which of its sections (which batch of a chunk) it is."""

    def __init__(self, reason: str, section: int | None = None) -> None:
        super().__init__(reason if section is None else f"section {section}: {reason}")
        self.reason = reason
        self.section = section

    def __reduce__(self) -> tuple[type[KernelError], tuple[str, int | None]]:
        return type(self), (self.reason, self.section)


class RecordsSummary(NamedTuple):
    """``summarize_records``: what append validation needs from a records section (deltas, not times)."""

    null_keys: int
    min_ts_delta: int
    max_ts_delta: int
    sequential_offsets: bool  # offset deltas are exactly 0..count-1
    invalid_header_keys: int  # records with a header key that is not strict UTF-8


class BinaryColumn(NamedTuple):
    """``gather_column``: one binary column in Arrow's layout."""

    offsets: bytes  # n + 1 int32
    values: bytes  # every non-null value, back to back
    validity: bytes | None  # one bit per row, least significant first; None when nothing is null
    null_count: int


class DecodedColumns(NamedTuple):
    """``decode_columns``: what a columnar reader takes from a run of batches, in Arrow's layouts."""

    rows: int
    key: BinaryColumn
    value: BinaryColumn
    offsets: bytes  # int64 a row
    timestamps: bytes  # int64 microseconds a row (Spark's timestamp unit)
    timestamp_types: bytes  # int32 a row: 0 CreateTime, 1 LogAppendTime


class MapPut(NamedTuple):
    """``offset_map_put``: where putting keys into the cleaner's offset map stopped, and what it did."""

    size: int  # entries in the map now
    next_row: int  # the first row not looked at (the stopping point when the map filled)
    full: bool  # stopped because the map holds max_entries
    probes: int  # slots looked at
    last_put: int  # the offset of the last record offered to the map, -1 if none
    puts: int  # records offered to the map (a versioned map may keep the entry it had)
