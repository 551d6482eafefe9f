"""Import paths: the bench folder itself, the repository's shared bench/ (harness.py, the method of every
backend's benchmark), and the repository's own sources when not installed.

On the GPU machine the working tree arrives without `pip install`; ironaccel_cuda and ironaccel
are then imported from ironaccel-cuda/src and ironaccel-core/src beside this folder.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
SHARED_BENCH_DIR = BENCH_DIR.parents[1] / "bench"
REPO_SOURCES = {
    "ironaccel_cuda": BENCH_DIR.parent / "src",
    "ironaccel": BENCH_DIR.parent.parent / "ironaccel-core" / "src",
}


def ensure_import_paths() -> list[str]:
    """Make bench modules, the shared ones and (if not installed) the repo's packages importable; return the
    folders that belong on a child's PYTHONPATH."""
    added: list[str] = []
    for folder in (BENCH_DIR, SHARED_BENCH_DIR):  # no module name is in both (bench/test_versus.py checks)
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
        added.append(str(folder))
    for module, source in REPO_SOURCES.items():
        if importlib.util.find_spec(module) is None and source.is_dir():
            sys.path.append(str(source))
            added.append(str(source))
    return added


def child_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a child Python of the benchmark: same imports as this process."""
    env = dict(os.environ)
    entries = ensure_import_paths()
    current = env.get("PYTHONPATH")
    env["PYTHONPATH"] = os.pathsep.join(entries + ([current] if current else []))
    env.update(extra or {})
    return env
