"""Errors on a live device: a faulting kernel, a forked child, typed errors that name the call."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import ironaccel_cuda as cu
from ironaccel import DriverError, InvalidArgument, OutOfMemory

pytestmark = pytest.mark.backend("cuda")

TESTS = Path(__file__).parents[1]  # the children import helpers.kernels from here


def run_child(code: str) -> subprocess.CompletedProcess:
    script = f"import sys; sys.path.insert(0, {str(TESTS)!r})\n" + textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ))


def test_faulting_kernel_names_the_call_that_saw_it():
    """An illegal address poisons the context, so this runs in its own process."""
    out = run_child(
        """
        import ironaccel_cuda as cu
        from ironaccel import DriverError
        from helpers.kernels import SOURCE
        dev = cu.Device(0)
        fn = dev.load_module(cu.Program(SOURCE).compile()).function("fault")
        fn.launch(1, 32, 8)  # a raw pointer into nowhere
        try:
            dev.default_stream.synchronize()
            print("NO ERROR")
        except DriverError as exc:
            print("ERR", exc.op, exc.code, exc.code_name)
            print("MSG", exc)
        try:
            dev.alloc(16).close()
            print("STILL OK")
        except DriverError as exc:
            print("THEN", exc.op, exc.code_name)
        """
    )
    assert out.returncode == 0, out.stderr
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)
    assert lines["ERR"] == "cuStreamSynchronize 700 CUDA_ERROR_ILLEGAL_ADDRESS", out.stdout
    assert "illegal" in lines["MSG"].lower() and "unusable" in lines["MSG"]
    assert lines["THEN"] == "cuMemAllocAsync CUDA_ERROR_ILLEGAL_ADDRESS"


def test_forked_child_gets_typed_errors():
    out = run_child(
        """
        import os
        import numpy as np
        import ironaccel_cuda as cu
        from ironaccel import InvalidState
        dev = cu.Device(0)
        buf = dev.upload(np.arange(4, dtype=np.float32))
        stream = dev.create_stream()
        pid = os.fork()
        if pid == 0:
            failures = []
            for name, call in [
                ("cuMemcpyDtoHAsync", buf.copy_to_host),
                ("cuStreamSynchronize", stream.synchronize),
                ("cuStreamCreateWithPriority", dev.create_stream),
                ("Device", lambda: cu.Device(0)),
                ("cuMemAllocAsync", lambda: dev.alloc(16)),
            ]:
                try:
                    call()
                    failures.append(name + ": no error")
                except InvalidState as exc:
                    if exc.op != name or "fork" not in str(exc):
                        failures.append(f"{name}: {exc.op}: {exc}")
                except Exception as exc:
                    failures.append(f"{name}: {type(exc).__name__}: {exc}")
            buf.close()  # closing what the parent owns: no error, and no free of the parent's memory
            stream.close()
            print("CHILD", failures, flush=True)
            os._exit(0 if not failures else 1)
        _, status = os.waitpid(pid, 0)
        print("EXIT", os.waitstatus_to_exitcode(status))
        print("PARENT", buf.copy_to_host().tolist())
        """
    )
    assert out.returncode == 0, out.stderr
    assert "EXIT 0" in out.stdout, out.stdout
    assert "PARENT [0.0, 1.0, 2.0, 3.0]" in out.stdout


def test_error_fields(dev):
    with pytest.raises(OutOfMemory) as info:
        dev.alloc(dev.total_memory)
    err = info.value
    assert isinstance(err, DriverError) and isinstance(err, MemoryError)
    assert err.backend == "cuda" and err.op == "cuMemAllocAsync" and err.code == 2
    assert str(err).startswith("cuda: cuMemAllocAsync: CUDA_ERROR_OUT_OF_MEMORY (2)")
    with pytest.raises(InvalidArgument) as info:
        dev.alloc(-1)
    assert info.value.code is None and info.value.op == "cuMemAllocAsync" and isinstance(info.value, ValueError)


def test_code_names_and_strings_come_from_the_driver(dev):
    """code_string / driver_code_name: the driver's own words for a code, None for a code it does not know."""
    from ironaccel_cuda.errors import code_name, code_string, driver_code_name

    assert driver_code_name(2) == code_name(2) == "CUDA_ERROR_OUT_OF_MEMORY"
    assert code_string(2) == "out of memory"
    assert code_string(101) == "invalid device ordinal"
    assert driver_code_name(99999) is None and code_string(99999) is None
    assert code_name(99999) == "CUresult 99999"  # the fallback driver_code_name leaves to its callers
    with pytest.raises(OutOfMemory) as info:
        dev.alloc(dev.total_memory)
    assert code_string(2) in str(info.value)  # the text a typed error carries


def test_dlpack_consumer_streams_are_checked(dev):
    buf = dev.alloc(16, "float32")
    for bad in (0xDEADBEEF, 0xDEADBEE8, "abc", -5, 2.5, 1 << 70, True, 0):
        with pytest.raises(InvalidArgument) as info:
            buf.__dlpack__(stream=bad)
        assert info.value.op == "__dlpack__"
    s = dev.create_stream()
    for ok in (None, -1, 1, 2, s.handle):
        capsule = buf.__dlpack__(stream=ok)
        assert capsule is not None
    s.close()
    with pytest.raises(InvalidArgument):
        buf.__dlpack__(max_version="1.0")
    buf.close()


class _CAI:
    def __init__(self, cai):
        self.__cuda_array_interface__ = cai


def test_malformed_cuda_array_interface_is_refused(dev):
    buf = dev.alloc(16, "float32")
    good = dict(buf.__cuda_array_interface__)
    cases = [
        {k: v for k, v in good.items() if k != "shape"},
        {k: v for k, v in good.items() if k != "data"},
        {**good, "typestr": "<q9"},
        {**good, "typestr": 5},
        {**good, "data": good["data"][0]},
        {**good, "data": ("0x10", False)},
        {**good, "shape": 16},
        {**good, "shape": (4, "4")},
        {**good, "shape": (-1,)},
        {**good, "strides": (4, 4)},
        {**good, "strides": "4"},
        {**good, "mask": good["data"]},
        {**good, "stream": "s"},
        {**good, "stream": 0xDEADBEEF},
        "not a dict",
    ]
    for cai in cases:
        with pytest.raises(InvalidArgument) as info:
            cu.DeviceBuf.from_foreign(_CAI(cai))
        assert info.value.op == "DeviceBuf.from_foreign", cai
    view = cu.DeviceBuf.from_foreign(_CAI(good))
    assert view.ptr == buf.ptr and view.size == 16
    view.close()
    buf.close()


def test_large_host_arrays_reuse_their_regions(dev):
    n = 8 << 20
    buf = dev.alloc(n, "uint8")
    buf.copy_from(np.full(n, 7, np.uint8))
    cu.host_cache(trim=True)
    first = buf.copy_to_host()
    addr = first.ctypes.data
    assert cu.host_cache()["outstanding"] >= 1 and (first == 7).all()
    del first
    assert cu.host_cache()["kept_bytes"] >= n
    second = buf.copy_to_host()
    assert second.ctypes.data == addr and (second == 7).all() and second.flags.writeable
    second[:] = 1  # the array is the caller's: writable, and never shared with a later one
    third = buf.copy_to_host()
    assert third.ctypes.data != addr and (third == 7).all() and (second == 1).all()
    del second, third
    with pytest.raises(InvalidArgument):
        cu.host_cache(budget=-1)
    assert cu.host_cache(trim=True)["kept_bytes"] == 0
    buf.close()
