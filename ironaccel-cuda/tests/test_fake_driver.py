"""The GPU suite and the conformance suite, run on the CPU against a fake libcuda.so.1.

tests/fakecuda/fake_cuda.c implements the driver calls ironaccel_cuda makes,
over host memory, with the real cuda.h prototypes and the driver's error
codes; `cuda.bindings` loads it like the real driver, and so does the
compiled core (through cuGetProcAddress).  This runs the real binding
conversions, the compiled module's C calls, result tuples, error mapping,
packing, pools, the copy pipeline, graphs and bad-input paths end to end where
no GPU exists.  It needs a C compiler and cuda.h (a CUDA toolkit); without them
it skips.  It proves the Python and C layers, not the GPU: the GPU suite itself
must still pass on real hardware.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import cbuild

HERE = Path(__file__).parent
SOURCES = sorted((HERE / "fakecuda").glob("*.c"))  # fake_cuda.c plus one file per area


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
                          capture_output=True, text=True, env=env, timeout=900, cwd=HERE.parent)


def _passed(out: subprocess.CompletedProcess) -> None:
    # The first failure's traceback, then the tail (the summary): the tail alone hid why a test failed on CI.
    at = out.stdout.find("= FAILURES =")
    if at < 0:
        at = out.stdout.find("= ERRORS =")
    first = out.stdout[at:at + 8000] + "\n...\n" if at >= 0 else ""
    assert out.returncode == 0, first + out.stdout[-3000:] + out.stderr[-3000:]
    summary = out.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "failed" not in summary and "error" not in summary, summary


def test_gpu_suite_against_the_fake_driver(fake_lib, tmp_path):
    # Interop needs a real GPU: CuPy and PyTorch load the real libcuda, not the fake.
    args = [str(HERE / "gpu"), str(HERE / "test_conformance.py"), f"--ignore={HERE / 'gpu' / 'test_interop.py'}"]
    out = _pytest(args, _env(fake_lib, tmp_path))
    _passed(out)


def test_memory_suite_without_memory_pools(fake_lib, tmp_path):
    """Devices without stream-ordered pools fall back to cuMemAlloc / cuMemFree."""
    env = _env(fake_lib, tmp_path, FAKE_CUDA_NO_POOLS="1")
    out = _pytest([str(HERE / "gpu" / "test_memory.py"), str(HERE / "gpu" / "test_pinned.py"),
                   str(HERE / "gpu" / "test_transfer.py")], env)
    _passed(out)


def test_transfer_suite_with_a_tight_staging_pipeline(fake_lib, tmp_path):
    """Few threads and slots, odd chunk counts, non-temporal stores: every slot is reused within a copy."""
    env = _env(fake_lib, tmp_path, IRONACCEL_CUDA_COPY_THREADS="2", IRONACCEL_CUDA_COPY_SLOTS="2",
               IRONACCEL_CUDA_COPY_SPLIT="7", IRONACCEL_CUDA_COPY_NT="3", IRONACCEL_CUDA_COPY_CHUNK="65536")
    _passed(_pytest([str(HERE / "gpu" / "test_transfer.py")], env))


def test_fenced_waits_without_stream_memops(fake_lib, tmp_path):
    """Where cuStreamWriteValue32 fails, fenced waits turn off and every wait is cuStreamSynchronize."""
    env = _env(fake_lib, tmp_path, FAKE_CUDA_NO_STREAM_MEMOPS="1")
    _passed(_pytest([str(HERE / "gpu" / "test_stream_event.py"), "-k", "fall_back"], env))


def test_driver_without_a_device(fake_lib, tmp_path):
    code = (
        "import ironaccel, ironaccel_cuda\n"
        "from ironaccel_cuda import _core\n"
        "r = ironaccel.probe('cuda')\n"
        "print(r.available, r.code, r.code_name)\n"
        "print(r.reason)\n"
        "try:\n"
        "    ironaccel_cuda.Device(0)\n"
        "except ironaccel.NotAvailable as exc:\n"
        "    print('NotAvailable', exc.code)\n"
        "try:\n"
        "    _core.stream_sync(1)\n"  # the compiled core binds the driver at its first call
        "except ironaccel.IronAccelError as exc:\n"
        "    print('hot', type(exc).__name__, exc.code)\n"
    )
    env = _env(fake_lib, tmp_path, FAKE_CUDA_NO_DEVICE="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "False 100 CUDA_ERROR_NO_DEVICE"
    assert "found no CUDA-capable device" in lines[1]
    assert lines[2] == "NotAvailable 100"
    assert lines[3] == "hot NotAvailable 100"  # binding the driver runs cuInit, which says why


def test_an_entry_point_newer_than_the_driver_stays_unbound(fake_lib, tmp_path):
    """A 12.8 driver asked for cuMemcpyBatchAsync's 13.0 ABI would hand back its own prototype (one argument
    more): the compiled core does not ask, and the call is Unsupported naming it; older entry points still bind."""
    code = (
        "import numpy as np, ironaccel, ironaccel_cuda as cu\n"
        "dev = cu.Device(0)\n"
        "a, b = dev.alloc(64, 'uint8'), dev.alloc(64, 'uint8')\n"
        "b.copy_from(np.arange(64, dtype=np.uint8)); a.copy_from(b); print(int(a.copy_to_host()[63]))\n"
        "try:\n"
        "    cu.copy_batch([a], [b], stream=dev.create_stream())\n"
        "except ironaccel.Unsupported as exc:\n"
        "    print(type(exc).__name__, exc.op)\n"
    )
    env = _env(fake_lib, tmp_path, FAKE_CUDA_DRIVER_VERSION="12080")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["63", "Unsupported cuMemcpyBatchAsync"]
