"""Finding a C compiler, cuda.h and the fatbinary tool for the tests that build C (the fake driver, the native unit
tests) or fatbins."""

from __future__ import annotations

import glob
import os
import shutil
import sys


def compiler() -> str | None:
    return shutil.which("cc") or shutil.which("gcc")


def cuda_include() -> str | None:
    """A folder holding cuda.h and cudaTypedefs.h (a CUDA toolkit, or NVIDIA's pip headers), or None."""
    candidates = [os.path.join(os.environ[v], "include") for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    candidates += sorted(glob.glob("/usr/local/cuda*/include"), reverse=True) + ["/usr/include"]
    candidates += glob.glob(os.path.join(sys.prefix, "lib", "python3*", "site-packages", "nvidia", "*", "include"))
    for folder in candidates:
        if os.path.isfile(os.path.join(folder, "cuda.h")) and os.path.isfile(os.path.join(folder, "cudaTypedefs.h")):
            return folder
    return None


def fatbinary() -> str | None:
    """The CUDA toolkit's fatbinary tool, or None."""
    found = shutil.which("fatbinary")
    candidates = [os.path.join(os.environ[v], "bin", "fatbinary") for v in ("CUDA_HOME", "CUDA_PATH")
                  if os.environ.get(v)]
    candidates += sorted(glob.glob("/usr/local/cuda*/bin/fatbinary"), reverse=True)
    return found or next((c for c in candidates if os.access(c, os.X_OK)), None)
