"""The core conformance suites, adopted for CUDA.

Without a usable driver the device tests skip with the probe's reason (fail
under IRONACCEL_REQUIRE=cuda); the plugin-loading and probe tests run anywhere.
"""

from __future__ import annotations

import numpy as np
import pytest

from ironaccel.errors import InvalidArgument
from ironaccel.testing.conformance import BackendConformance, ComputeDeviceConformance
from ironaccel.testing.execution import ExecutionConformance
from ironaccel.testing.pytest_plugin import require

SCALE_OFFSET = r"""
extern "C" __global__ void scale_offset(const float* x, float* y, float a, float b, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + b;
}
"""

BROKEN = r"""
extern "C" __global__ void scale_offset(const float* x, float* y, float a, float b, unsigned n) {
    y[i] = a * x[i] + b   // undeclared i, missing semicolon
}
"""


#: ExecutionConformance's typed-params kernel: y = a*x + pair.x - pair.y*k, its by-value arguments read from the
#: signature.  The unused symbol tells the fake driver (tests/fakecuda, which finds kernels by name) this
#: scale_offset from the one above.
TYPED_PARAMS = r"""
extern "C" __device__ int ironaccel_fake_typed_params;
extern "C" __global__ void scale_offset(const float* x, float* y, float a, float2 pair, unsigned n, int k) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + pair.x - pair.y * (float)k;
}
"""


#: ExecutionConformance's constants kernel: y = x*SCALE + BIAS, its constants NVRTC defines over guarded defaults.
#: The string tells the fake driver (which cannot run the compiled code) the values the defines gave.
CONSTANTS = r"""
#ifndef SCALE
#define SCALE 1.0f
#endif
#ifndef BIAS
#define BIAS 0
#endif
#define IRONACCEL_TEXT(x) #x
#define IRONACCEL_STR(x) IRONACCEL_TEXT(x)
extern "C" __device__ const char ironaccel_fake_constants[] =
    "ironaccel-fake-constants " IRONACCEL_STR(SCALE) " " IRONACCEL_STR(BIAS);
extern "C" __global__ void scale_offset(const float* x, float* y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * SCALE + BIAS;
}
"""


class TestCudaBackend(BackendConformance):
    backend_name = "cuda"
    vendor_modules = ("cuda.bindings", "cuda.bindings.driver", "cuda.bindings.nvrtc", "cuda.pathfinder")


class TestCudaCompute(ComputeDeviceConformance, ExecutionConformance):
    backend_name = "cuda"
    scale_offset_code = SCALE_OFFSET
    broken_code = BROKEN
    entry = "scale_offset"
    declares_element_types = False  # a CUDA module does not carry its pointer parameters' types
    typed_params_code = TYPED_PARAMS
    constants_code = CONSTANTS


@pytest.mark.backend("cuda")
def test_pipeline_loads_one_module_per_code_entry_and_interface():
    dev = require("cuda").open(0)
    try:
        p1 = dev.pipeline(SCALE_OFFSET, "scale_offset", buffers=2, params=3)
        p2 = dev.pipeline(SCALE_OFFSET.encode(), "scale_offset", buffers=2, params=3, workgroup_size=128)
        assert p1 is not p2 and p1.program is p2.program  # one NVRTC compile, one cuModuleLoadData
        assert p2.block == (128, 1, 1) and p1.block == (64, 1, 1)
        program = p1.program
        p1.close()
        p2.close()
        assert program.users == 0 and not program.module.closed  # cached for the next request
        p3 = dev.pipeline(SCALE_OFFSET, "scale_offset", buffers=2, params=3)
        assert p3.program is program
        x = dev.upload(np.arange(256, dtype=np.float32))
        y = dev.alloc(256, "float32")
        dev.dispatch(p3, [x, y], 4, (2.0, 1.0, 256)).wait()  # Python scalars: float32, float32, int32
        np.testing.assert_array_equal(dev.download(y), 2 * np.arange(256, dtype=np.float32) + 1)
    finally:
        dev.close()
    assert program.released and program.module.closed  # closing the handle unloads its modules


@pytest.mark.backend("cuda")
def test_a_given_param_count_still_reads_the_signature():
    """params=3 given (as the examples do) keeps params by name: the signature is read either way."""
    dev = require("cuda").open(0)
    try:
        p = dev.pipeline(SCALE_OFFSET, "scale_offset", buffers=2, params=3)
        assert p.interface.params is not None and p.interface.params.names == ("a", "b", "n")
        x = dev.upload(np.arange(256, dtype=np.float32))
        y = dev.alloc(256, "float32")
        dev.dispatch(p, [x, y], 4, {"a": 3.0, "b": -1.0, "n": 256}).wait()
        np.testing.assert_array_equal(dev.download(y), 3 * np.arange(256, dtype=np.float32) - 1)
        with pytest.raises(InvalidArgument, match="takes 5 parameters"):
            dev.pipeline(SCALE_OFFSET, "scale_offset", buffers=2, params=2)
    finally:
        dev.close()
