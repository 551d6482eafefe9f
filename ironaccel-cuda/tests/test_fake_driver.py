"""The GPU suite and the conformance suite, run on the CPU against a fake libcuda.so.1.

tests/fakecuda/fake_cuda.c implements the driver calls ironaccel_cuda makes,
over host memory, with the real cuda.h prototypes and the driver's error
codes; `cuda.bindings` loads it like the real driver, and so does the
compiled core (through cuGetProcAddress).  This runs the real binding
conversions, the compiled module's C calls, result tuples, error mapping,
packing, pools, the copy pipeline, graphs and bad-input paths end to end where
no GPU exists.  It needs a C compiler and cuda.h (a CUDA toolkit); without them
it skips.  It proves the Python and C layers, not the GPU: the GPU suite itself
must still pass on real hardware.  Which modules form the GPU suite: helpers/suite.py;
building the fake and running pytest on it: helpers/fakes.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from helpers import fakes, suite
from helpers.fakes import _env, _passed, _pytest

HERE = Path(__file__).parent
fake_lib = fakes.fake_lib  # the fixture: the fake libcuda, built once per module


def test_gpu_suite_against_the_fake_driver(fake_lib, tmp_path):
    # The GPU suite's modules (helpers/suite.py) but interop, which needs a real GPU: CuPy and PyTorch load the real
    # libcuda, not the fake.
    args = [str(path) for path in suite.gpu_suite() if path.name != "test_interop.py"]
    args.append(str(HERE / "compute" / "test_conformance.py"))
    out = _pytest(args, _env(fake_lib, tmp_path))
    _passed(out)


def test_memory_suite_without_memory_pools(fake_lib, tmp_path):
    """Devices without stream-ordered pools fall back to cuMemAlloc / cuMemFree."""
    env = _env(fake_lib, tmp_path, FAKE_CUDA_NO_POOLS="1")
    out = _pytest([str(HERE / "memory" / "test_memory.py"), str(HERE / "memory" / "test_pinned.py"),
                   str(HERE / "memory" / "test_transfer.py")], env)
    _passed(out)


def test_transfer_suite_with_a_tight_staging_pipeline(fake_lib, tmp_path):
    """Few threads and slots, odd chunk counts, non-temporal stores: every slot is reused within a copy."""
    env = _env(fake_lib, tmp_path, IRONACCEL_CUDA_COPY_THREADS="2", IRONACCEL_CUDA_COPY_SLOTS="2",
               IRONACCEL_CUDA_COPY_SPLIT="7", IRONACCEL_CUDA_COPY_NT="3", IRONACCEL_CUDA_COPY_CHUNK="65536")
    _passed(_pytest([str(HERE / "memory" / "test_transfer.py")], env))


def test_fenced_waits_without_stream_memops(fake_lib, tmp_path):
    """Where cuStreamWriteValue32 fails, fenced waits turn off and every wait is cuStreamSynchronize."""
    env = _env(fake_lib, tmp_path, FAKE_CUDA_NO_STREAM_MEMOPS="1")
    _passed(_pytest([str(HERE / "streams" / "test_stream_event.py"), "-k", "fall_back"], env))


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
