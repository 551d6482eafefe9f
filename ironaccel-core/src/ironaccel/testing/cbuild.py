"""Build the C stand-ins a backend's tests run against: fake vendor libraries and small check programs.

Every backend that has no hardware here proves itself against a fake driver
compiled from the vendor's real header, so the compiler checks every
prototype and struct.  This is the one place that finds a compiler and runs
it; a test gets a skip with the reason (no compiler, no header) instead of an
error.

    from ironaccel.testing.cbuild import shared_library

    lib = shared_library([FAKE / "fake_ze.c"], tmp / "libze_loader.so.1", headers=[ZE_HEADER])
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path

__all__ = ["compiler", "missing", "build", "shared_library", "executable", "BuildError"]


class BuildError(RuntimeError):
    """The compiler refused a stand-in: the command and its output, whole."""


def compiler() -> str | None:
    """The C compiler: $CC if it names one on PATH, else cc, else gcc; None where there is none."""
    for name in (os.environ.get("CC", ""), "cc", "gcc"):
        if name and (found := shutil.which(name)):
            return found
    return None


def missing(headers: Iterable[str | os.PathLike[str]] = ()) -> str | None:
    """Why nothing can be built here (no compiler, a header that is not there), or None when it can."""
    if compiler() is None:
        return "needs a C compiler (cc or gcc, or $CC)"
    absent = [str(h) for h in headers if not Path(h).is_file()]
    if absent:
        return f"needs the header{'s' if len(absent) > 1 else ''} {', '.join(absent)}"
    return None


def build(sources: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str], *, shared: bool,
          headers: Iterable[str | os.PathLike[str]] = (), flags: Sequence[str] = (),
          libraries: Sequence[str] = (), std: str = "c11") -> Path:
    """Compile `sources` with -Wall -Werror into `out` (a shared library where `shared`); returns its path.

    `headers` are files that must exist (their folders are added to the include path); under pytest a missing
    compiler or header skips the calling test with the reason, elsewhere it is a BuildError.  `flags` go before
    the sources (defines, -I), `libraries` after them (-l, -L, -Wl,...).
    """
    found = [Path(h) for h in headers]
    reason = missing(found)
    if reason is not None:
        _skip_or_raise(reason)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    includes = sorted({f"-I{h.parent}" for h in found})
    args = [compiler() or "cc", f"-std={std}", "-Wall", "-Werror", *(["-shared", "-fPIC"] if shared else []),
            *includes, *flags, "-o", str(out), *map(str, sources), *libraries]
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode != 0:
        raise BuildError(f"{' '.join(args)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return out


def shared_library(sources: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str], *,
                   headers: Iterable[str | os.PathLike[str]] = (), flags: Sequence[str] = (),
                   libraries: Sequence[str] = (), std: str = "c11") -> Path:
    """`build(..., shared=True)`: a fake vendor library."""
    return build(sources, out, shared=True, headers=headers, flags=flags, libraries=libraries, std=std)


def executable(sources: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str], *,
               headers: Iterable[str | os.PathLike[str]] = (), flags: Sequence[str] = (),
               libraries: Sequence[str] = (), std: str = "c11") -> Path:
    """`build(..., shared=False)`: a program (a layout printer, a native unit test)."""
    return build(sources, out, shared=False, headers=headers, flags=flags, libraries=libraries, std=std)


def _skip_or_raise(reason: str) -> None:
    try:
        import pytest
    except ImportError:  # not under a test runner
        raise BuildError(reason) from None
    pytest.skip(reason)
