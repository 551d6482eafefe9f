"""The HIP ComputeDevice against the conformance kit (ComputeDeviceConformance + ExecutionConformance), on the fake.

The fake runs the kernels it knows by symbol name (scale_offset, saxpy) in the code object hipRTC produced.
"""

from __future__ import annotations

import numpy as np

from ironaccel.testing.conformance import ComputeDeviceConformance
from ironaccel.testing.execution import ExecutionConformance
from ironaccel_rocm.backend import Backend

SCALE_OFFSET = r"""
extern "C" __global__ void scale_offset(const float* x, float* y, float a, float b, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + b;
}
"""
BROKEN = 'extern "C" __global__ void scale_offset(const float* x, float* y, float a, float b, unsigned n) { y[0] = ; }'
TYPED_PARAMS = r"""
extern "C" __global__ void scale_offset(const float* x, float* y, float a, float2 pair, unsigned n, int k) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + pair.x - pair.y * (float)k;
}
"""
CONSTANTS = r"""
__constant__ float SCALE = 1.0f;
__constant__ int BIAS = 0;
extern "C" __global__ void scale_offset(const float* x, float* y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * SCALE + (float)BIAS;
}
"""
SAXPY = r"""
extern "C" __global__ void saxpy(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""


class TestHipCompute(ComputeDeviceConformance, ExecutionConformance):
    backend_name = "rocm"
    scale_offset_code = SCALE_OFFSET
    broken_code = BROKEN
    entry = "scale_offset"
    typed_params_code = TYPED_PARAMS
    constants_code = CONSTANTS

    def open_device(self):
        return Backend().compute(0)


def test_saxpy_gives_numpys_answer() -> None:
    """y = a * x + y through the ComputeDevice (hipRTC, module load, launch) against numpy."""
    n = 4096
    rng = np.random.default_rng(7)
    x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    with Backend().compute(0) as dev:
        dx, dy = dev.upload(x), dev.upload(y)
        pipe = dev.pipeline(SAXPY, "saxpy", buffers=2, params=2, workgroup_size=(256, 1, 1))
        assert pipe.interface.bindings[0].writable is False and pipe.interface.bindings[1].writable
        dev.dispatch(pipe, [dx, dy], (n + 255) // 256, (np.float32(2.5), np.int32(n))).wait()
        np.testing.assert_allclose(dev.download(dy), np.float32(2.5) * x + y, rtol=1e-6)
