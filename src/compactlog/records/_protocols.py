"""The record kernels' interface, which both implementations claim.

``_native`` (compiled; its signatures in ``_native.pyi``) and ``_py`` (the Python twin) are both
modules that satisfy :class:`RecordKernels`; ``kernels.py`` binds one of them under this type, so a
type checker holds each to it. The compiled functions take positional arguments only, so the
interface does too. ``KERNELS`` (every kernel's name) is read from the class: adding a kernel here is
what makes the tests ask both implementations for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

if TYPE_CHECKING:
    from typing import TypeAlias

    import numpy as np
    import numpy.typing as npt
    from typing_extensions import Buffer

    from .results import BinaryColumn, DecodedColumns, MapPut, RecordsSummary

    # a column table of NCOLS int64 columns (see layout.py), or a flat int64 array
    Int64Array: TypeAlias = npt.NDArray[np.int64]
    # one header: a key (str, written as UTF-8, or bytes) and a value (None = null)
    Header: TypeAlias = "tuple[str | Buffer, Buffer | None]"

_T = TypeVar("_T", bound=tuple[Any, ...])


@runtime_checkable
class RecordKernels(Protocol):
    """Every record kernel, as ``kernels.py`` exports it. See ``_py.py`` for what each one does."""

    def encode_records(self, keys: Sequence[Buffer | None], values: Sequence[Buffer | None],
                       timestamps: Sequence[int], base_timestamp: int, offset_deltas: Sequence[int] | None,
                       headers: Sequence[Sequence[Header]] | Sequence[Header] | None,
                       header_offsets: Sequence[int] | None = None, /) -> bytes: ...

    def encode_columns(self, key_data: Buffer, key_spans: Int64Array, value_data: Buffer, value_spans: Int64Array,
                       timestamps: Int64Array, base_timestamp: int, header_key_data: Buffer | None = None,
                       header_key_spans: Int64Array | None = None, header_value_data: Buffer | None = None,
                       header_value_spans: Int64Array | None = None, header_ranges: Int64Array | None = None,
                       /) -> bytes: ...

    def scan_records(self, data: Buffer, count: int, out: Int64Array, /) -> int: ...

    def scan_many(self, data: Buffer, starts: Int64Array, ends: Int64Array, counts: Int64Array, out: Int64Array,
                  /) -> int: ...

    def decode_records(self, record_type: type[_T], topic: str | None, partition: int, timestamp_type: int,
                       data: Buffer, count: int, base_offset: int, base_timestamp: int,
                       timestamp_override: int | None, /) -> list[_T]: ...

    def summarize_records(self, data: Buffer, count: int, /) -> RecordsSummary: ...

    def gather_records(self, data: Buffer, cols: Int64Array, rows: Int64Array, /) -> bytes: ...

    def rebase_records(self, data: Buffer, cols: Int64Array, rows: Int64Array, ts_shift: int, /) -> bytes: ...

    def assemble_batches(self, data: Buffer, cols: Int64Array, rows: Int64Array, bounds: Int64Array, shifts: Int64Array,
                         headers: Buffer, out_ends: Int64Array, /) -> bytes: ...

    def gather_column(self, data: Buffer, cols: Int64Array, pos_col: int, len_col: int, /) -> BinaryColumn: ...

    def crc32c(self, data: Buffer, /) -> int: ...

    def scan_batches(self, base: Buffer, views: Sequence[Buffer], counts: Int64Array, base_offsets: Int64Array,
                     verify: bool, out: Int64Array, rows: Int64Array, /) -> int: ...

    def verify_batches(self, data: Buffer, table: Int64Array, /) -> int: ...

    def decode_columns(self, data: Buffer, table: Int64Array, start: int, end: int, max_size: int, /) -> DecodedColumns | None: ...

    def walk_headers(self, data: Buffer, position: int, segment_base: int, expected_next: int, known: bool,
                     upper: int | None, gaps_below: int | None, out: Int64Array, /) -> int: ...

    def murmur2(self, data: Buffer, /) -> int: ...

    def partition_for_keys(self, keys: Sequence[Buffer | None], num_partitions: int, /) -> list[int]: ...

    def partition_spans(self, key_data: Buffer, key_spans: Int64Array, num_partitions: int, out: Int64Array,
                        /) -> None: ...

    def key_hash(self, key: Buffer, /) -> bytes: ...

    def offset_map_put(self, table: Buffer, slots: int, max_entries: int, size: int, data: Buffer, cols: Int64Array,
                       base_offset: int, start_row: int, min_offset: int, versions: Int64Array | None = None,
                       row_versions: Int64Array | None = None, /) -> MapPut: ...

    def offset_map_get(self, table: Buffer, slots: int, data: Buffer, cols: Int64Array, out: Int64Array,
                       versions: Int64Array | None = None, out_versions: Int64Array | None = None, /) -> None: ...

    def offset_map_set(self, table: Buffer, slots: int, versions: Int64Array, data: Buffer, cols: Int64Array,
                       rows: Int64Array, offsets: Int64Array, row_versions: Int64Array, /) -> None: ...

    def offset_map_grow(self, table: Buffer, old_slots: int, new_slots: int, versions: Int64Array | None = None,
                        /) -> None: ...

    def header_versions(self, data: Buffer, cols: Int64Array, name: bytes | str, out: Int64Array, /) -> None: ...


KERNELS = tuple(name for name, member in vars(RecordKernels).items() if not name.startswith("_") and callable(member))
