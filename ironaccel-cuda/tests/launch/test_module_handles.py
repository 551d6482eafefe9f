"""Modules by handle, in the current context: load from a file or an image (with JIT options and logs), a kernel
and a global by name, unload; a library kernel's CUfunction; and their bad input."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from helpers.kernels import SOURCE

import ironaccel_cuda as cu
from ironaccel import DriverError, InvalidArgument

pytestmark = pytest.mark.backend("cuda")

TABLE = SOURCE + r"""
__device__ float table[64];  // 256 bytes
"""


@pytest.fixture(scope="module")
def image():
    return cu.Program(TABLE).compile("cubin", arch=cu.Device(0)).code


def _launch_saxpy(fn, a, x, y, n, stream):
    """cuLaunchKernel on a bare CUfunction address (what the compat's own launch path does)."""
    from cuda.bindings import driver

    args = ((np.float32(a), x, y, n), (ctypes.c_float, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint))
    (err,) = driver.cuLaunchKernel(driver.CUfunction(fn), 1, 1, 1, 256, 1, 1, 0, stream, args, 0)
    assert not err


def test_a_module_loaded_by_handle_launches_and_has_its_global(dev, image, tmp_path):
    dev.bind()
    s = dev.create_stream()
    log = cu.JitLog()
    modules = [cu.load_module_image(image), cu.load_module_image(memoryview(image), jit_options={"max_registers": 32},
                                                                 log=log)]
    assert isinstance(log.info, str) and isinstance(log.error, str) and log.error == ""
    path = tmp_path / "table.cubin"
    path.write_bytes(image)
    modules.append(cu.load_module_file(path))
    n = 256
    x, y = np.arange(n, dtype=np.float32), np.ones(n, np.float32)
    dx, dy = dev.alloc(n, "float32"), dev.alloc(n, "float32")
    try:
        for module in modules:
            fn = cu.module_function(module, "saxpy")
            assert cu.function_param_layout(fn) == ((0, 4), (8, 8), (16, 8), (24, 4))
            dx.copy_from(x)
            dy.copy_from(y)
            dev.synchronize()
            _launch_saxpy(fn, 2.0, dx.ptr, dy.ptr, n, s.handle)
            s.synchronize()
            np.testing.assert_array_equal(dy.copy_to_host(), 2 * x + 1)
            ptr, size = cu.module_global(module, "table")
            assert ptr != 0 and size == 256  # the size the source declares
            with pytest.raises(DriverError) as info:
                cu.module_function(module, "no_such_kernel")
            assert info.value.op == "cuModuleGetFunction" and info.value.code == 500  # CUDA_ERROR_NOT_FOUND
    finally:
        dx.close()
        dy.close()
        for module in modules:
            cu.unload_module(module)
        s.close()


def test_a_library_kernel_has_a_function_in_the_current_context(dev, image):
    dev.bind()
    lib = cu.Library(image)
    try:
        kernel = lib.function("saxpy", dev).handle  # a library Function's handle is its CUkernel
        fn = cu.kernel_function(kernel)
        assert fn != 0 and cu.function_param_layout(fn) == ((0, 4), (8, 8), (16, 8), (24, 4))
    finally:
        lib.close()


def test_copy_async_by_address(dev):
    dev.bind()
    s = dev.create_stream()
    a, b = dev.upload(np.arange(64, dtype=np.int32)), dev.alloc(64, "int32")
    cu.copy_async(b.ptr, a.ptr, 64 * 4, s)
    s.synchronize()
    np.testing.assert_array_equal(b.copy_to_host(), np.arange(64, dtype=np.int32))
    cu.copy_async(b.ptr, a.ptr, 0, s.handle)  # nothing to copy: nothing happens
    with pytest.raises(InvalidArgument) as info:
        cu.copy_async(0, a.ptr, 4, s)
    assert info.value.op == "cuMemcpyAsync"
    a.close()
    b.close()
    s.close()


def test_module_handle_bad_input(dev, image):
    dev.bind()
    cases = [
        (lambda: cu.load_module_image("ptx text"), "cuModuleLoadData"),
        (lambda: cu.load_module_image(42), "cuModuleLoadData"),
        (lambda: cu.load_module_image(b""), "cuModuleLoadData"),
        (lambda: cu.load_module_image(image, jit_options={"no_such_option": 1}), "cuModuleLoadDataEx"),
        (lambda: cu.load_module_image(image, jit_options={"info_log_buffer": bytearray(8)}), "cuModuleLoadDataEx"),
        (lambda: cu.load_module_image(image, jit_options=[5]), "cuModuleLoadDataEx"),
        (lambda: cu.load_module_image(image, log="yes"), "cuModuleLoadDataEx"),
        (lambda: cu.load_module_file(3), "cuModuleLoad"),
        (lambda: cu.load_module_file("a\0b"), "cuModuleLoad"),
        (lambda: cu.module_function(0, "saxpy"), "cuModuleGetFunction"),
        (lambda: cu.module_global(True, "table"), "cuModuleGetGlobal"),
        (lambda: cu.unload_module(-1), "cuModuleUnload"),
        (lambda: cu.kernel_function(None), "cuKernelGetFunction"),
        (lambda: cu.copy_async(8, 8, -1, 0), "cuMemcpyAsync"),
    ]
    module = cu.load_module_image(image)
    try:
        cases += [(lambda: cu.module_function(module, ""), "cuModuleGetFunction"),
                  (lambda: cu.module_global(module, "tab\0le"), "cuModuleGetGlobal")]
        for bad, op in cases:
            with pytest.raises(InvalidArgument) as info:
                bad()
            assert info.value.op == op and info.value.code is None  # refused before the driver
    finally:
        cu.unload_module(module)
    with pytest.raises(DriverError) as info:
        cu.load_module_file("/nonexistent/module.cubin")
    assert info.value.op == "cuModuleLoad" and info.value.code == 301  # CUDA_ERROR_FILE_NOT_FOUND
    log = cu.JitLog()
    with pytest.raises(DriverError) as info:
        cu.load_module_image(b"this is not a module", log=log)  # read as PTX: the JIT fails
    assert info.value.op == "cuModuleLoadDataEx" and info.value.code not in (None, 0)
    assert isinstance(log.error, str)
