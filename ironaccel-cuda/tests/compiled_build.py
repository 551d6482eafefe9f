"""Locating or building the compiled hot path (`ironaccel_cuda._hotc`) for the tests.

If the installed (or in-place built) package already imports `_hotc`, that is
used.  Otherwise the distribution is copied to a scratch folder and built
there with `setup.py build_ext --inplace` (needs Cython and a C compiler), and
the tests put that copy first on PYTHONPATH.  With
IRONACCEL_CUDA_REQUIRE_COMPILED=1 a missing toolchain is a failure, not a skip.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

DIST = Path(__file__).resolve().parent.parent
REQUIRE = os.environ.get("IRONACCEL_CUDA_REQUIRE_COMPILED", "").strip() not in ("", "0")


class Unbuildable(Exception):
    """The compiled module is neither installed nor buildable here (the reason is the message)."""


def installed() -> bool:
    return importlib.util.find_spec("ironaccel_cuda._hotc") is not None


def toolchain_problem() -> str | None:
    if importlib.util.find_spec("Cython") is None:
        return "Cython is not installed (pip install cython)"
    if not (shutil.which("cc") or shutil.which("gcc")):
        return "no C compiler"
    return None


def copy_distribution(dest: Path) -> Path:
    """A copy of the distribution's build inputs (no build products) under `dest`."""
    root = dest / "ironaccel-cuda"
    root.mkdir(parents=True)
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy2(DIST / name, root / name)
    shutil.copytree(DIST / "src", root / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.c", "*.egg-info"))
    return root


def build(dest: Path, extra_env: dict[str, str] | None = None) -> tuple[Path, subprocess.CompletedProcess]:
    """Build in a copy under `dest`; returns (the copy's src folder, the build's process)."""
    root = copy_distribution(dest)
    env = dict(os.environ, **(extra_env or {}))
    done = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=900)
    return root / "src", done


def pythonpath_with_compiled(dest: Path) -> str | None:
    """None when the environment already imports the compiled module; else a built copy's src folder."""
    if installed():
        return None
    problem = toolchain_problem()
    if problem:
        raise Unbuildable(problem)
    src, done = build(dest)
    if done.returncode != 0 or not list((src / "ironaccel_cuda").glob("_hotc*")):
        raise Unbuildable(f"the build did not produce _hotc:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return str(src)
