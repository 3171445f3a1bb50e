"""Kafka's compression levels (KIP-390): the one definition of each codec's ``compression.<codec>.level``.

``codecs.LEVELS`` keys these by codec for compression and its checks; the topic config table takes its
defaults and valid ranges from there; the command line's help and the compression advisor read them too.
This module imports nothing, so that a command's ``--help`` can quote the ranges without loading the
codec libraries.
"""

from __future__ import annotations

from typing import NamedTuple


class LevelRange(NamedTuple):
    """The levels one codec accepts, and its config's default."""

    lo: int
    hi: int
    default: int
    # What the default stands for when it lies outside the range: gzip's -1 is "zlib's own default", 6.
    default_means: int | None = None

    @property
    def effective_default(self) -> int:
        """The level a compression at the default really uses."""
        return self.default if self.default_means is None else self.default_means

    def allows(self, level: int) -> bool:
        return level == self.default or self.lo <= level <= self.hi

    @property
    def text(self) -> str:
        """The range as help text shows it: ``1..17``, or ``1..9 or -1`` when the default lies outside."""
        outside = not self.lo <= self.default <= self.hi
        return f"{self.lo}..{self.hi}" + (f" or {self.default}" if outside else "")


# By the codec's config name, in Kafka's order.
LEVEL_RANGES: dict[str, LevelRange] = {
    "gzip": LevelRange(1, 9, -1, default_means=6),
    "lz4": LevelRange(1, 17, 9),
    "zstd": LevelRange(-131072, 22, 3),
}


def levels_text() -> str:
    """Every codec's levels in one phrase, for help texts: ``gzip 1..9 or -1, lz4 1..17, zstd -131072..22``."""
    return ", ".join(f"{name} {r.text}" for name, r in LEVEL_RANGES.items())
