"""Fixtures and hooks of the GPU suite: tests/conftest.py re-exports them for every folder.

Every module of the GPU suite (helpers/suite.py says which) sets `pytestmark = pytest.mark.backend("cuda")`
(a few: the `multi_gpu` mark, or skips of their own): without a usable CUDA backend the tests skip with the
probe's reason, and under IRONACCEL_REQUIRE=cuda they fail instead.  The same suite runs on a real GPU and, on
CPU-only machines, against the fake driver in tests/fakecuda (IRONACCEL_CUDA_FAKE=1 is set there; the few checks
only a real GPU can make look at `helpers.FAKE`).  ironaccel-cuda-compat's GPU suite re-exports them too.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from typing import Any

import pytest

from helpers.kernels import NAME_EXPRESSIONS, SOURCE


@pytest.fixture
def dev() -> Iterator[Any]:
    import ironaccel_cuda as cu

    d = cu.Device(0)
    yield d
    d.close()


@pytest.fixture
def two() -> Iterator[tuple[Any, Any]]:
    """Devices 0 and 1; skips on fewer (fails when cuda is required but unavailable: not every module using it is
    marked for the backend)."""
    import ironaccel
    from ironaccel.testing.pytest_plugin import ENV_REQUIRE, required_backends

    probe = ironaccel.probe("cuda")
    if not probe.available:
        if "cuda" in required_backends() or "*" in required_backends():
            pytest.fail(f"backend cuda unavailable: {probe.reason} (required by {ENV_REQUIRE})")
        pytest.skip(f"backend cuda unavailable: {probe.reason}")
    import ironaccel_cuda as cu

    if cu.device_count() < 2:
        pytest.skip(f"needs two CUDA devices, this machine has {cu.device_count()}")
    d0, d1 = cu.Device(0), cu.Device(1)
    yield d0, d1
    d0.close()
    d1.close()


@pytest.fixture(scope="session")
def kernel_code() -> Any:
    import ironaccel_cuda as cu

    return cu.Program(SOURCE, name_expressions=NAME_EXPRESSIONS).compile("cubin", arch=cu.Device(0))


@pytest.fixture
def kernels(dev: Any, kernel_code: Any) -> Iterator[Any]:
    mod = dev.load_module(kernel_code)
    yield mod
    mod.close()


@pytest.fixture(scope="module")
def fn() -> Iterator[Any]:
    """The test kernels' `saxpy` Function on a device of the module's own (the bad-input files share one)."""
    import ironaccel_cuda as cu

    dev = cu.Device(0)
    code = cu.Program(SOURCE, name_expressions=NAME_EXPRESSIONS).compile("cubin", arch=dev)
    mod = dev.load_module(code)
    yield mod.function("saxpy")
    mod.close()
    dev.close()


_pool_used: list[int] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: Any, nextitem: Any) -> Iterator[None]:
    """With IRONACCEL_CUDA_LEAK_REPORT=1: after each test, name it if it left more of the default pool in use
    than before (what memcheck would report as leaked at exit, traced to the test that did it)."""
    yield
    if os.environ.get("IRONACCEL_CUDA_LEAK_REPORT") != "1":
        return
    import gc

    try:
        import ironaccel_cuda as cu

        gc.collect()
        dev = cu.Device(0)
        dev.synchronize()
        used = dev.default_pool.usage().used
    except Exception:
        return
    if _pool_used and used > _pool_used[0]:
        print(f"\n[leak report] {item.nodeid} left {used - _pool_used[0]} more bytes of the default pool in use")
    _pool_used[:] = [used]


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    """With IRONACCEL_CUDA_LEAK_REPORT=1: list every buffer still owning device memory after the suite (and who
    holds it), so that a memcheck leak report at exit can be traced to a test."""
    if os.environ.get("IRONACCEL_CUDA_LEAK_REPORT") != "1":
        return
    import gc
    import sys

    # CuPy's and PyTorch's allocators keep freed blocks until exit, which the leak check at exit reports as
    # leaked: they give them back first, so only what is really still held shows.
    gc.collect()
    if "cupy" in sys.modules:
        cp = sys.modules["cupy"]
        cp.cuda.Device().synchronize()
        cp.get_default_memory_pool().free_all_blocks()
        cp.get_default_pinned_memory_pool().free_all_blocks()
    if "torch" in sys.modules and sys.modules["torch"].cuda.is_initialized():
        sys.modules["torch"].cuda.synchronize()
        sys.modules["torch"].cuda.empty_cache()

    try:
        from ironaccel_cuda import DeviceBuf
    except ImportError:
        return
    gc.collect()
    live = [obj for obj in gc.get_objects() if isinstance(obj, DeviceBuf) and not obj.closed and obj._base is None]
    print(f"\n[leak report] {len(live)} DeviceBuf(s) own device memory at the end of the session")
    _report_holders(live)


def _report_holders(objs: list[Any]) -> None:
    """Who holds each of `objs` (the first 10): referrers two levels up, frames by function and line, so that the
    report names the code that keeps memory alive.  The report's own lists and frame are left out."""
    import gc
    import sys

    mine = {id(objs), id(sys._getframe())}

    def describe(r: Any) -> str:
        if hasattr(r, "f_code"):
            return f"frame {r.f_code.co_name} {r.f_code.co_filename.rsplit('/', 1)[-1]}:{r.f_lineno}"
        return f"{type(r).__name__} {repr(r)[:70]}"

    for i in range(min(len(objs), 10)):
        obj = objs[i]
        lines = []
        for r in gc.get_referrers(obj):
            if id(r) in mine or r is objs:
                continue
            ups = [describe(u) for u in gc.get_referrers(r) if id(u) not in mine and u is not objs][:4]
            lines.append(f"{describe(r)} <- {ups}")
        print(f"[leak report]   {obj!r} (refcount {sys.getrefcount(obj) - 2}) held by {lines or 'nothing the GC sees'}")


def pytest_configure(config: Any) -> None:
    config.addinivalue_line(
        "markers",
        "multi_gpu: needs two or more CUDA devices; skipped on fewer, failed instead when IRONACCEL_REQUIRE names "
        "multi_gpu (deselect with -m 'not multi_gpu')",
    )


def pytest_runtest_setup(item: Any) -> None:
    if item.get_closest_marker("multi_gpu") is None:
        return
    import ironaccel
    from ironaccel.testing.pytest_plugin import ENV_REQUIRE, required_backends

    probe = ironaccel.probe("cuda")
    count = 0
    if probe.available:
        import ironaccel_cuda as cu

        count = cu.device_count()
    if count < 2:
        why = f"needs two or more CUDA devices, this machine has {count}"
        if not probe.available:
            why += f" (cuda: {probe.reason})"
        required = required_backends()
        if "multi_gpu" in required or "*" in required:
            pytest.fail(f"{why} (required by {ENV_REQUIRE})", pytrace=False)
        pytest.skip(why)


def _wait_until(predicate: Any, timeout: float = 10.0) -> None:
    """Poll `predicate`, draining the owners the driver released (graph attachments go through CUDA user
    objects, whose destructors run on a driver thread; a pending call normally drops them)."""
    import gc
    import time

    from ironaccel_cuda import _core

    deadline = time.monotonic() + timeout
    while not predicate():
        _core.drain_owners()
        gc.collect()
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout} s")
        time.sleep(0.005)


@pytest.fixture
def wait_until() -> Any:
    """`wait_until(predicate, timeout=10.0)`: see `_wait_until`."""
    return _wait_until
