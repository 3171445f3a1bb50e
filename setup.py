"""Build hook for the compiled record kernels.

The kernels are optional at run time (a pure-Python twin exists), so a failed compile must not
break the install: we fall back to the twin and say so.
"""
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    def run(self) -> None:
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
            sources=["src/compactlog/records/_native.c"],
            extra_compile_args=["-O3", "-std=c99"],
        )
    ],
    cmdclass={"build_ext": OptionalBuildExt},
)
