"""Build script: everything is in pyproject.toml except the compiled core, `ironaccel_cuda._core`.

The core is Cython (native/_core.pyx and its includes) over C (native/*.c), and needs no CUDA headers,
toolkit or driver to build: native/cuda_shim.h declares the few cuda.h types it uses, and the driver's entry
points are looked up at run time.  The C is compiled on its own with -Wall -Wextra -Werror.  A C compiler
and Cython 3 are required; without them the build stops at once with what to install.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_clib import build_clib
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
NATIVE = "native"
C_SOURCES = [f"{NATIVE}/{name}" for name in ("driver.c", "pinned.c", "staging.c", "fence.c", "hostmem.c", "owners.c")]
C_FLAGS = ["-O2", "-std=c11", "-fPIC", "-pthread", "-fvisibility=hidden", "-Wall", "-Wextra", "-Werror"]
NATIVE_LIB = "ironaccel_cuda_native"


def _fail(message: str) -> None:
    sys.exit(f"ironaccel-cuda: {message}")


def _check_toolchain() -> None:
    if os.name != "posix":
        _fail("the compiled core builds on POSIX systems (Linux) only")
    cc = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        _fail(f"no C compiler ({cc!r} not found): install one, e.g. `apt-get install gcc` or `dnf install gcc`, "
              "or install the prebuilt wheel (`pip install ironaccel-cuda`) instead of building from source")
    try:
        import Cython  # noqa: F401
    except ImportError:
        _fail("Cython 3 is needed to build from source: `pip install 'cython>=3'` (pip's build isolation "
              "installs it from pyproject.toml), or install the prebuilt wheel")


def _generate_declarations() -> None:
    subprocess.run([sys.executable, os.path.join(NATIVE, "gen_entry_points.py")], check=True, cwd=HERE)


class BuildClib(build_clib):
    """Compile the native C with its own warnings-as-errors flags (Cython's generated C gets the defaults)."""

    def build_libraries(self, libraries):  # type: ignore[no-untyped-def]
        for name, info in libraries:
            objects = self.compiler.compile(info["sources"], output_dir=self.build_temp,
                                            include_dirs=info.get("include_dirs"), extra_postargs=info["cflags"])
            self.compiler.create_static_lib(objects, name, output_dir=self.build_clib)


class BuildExt(build_ext):
    def run(self) -> None:
        self.run_command("build_clib")
        clib = self.get_finalized_command("build_clib")
        for ext in self.extensions:
            ext.library_dirs.append(clib.build_clib)
        super().run()


def _extensions() -> list[Extension]:
    _check_toolchain()
    _generate_declarations()
    from Cython.Build import cythonize

    ext = Extension(
        "ironaccel_cuda._core",
        [f"{NATIVE}/_core.pyx"],
        include_dirs=[NATIVE],
        libraries=[NATIVE_LIB],
        extra_compile_args=["-O2", "-pthread", "-Wno-unused-function"],
        extra_link_args=["-pthread"],
    )
    return cythonize([ext], quiet=True)  # directives (language_level, binding, ...): the header of _core.pyx


os.chdir(HERE)
setup(
    ext_modules=_extensions(),
    libraries=[(NATIVE_LIB, {"sources": C_SOURCES, "cflags": C_FLAGS, "include_dirs": [NATIVE]})],
    cmdclass={"build_clib": BuildClib, "build_ext": BuildExt},
)
