"""Build script: everything is in pyproject.toml except the optional compiled fast path.

`ironaccel_cuda._hotc` (Cython, no CUDA headers needed) is built when Cython >= 0.29.30 and a
C compiler are present.  Anything missing or failing -- or IRONACCEL_CUDA_PURE_BUILD=1 -- gives
a pure-Python install that works the same, only slower (`ironaccel_cuda.FAST_PATH` says which).
"""

from __future__ import annotations

import os
import sys

from setuptools import setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join("src", "ironaccel_cuda", "_hotc.pyx")


def _warn(message: str) -> None:
    print(f"ironaccel-cuda: {message}; installing the pure-Python hot path", file=sys.stderr)


def _extensions() -> list:
    if os.environ.get("IRONACCEL_CUDA_PURE_BUILD", "").strip() not in ("", "0"):
        _warn("IRONACCEL_CUDA_PURE_BUILD is set")
        return []
    if os.name != "posix":
        _warn("the compiled fast path is built on POSIX systems only")
        return []
    try:
        import Cython
        from Cython.Build import cythonize
    except ImportError:
        _warn("Cython is not installed")
        return []
    from setuptools import Extension

    ext = Extension(
        "ironaccel_cuda._hotc",
        [SOURCE],
        extra_compile_args=["-O2", "-pthread", "-Wno-unused-function"],
        extra_link_args=["-pthread"],
    )
    try:
        return cythonize([ext], quiet=True, language_level=3,
                         compiler_directives={"language_level": 3, "binding": False})
    except Exception as exc:
        _warn(f"Cython {getattr(Cython, '__version__', '?')} could not translate {SOURCE} ({exc})")
        return []


class OptionalBuildExt(build_ext):
    """build_ext that never fails the install: without a working compiler the package stays pure Python."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:
            _warn(f"building the compiled fast path failed ({exc})")

    def build_extension(self, ext) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:
            _warn(f"compiling {ext.name} failed ({exc})")


os.chdir(HERE)
setup(ext_modules=_extensions(), cmdclass={"build_ext": OptionalBuildExt})
