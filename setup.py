"""Build hook for the compiled record kernels.

The kernels are optional at run time (a pure-Python twin exists), so a failed compile must not
break the install: we fall back to the twin and say so.

The column numbers both implementations share are written once, in ``records/layout.py``; before
compiling, this writes them into ``records/_layout.h`` (git-ignored) for ``_native.c`` to include.
"""
import runpy
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

RECORDS = Path("src/compactlog/records")
LAYOUT_PY = RECORDS / "layout.py"
LAYOUT_H = RECORDS / "_layout.h"


def write_layout_header() -> None:
    """Write ``_layout.h`` from ``layout.py``, touching it only when its text changes (so an unchanged
    layout does not force a recompile)."""
    text = runpy.run_path(str(LAYOUT_PY))["c_header"]()
    if not LAYOUT_H.exists() or LAYOUT_H.read_text() != text:
        LAYOUT_H.write_text(text)


class OptionalBuildExt(build_ext):
    def run(self) -> None:
        write_layout_header()  # outside the fallback: a layout.py that cannot run is a bug to see
        try:
            super().run()
        except Exception as exc:  # pragma: no cover - only on machines without a compiler
            print(f"warning: compiled record kernels not built ({exc}); using the Python twin")

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # pragma: no cover
            print(f"warning: {ext.name} not built ({exc}); using the Python twin")


setup(
    ext_modules=[
        Extension(
            "compactlog.records._native",
            sources=[str(RECORDS / "_native.c"), str(RECORDS / "_decompress.c")],
            depends=[str(LAYOUT_H), str(RECORDS / "_decompress.h")],
            libraries=["dl"],  # dlopen: liblz4 and libzstd are loaded when first needed (_decompress.c)
            extra_compile_args=["-O3", "-std=c99"],
        )
    ],
    cmdclass={"build_ext": OptionalBuildExt},
)
