"""The fake libcuda.so.1 and libnccl.so.2, built as module-scoped fixtures, and pytest run on top of them.

tests/fakecuda/*.c implement the driver calls ironaccel_cuda makes, over host memory, with the real cuda.h
prototypes and the driver's error codes; tests/fakenccl/fake_nccl.c answers the NCCL calls nccl4py makes.
test_fake_driver.py, collectives/test_nccl_fake.py and collectives/test_nccl_bootstrap.py use them, and so does
ironaccel-cuda-compat's tests/test_fake_driver.py.  `_pytest` runs pytest in a child process whose
environment `_env` points at the fake.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import cbuild

#: ironaccel-cuda's tests folder.
TESTS = Path(__file__).resolve().parents[1]
SOURCES = sorted((TESTS / "fakecuda").glob("*.c"))  # fake_cuda.c plus one file per area


@pytest.fixture(scope="module")
def fake_lib(tmp_path_factory) -> Path:
    cc = cbuild.compiler()
    include = cbuild.cuda_include()
    if cc is None or include is None:
        pytest.skip(f"needs a C compiler and cuda.h (compiler: {cc}, cuda.h: {include})")
    folder = tmp_path_factory.mktemp("fakecuda")
    out = folder / "libcuda.so.1"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-Wall", "-Wno-unused-parameter", f"-I{include}", "-o", str(out),
                    *map(str, SOURCES), "-Wl,-soname,libcuda.so.1", "-lpthread"], check=True)
    return folder


@pytest.fixture(scope="module")
def fake_nccl(tmp_path_factory) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("needs a C compiler")
    folder = tmp_path_factory.mktemp("fakenccl")
    out = folder / "libnccl.so.2"
    source = TESTS / "fakenccl" / "fake_nccl.c"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-Wall", "-Wextra", "-Werror", "-o", str(out), str(source),
                    "-Wl,-soname,libnccl.so.2", "-lpthread", "-ldl"], check=True)
    return out


def _env(fake_lib: Path, tmp_path: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("IRONACCEL_REQUIRE", None)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (str(fake_lib), env.get("LD_LIBRARY_PATH")) if p)
    env["IRONACCEL_CUDA_FAKE"] = "1"
    # An async copy from page-locked memory reads its source as late as a real DMA may (fake_cuda.c): a call that
    # returns before the copy has surely run and lets its caller reuse the source fails here, not only on a GPU.
    env["FAKE_CUDA_DEFER_PINNED_DMA"] = "1"
    env["PYTHONFAULTHANDLER"] = "1"  # a crash, in the suite or a child it spawns, prints where it happened
    env["IRONACCEL_CUDA_CACHE_DIR"] = str(tmp_path / "cache")
    env.update(extra)
    return env


def _pytest(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rsfE", *args],
                          capture_output=True, text=True, env=env, timeout=900, cwd=TESTS.parent)


def _passed(out: subprocess.CompletedProcess) -> None:
    # The first failure's traceback, then the tail (the summary): the tail alone hid why a test failed on CI.
    at = out.stdout.find("= FAILURES =")
    if at < 0:
        at = out.stdout.find("= ERRORS =")
    first = out.stdout[at:at + 8000] + "\n...\n" if at >= 0 else ""
    assert out.returncode == 0, first + out.stdout[-3000:] + out.stderr[-3000:]
    summary = out.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "failed" not in summary and "error" not in summary, summary
