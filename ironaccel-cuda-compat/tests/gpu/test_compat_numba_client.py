"""What numba-cuda 0.30 asks of cuda.core, on the compat: the inputs it passes and the handles it keeps.

numba-cuda wraps its own streams' `CUstream` handles with `Stream.from_handle`, links empty CUDA C++ sources
(a `CUSource("")` that only carries module setup/teardown callbacks), unloads the libraries it loaded through
`ObjectCode.handle` itself (cuda.core 1.2 never unloads one), and views the device buffers it allocates with
`StridedMemoryView.from_buffer`, launching from their `_layout`.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

pytestmark = pytest.mark.backend("cuda")

SAXPY = r"""
extern "C" __global__ void saxpy(float a, const float* x, float* y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""


def test_stream_from_handle_takes_a_custream(cc, device, stream):
    from cuda.bindings import driver

    wrapped = cc.Stream.from_handle(stream.handle)  # a CUstream, as numba's Stream.handle is
    assert wrapped == stream and int(wrapped.handle) == int(stream.handle)
    wrapped.sync()
    default = cc.Stream.from_handle(driver.CUstream(0))  # numba: from_handle(stream.handle or 0)
    assert int(default.handle) == 0
    default.sync()
    for bad in ("0", 1.0, None, True):
        with pytest.raises(TypeError, match="Stream handle must be an int"):
            cc.Stream.from_handle(bad)


@pytest.mark.filterwarnings("ignore:The CUDA driver version is older:RuntimeWarning")  # on an older driver
def test_an_empty_cuda_source_compiles_to_an_empty_program(cc, device):
    options = cc.ProgramOptions(arch=f"sm_{device.arch}", relocatable_device_code=True)
    for source in ("", "\n  \n"):
        ptx = cc.Program(source, "c++", options).compile("ptx")
        assert ptx.code_type == "ptx" and b".version" in ptx.code and b".entry" not in ptx.code
    with pytest.raises(TypeError, match="Expected type str"):
        cc.Program(b"", "c++", options)  # cuda.core 1.2 takes C++ as str only


def test_a_library_whose_handle_was_taken_is_unloaded_by_its_holder_only(cc, device):
    from cuda.bindings import driver

    options = cc.ProgramOptions(arch=f"sm_{device.arch}")
    code = cc.Program(SAXPY, "c++", options).compile("cubin")
    kernel = code.get_kernel("saxpy")
    handle = int(code.handle)  # numba keeps this and calls cuLibraryUnload on it when it drops the module
    assert int(kernel.handle) != 0
    del code, kernel
    gc.collect()  # the compat's ObjectCode and Library go: the library must still be loaded
    (err,) = driver.cuLibraryUnload(driver.CUlibrary(handle))
    assert err == driver.CUresult.CUDA_SUCCESS  # the first and only unload

    untouched = cc.Program(SAXPY, "c++", options).compile("cubin")
    untouched.get_kernel("saxpy")  # a library nobody took the handle of is still the compat's to unload
    assert untouched._lib.owned


def test_a_view_of_a_buffer_launches_from_its_layout(cc, device, stream):
    n = 16
    buf = device.allocate(n * 4, stream=stream)
    view = cc.utils.StridedMemoryView.from_buffer(buf, shape=(n,), strides=None, dtype=np.float32)
    layout = view._layout
    assert view.ptr == int(buf.handle) and layout.strides_in_bytes is None and layout.is_contiguous_c
    strided = cc.utils.StridedMemoryView.from_buffer(buf, shape=(n // 2,), strides=(2,), dtype=np.float32)
    assert strided._layout.strides_in_bytes == (8,) and not strided._layout.is_contiguous_any
    buf.close(stream)
    stream.sync()
