"""The core conformance suites, adopted for CUDA.

Without a usable driver the device tests skip with the probe's reason (fail
under IRONACCEL_REQUIRE=cuda); the plugin-loading and probe tests run anywhere.
"""

from __future__ import annotations

from ironaccel.testing.conformance import BackendConformance, ComputeDeviceConformance

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


class TestCudaBackend(BackendConformance):
    backend_name = "cuda"
    vendor_modules = ("cuda.bindings", "cuda.bindings.driver", "cuda.bindings.nvrtc", "cuda.pathfinder")


class TestCudaCompute(ComputeDeviceConformance):
    backend_name = "cuda"
    scale_offset_code = SCALE_OFFSET
    broken_code = BROKEN
    entry = "scale_offset"
