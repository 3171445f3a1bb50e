"""The column table the record kernels share: the one place its column numbers are written.

A scan writes one row of ``NCOLS`` int64 columns per record; every other kernel (gather, rebase,
offset map, header versions) reads rows of that table, and Python code reads its columns by these
names. The Python twin imports the numbers from here; the compiled module includes ``_layout.h``, which
``setup.py`` writes from this file at build time (``c_header()``), and exposes what it was built with
as ``LAYOUT`` and ``POSITION_COLUMNS`` so a stale build is caught at import. To change a column, change
it here and rebuild.

This module imports nothing, so that the build can run it on its own.
"""

C_POS = 0  # where the record starts: its length varint
C_END = 1  # one past the record's last byte
C_OFFSET_DELTA = 2  # the record's offset delta (Chunk turns it into the absolute offset)
C_TS_DELTA = 3  # the record's timestamp delta
C_KEY_POS = 4  # where the key's bytes start
C_KEY_LEN = 5  # key length, -1 for a null key
C_VAL_POS = 6  # where the value's bytes start
C_VAL_LEN = 7  # value length, -1 for a null value (a tombstone)
C_HDR_POS = 8  # where the first header starts (just after the header count)
C_HDR_COUNT = 9  # number of headers
NCOLS = 10

# The columns that hold positions in the scanned buffer: scan_many moves these by a section's start.
POSITION_COLUMNS = (C_POS, C_END, C_KEY_POS, C_VAL_POS, C_HDR_POS)

SLOT = 24  # bytes per slot of the cleaner's offset map: a 16-byte key hash, then an int64 offset

# Every number above by name, as the compiled module reports the ones it was built with.
LAYOUT = {name: value for name, value in list(globals().items()) if name.startswith("C_")}
LAYOUT.update(NCOLS=NCOLS, SLOT=SLOT)


def c_header() -> str:
    """The C header that gives the compiled kernels these numbers (written next to ``_native.c``)."""
    columns = [name for name in LAYOUT if name.startswith("C_")]
    if sorted(LAYOUT[name] for name in columns) != list(range(NCOLS)):
        raise ValueError(f"the column numbers must be 0..{NCOLS - 1}, each once: {LAYOUT}")
    lines = [
        "/* Generated from layout.py by setup.py at build time: change layout.py, not this file. */",
        "#ifndef COMPACTLOG_LAYOUT_H",
        "#define COMPACTLOG_LAYOUT_H",
        f"#define NCOLS {NCOLS}",
        f"#define SLOT {SLOT}",
        "enum { " + ", ".join(f"{name} = {LAYOUT[name]}" for name in columns) + " };",
        "/* every column by name, for the module's LAYOUT */",
        "#define LAYOUT_COLUMNS { " + ", ".join(f'{{"{name}", {name}}}' for name in columns) + " }",
        f"#define NPOSITION_COLUMNS {len(POSITION_COLUMNS)}",
        "#define POSITION_COLUMNS_INIT { " + ", ".join(_name_of(c) for c in POSITION_COLUMNS) + " }",
        "#endif",
        "",
    ]
    return "\n".join(lines)


def _name_of(column: int) -> str:
    return next(name for name, value in LAYOUT.items() if name.startswith("C_") and value == column)
