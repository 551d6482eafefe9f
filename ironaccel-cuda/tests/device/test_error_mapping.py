"""Error naming and mapping, and the hot module's contract, without a driver."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("cuda.bindings.driver")

from ironaccel import (
    ClosedError,
    DriverError,
    InvalidArgument,
    InvalidState,
    OutOfMemory,
)
from ironaccel_cuda import _core
from ironaccel_cuda.errors import closed, code_name, driver_error, invalid


@pytest.mark.parametrize("code,cls,name", [
    (2, OutOfMemory, "CUDA_ERROR_OUT_OF_MEMORY"),
    (1, InvalidArgument, "CUDA_ERROR_INVALID_VALUE"),
    (400, InvalidArgument, "CUDA_ERROR_INVALID_HANDLE"),
    (201, InvalidState, "CUDA_ERROR_INVALID_CONTEXT"),
    (900, InvalidState, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"),
    (700, DriverError, "CUDA_ERROR_ILLEGAL_ADDRESS"),
    (222, DriverError, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"),
])
def test_mapping(code, cls, name):
    err = driver_error(code, "cuSomething")
    assert type(err) is cls
    assert err.backend == "cuda" and err.op == "cuSomething" and err.code == code and err.code_name == name
    assert str(err).startswith(f"cuda: cuSomething: {name} ({code})")


def test_hints():
    assert "unusable" in str(driver_error(700, "cuStreamSynchronize"))
    assert "bind()" in str(driver_error(201, "cuMemcpyHtoDAsync"))
    assert "CUBIN" in str(driver_error(222, "cuModuleLoadData"))
    assert isinstance(driver_error(2, "x"), MemoryError)
    assert isinstance(driver_error(1, "x"), ValueError)


def test_unknown_code():
    assert "99999" in code_name(99999)
    err = driver_error(99999, "cuX", "detail here")
    assert type(err) is DriverError and "detail here" in str(err)


def test_input_errors():
    err = invalid("cuMemAllocAsync", "size must be positive")
    assert err.code is None and err.op == "cuMemAllocAsync" and "size must be positive" in str(err)
    c = closed("cuStreamSynchronize", "stream")
    assert isinstance(c, ClosedError) and "stream is closed" in str(c)


CORE_CALLS = [
    ("stream_sync", lambda h: _core.stream_sync(h)),
    ("stream_query", lambda h: _core.stream_query(h)),
    ("stream_wait", lambda h: _core.stream_wait(h, h)),
    ("event_record", lambda h: _core.event_record(h, h)),
    ("event_sync", lambda h: _core.event_sync(h)),
    ("event_query", lambda h: _core.event_query(h)),
    ("event_destroy", lambda h: _core.event_destroy(h)),
    ("mem_alloc_async", lambda h: _core.mem_alloc_async(16, h)),
    ("mem_free_async", lambda h: _core.mem_free_async(h, h)),
    ("mem_free", lambda h: _core.mem_free(h)),
    ("memcpy_htod", lambda h: _core.memcpy_htod(h, b"x", 1, h)),
    ("memcpy_dtoh", lambda h: _core.memcpy_dtoh(bytearray(1), h, 1, h)),
    ("memcpy_dtod", lambda h: _core.memcpy_dtod(h, h, 1, h)),
    ("memset_d8", lambda h: _core.memset_d8(h, 0, 1, h)),
    ("memset_d16", lambda h: _core.memset_d16(h, 0, 1, h)),
    ("memset_d32", lambda h: _core.memset_d32(h, 0, 1, h)),
    ("graph_launch", lambda h: _core.graph_launch(h, h)),
]


@pytest.mark.parametrize("name,call", CORE_CALLS, ids=[n for n, _ in CORE_CALLS])
def test_closed_handle_raises_type_error_before_the_driver(name, call):
    """The contract callers rely on to turn use-after-close into ClosedError."""
    with pytest.raises(TypeError):
        call(_core.CLOSED)


def test_disable_after_fork_contract():
    code = textwrap.dedent(
        """
        from ironaccel_cuda import _core
        from ironaccel import InvalidState
        _core.disable("forked")
        assert _core.mem_free_async(1, 1) is None and _core.event_destroy(1) is None and _core.mem_free(1) is None
        for call, op in [(lambda: _core.stream_sync(1), "cuStreamSynchronize"),
                         (lambda: _core.graph_launch(1, 1), "cuGraphLaunch"),
                         (lambda: _core.mem_alloc_async(8, 1), "cuMemAllocAsync")]:
            try:
                call()
            except InvalidState as exc:
                assert exc.op == op and "forked" in str(exc), exc
            else:
                raise AssertionError(op)
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
