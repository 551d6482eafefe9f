"""Fixtures of the compat's GPU suite: ironaccel-cuda's GPU fixtures, plus the compat's own objects.

ironaccel-cuda's tests/helpers/fixtures.py is imported and its fixtures and hooks re-exported (`dev`,
`kernels`, `two`, `wait_until`, the multi_gpu mark), so one kit serves both suites; its `helpers` package is on
sys.path (../conftest.py) for `from helpers.kernels import SOURCE`.  As there, every module sets
`pytestmark = pytest.mark.backend("cuda")` and runs on a real GPU or, on CPU-only machines, against the fake
libcuda (`FAKE`).
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helpers.fixtures as _kit  # ironaccel-cuda's GPU fixtures (its tests/ is on sys.path: ../conftest.py)
import pytest
from helpers.kernels import SOURCE

sys.path.insert(0, str(Path(__file__).parent))  # records.py, compat_ipc_children.py, conftest; ahead of the kit

FAKE = os.environ.get("IRONACCEL_CUDA_FAKE") == "1"
_wait_until = _kit._wait_until
dev, two, kernel_code, kernels, wait_until = _kit.dev, _kit.two, _kit.kernel_code, _kit.kernels, _kit.wait_until
pytest_configure, pytest_runtest_setup = _kit.pytest_configure, _kit.pytest_runtest_setup


@pytest.fixture
def device(cc: Any) -> Any:
    """The cuda.core compat's Device 0, made current (as cuda.core's own tests set it up)."""
    d = cc.Device(0)
    d.set_current()
    return d


@pytest.fixture
def stream(device: Any) -> Iterator[Any]:
    """A cuda.core compat Stream of `device`, closed after the test."""
    s = device.create_stream()
    yield s
    s.close()


# -- the PyCUDA compat's driver module, a context made on device 0, and the kernels' SourceModule in it ----


@pytest.fixture
def drv() -> Iterator[Any]:
    """The PyCUDA compat's `driver`; every context this test left pushed is popped after it."""
    from ironaccel_cuda_compat.pycuda import driver

    yield driver
    while driver.Context.get_current() is not None:
        driver.Context.pop()
    gc.collect()


@pytest.fixture
def ctx(drv: Any) -> Iterator[Any]:
    """A PyCUDA context made on device 0, detached after the test."""
    c = drv.Device(0).make_context()
    yield c
    while drv.Context.get_current() is not None:
        drv.Context.pop()
    gc.collect()
    try:
        c.detach()
    except drv.LogicError:
        pass


@pytest.fixture
def mod(ctx: Any) -> Any:
    """The GPU suite's kernels as a PyCUDA SourceModule in `ctx`."""
    from ironaccel_cuda_compat.pycuda.compiler import SourceModule

    return SourceModule(SOURCE, no_extern_c=True)


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    """With IRONACCEL_CUDA_LEAK_REPORT=1: the PyCUDA compat's allocations still owning memory after the suite
    (their context not detached), and who holds them (ironaccel-cuda's conftest reports its own DeviceBufs)."""
    if os.environ.get("IRONACCEL_CUDA_LEAK_REPORT") != "1":
        return
    compat = sys.modules.get("ironaccel_cuda_compat.pycuda._memory")
    if compat is None:
        return
    gc.collect()
    held = [obj for obj in gc.get_objects() if isinstance(obj, compat.DeviceAllocation)
            and obj.__dict__.get("_kind", compat._FREED) != compat._FREED
            and getattr(obj.__dict__.get("_ctx"), "_valid", False)]
    print(f"[leak report] {len(held)} PyCUDA-compat DeviceAllocation(s) not freed at the end of the session")
    _kit._report_holders(held)
