"""Settable kernel attributes (Function.set_attributes): dynamic shared memory, shared carveout, cache preference."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from helpers import FAKE

import ironaccel_cuda as cu
from ironaccel import ClosedError, InvalidArgument, IronAccelError

pytestmark = pytest.mark.backend("cuda")

SHARED = r"""
extern "C" __global__ void reverse_in_shared(float* out, unsigned n) {
    extern __shared__ float buf[];
    for (unsigned i = threadIdx.x; i < n; i += blockDim.x) buf[i] = (float)i;
    __syncthreads();
    for (unsigned i = threadIdx.x; i < n; i += blockDim.x) out[i] = buf[n - 1 - i];
}
"""


def _fake_cache_config(fn: cu.Function) -> int:
    """The CUfunc_cache the fake driver was given for `fn` (tests/fakecuda/fake_cuda.c)."""
    lib = ctypes.CDLL("libcuda.so.1")
    lib.fake_cuda_func_cache_config.restype = ctypes.c_int
    lib.fake_cuda_func_cache_config.argtypes = [ctypes.c_void_p]
    return int(lib.fake_cuda_func_cache_config(ctypes.c_void_p(fn.handle)))


def test_set_attributes_reads_back(dev, kernels):
    fn = kernels.function("saxpy")
    assert fn.attributes.cache_config is None  # nothing set through ironaccel yet
    attrs = fn.set_attributes(max_dynamic_shared=64 << 10, shared_carveout=50, cache_config="shared")
    assert isinstance(attrs, cu.FunctionAttributes)
    assert (attrs.max_dynamic_shared_bytes, attrs.shared_carveout, attrs.cache_config) == (64 << 10, 50, "shared")
    assert fn.attributes == attrs and attrs.to_dict()["shared_carveout"] == 50
    if FAKE:
        assert _fake_cache_config(fn) == 1  # CU_FUNC_CACHE_PREFER_SHARED reached cuFuncSetCacheConfig
    assert fn.set_attributes(cache_config="l1").cache_config == "l1"
    if FAKE:
        assert _fake_cache_config(fn) == 2
    fn.set_max_dynamic_shared(2048)  # the shorthand sets the same attribute
    assert fn.attributes.max_dynamic_shared_bytes == 2048
    fn.set_attributes(shared_carveout=-1)  # back to the driver's choice: accepted
    # the launch still runs after all of it
    x, y = dev.upload(np.ones(64, np.float32)), dev.upload(np.zeros(64, np.float32))
    fn.launch(1, 64, 2.0, x, y, 64)
    np.testing.assert_array_equal(y.copy_to_host(), np.full(64, 2, np.float32))
    x.close()
    y.close()


def test_set_attributes_checks_values_before_any_call(dev, kernels):
    fn = kernels.function("scale_offset")
    fn.set_attributes(shared_carveout=25, cache_config="equal")
    limit = dev.attributes.max_shared_memory_per_block_optin - fn.attributes.shared_bytes
    bad = [
        (dict(max_dynamic_shared=limit + 1), "cuFuncSetAttribute", "opt-in limit"),
        (dict(max_dynamic_shared=-1), "cuFuncSetAttribute", "max_dynamic_shared"),
        (dict(max_dynamic_shared="big"), "cuFuncSetAttribute", "max_dynamic_shared"),
        (dict(shared_carveout=101), "cuFuncSetAttribute", "shared_carveout"),
        (dict(shared_carveout=-2), "cuFuncSetAttribute", "shared_carveout"),
        (dict(shared_carveout=True), "cuFuncSetAttribute", "shared_carveout"),
        (dict(shared_carveout=50.0), "cuFuncSetAttribute", "shared_carveout"),
        (dict(cache_config="L1"), "cuFuncSetCacheConfig", "cache_config must be one of"),
        (dict(shared_carveout=10, cache_config="prefer_l1"), "cuFuncSetCacheConfig", "cache_config"),
    ]
    for kwargs, op, text in bad:
        with pytest.raises(InvalidArgument) as info:
            fn.set_attributes(**kwargs)
        assert info.value.op == op and text in str(info.value), (kwargs, str(info.value))
    attrs = fn.attributes  # nothing of a refused call was applied
    assert (attrs.shared_carveout, attrs.cache_config) == (25, "equal")
    assert fn.set_attributes(max_dynamic_shared=limit).max_dynamic_shared_bytes == limit  # the limit itself is fine
    with pytest.raises(TypeError):
        fn.set_attributes(4096)  # keywords only


def test_set_attributes_on_a_library_kernel_and_a_closed_function(dev, kernel_code):
    lib = cu.Library(kernel_code)
    fn = lib.function("saxpy", dev)
    attrs = fn.set_attributes(max_dynamic_shared=32 << 10, shared_carveout=0, cache_config="l1")
    assert (attrs.max_dynamic_shared_bytes, attrs.shared_carveout, attrs.cache_config) == (32 << 10, 0, "l1")
    lib.close()
    mod = dev.load_module(kernel_code)
    closed = mod.function("saxpy")
    mod.close()
    with pytest.raises(ClosedError, match="cuFuncSetAttribute"):
        closed.set_attributes(cache_config="none")


@pytest.mark.skipif(FAKE, reason="the fake driver runs only the kernels of kernels.py")
def test_max_dynamic_shared_lets_a_launch_use_more_than_48_kib(dev):
    fn = dev.load_module(cu.Program(SHARED).compile("cubin", arch=dev)).function("reverse_in_shared")
    n = (100 << 10) // 4  # 100 KiB of floats
    out = dev.alloc(n, "float32")
    with pytest.raises(IronAccelError):
        fn.launch(1, 256, out, n, shared_mem=n * 4)  # above the 48 KiB default
        dev.synchronize()
    attrs = fn.set_attributes(max_dynamic_shared=n * 4, shared_carveout=100)
    assert attrs.max_dynamic_shared_bytes == n * 4 and attrs.shared_carveout == 100
    fn.launch(1, 256, out, n, shared_mem=n * 4)
    np.testing.assert_array_equal(out.copy_to_host(), np.arange(n, dtype=np.float32)[::-1])
    out.close()
    fn.module.close()
