"""Which of ironaccel-cuda's test modules form the GPU suite, read from the modules themselves.

The GPU suite runs on a GPU and, on CPU-only machines, against the fake libcuda (test_fake_driver.py runs
exactly these modules there, interop/test_interop.py left out).  A module belongs to it when its module-level
`pytestmark` names `pytest.mark.backend("cuda")` or `pytest.mark.multi_gpu`, or when OWN_SKIPS names it (the
few that skip by their own means instead).  Every other test module is CPU-only: it needs no driver and runs in
the ordinary pytest run only (on CI and on the GPU machine alike).  test_suite_layout.py checks the rule.

    python3 ironaccel-cuda/tests/helpers/suite.py     # the GPU suite's files, one a line, relative to the cwd

Standard library only, so the GPU machine's scripts (.ci/h200) can run it before anything is installed.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

#: ironaccel-cuda's tests folder.
TESTS = Path(__file__).resolve().parents[1]

#: GPU-suite modules without a module-level backend or multi_gpu mark, and how they skip instead.
OWN_SKIPS = {
    "multi_gpu/test_multi_gpu.py": "the `two` fixture skips on fewer than two devices (not marked for the backend "
                                   "on purpose: a one-GPU machine skips rather than fails)",
    "multi_gpu/test_peer_disable.py": "marked test by test: backend for the one-device case, multi_gpu for the rest",
    "collectives/test_nccl_faults.py": "skips unless the fake NCCL is loaded (collectives/test_nccl_fake.py runs it)",
}


def test_modules() -> list[Path]:
    """Every test module under tests/, sorted."""
    return sorted(p for p in TESTS.rglob("test_*.py") if "__pycache__" not in p.parts)


def marks(path: Path) -> set[str]:
    """The marks of `path`'s module-level `pytestmark`: "backend(cuda)" for `pytest.mark.backend("cuda")`, the
    bare name (e.g. "multi_gpu", "skipif") for the others."""
    found: set[str] = set()
    for node in ast.parse(path.read_text(), str(path)).body:
        if not (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark"
                                                     for t in node.targets)):
            continue
        called = {id(sub.func) for sub in ast.walk(node.value) if isinstance(sub, ast.Call)}
        for sub in ast.walk(node.value):
            if id(sub) in called:
                continue  # seen as its call
            mark = sub.func if isinstance(sub, ast.Call) else sub
            if isinstance(mark, ast.Attribute) and isinstance(mark.value, ast.Attribute) and mark.value.attr == "mark":
                if mark.attr == "backend" and isinstance(sub, ast.Call):
                    found.update(f"backend({a.value})" for a in sub.args
                                 if isinstance(a, ast.Constant) and isinstance(a.value, str))
                else:
                    found.add(mark.attr)
    return found


def in_gpu_suite(path: Path) -> bool:
    return path.relative_to(TESTS).as_posix() in OWN_SKIPS or bool(marks(path) & {"backend(cuda)", "multi_gpu"})


def gpu_suite() -> list[Path]:
    """The GPU suite's modules, sorted."""
    return [p for p in test_modules() if in_gpu_suite(p)]


def cpu_only() -> list[Path]:
    """The CPU-only test modules, sorted."""
    return [p for p in test_modules() if not in_gpu_suite(p)]


if __name__ == "__main__":
    for path in gpu_suite():
        print(os.path.relpath(path))
