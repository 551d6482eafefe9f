"""Run every example of this folder as a subprocess, as a user would, and fail on a non-zero exit.

NEEDS says what each example needs: the backends that must be usable (the test is marked with them, so it
skips with the probe's reason where one is not, and fails instead under IRONACCEL_REQUIRE: CI requires the
backends that run on its CPU, the H200 run requires the GPU ones).  An example run once per backend lists them
in `each`: it gets the backend's name as its argument.  Every examples/*.py must have an entry: an example
missing from NEEDS fails `test_every_example_has_an_entry_in_needs`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
TIMEOUT_S = 300


@dataclass(frozen=True)
class Needs:
    """What one example needs: backends that must all be usable, or (each) one run per backend."""

    backends: tuple[str, ...] = ()
    each: tuple[str, ...] = ()


NEEDS: dict[str, Needs] = {
    "survey.py": Needs(),
    "pick_device.py": Needs(),
    "scale_offset.py": Needs(each=("cuda", "vulkan", "webgpu", "opengl")),
    "pjrt_stablehlo.py": Needs(backends=("pjrt",)),
    "vulkan_batch.py": Needs(backends=("vulkan",)),
    "vulkan_interop.py": Needs(backends=("vulkan",)),
    "webgpu_batch.py": Needs(backends=("webgpu",)),
    "opengl_batch.py": Needs(backends=("opengl",)),
    "serving_loop.py": Needs(each=("vulkan", "webgpu", "opengl", "cuda")),
    "slang_saxpy.py": Needs(each=("vulkan", "webgpu", "opengl", "cuda")),
}


def examples() -> list[str]:
    """Every example file of this folder (the runner and helpers named test_* / _* are not examples)."""
    return sorted(p.name for p in HERE.glob("*.py") if not p.name.startswith(("test_", "_", "conftest")))


def runs() -> list[object]:
    """One pytest param per run of an example that exists, marked with the backends it needs."""
    params: list[object] = []
    for name in examples():
        needs = NEEDS.get(name)
        if needs is None:
            continue  # reported by test_every_example_has_an_entry_in_needs
        if needs.each:
            params += [pytest.param(name, (backend,), marks=pytest.mark.backend(backend), id=f"{name}[{backend}]")
                       for backend in needs.each]
        else:
            params.append(pytest.param(name, (), marks=[pytest.mark.backend(b) for b in needs.backends], id=name))
    return params


def test_every_example_has_an_entry_in_needs():
    missing = [name for name in examples() if name not in NEEDS]
    assert not missing, f"examples without an entry in NEEDS (examples/test_examples.py): {missing}"


def test_the_required_examples_exist():
    assert {"survey.py", "pick_device.py", "scale_offset.py", "pjrt_stablehlo.py"} <= set(examples())


@pytest.mark.parametrize(("name", "argv"), runs())
def test_example_runs(name: str, argv: tuple[str, ...]) -> None:
    env = dict(os.environ)
    env.setdefault("XDG_RUNTIME_DIR", "/tmp")
    try:
        done = subprocess.run([sys.executable, str(HERE / name), *argv], capture_output=True, text=True,
                              timeout=TIMEOUT_S, env=env, cwd=HERE.parent)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{name} {' '.join(argv)} ran past {TIMEOUT_S} s; output so far:\n{exc.stdout!r}\n{exc.stderr!r}")
    assert done.returncode == 0, f"{name} {' '.join(argv)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    assert done.stdout.strip(), f"{name} printed nothing"
