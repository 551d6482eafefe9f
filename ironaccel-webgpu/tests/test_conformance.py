"""The core conformance suite, run against the webgpu backend with the WGSL scale_offset kernel."""

from pathlib import Path

from ironaccel.testing.conformance import BackendConformance, ComputeDeviceConformance

KERNELS = Path(__file__).with_name("kernels")


class TestWebGPUBackend(BackendConformance):
    backend_name = "webgpu"
    vendor_modules = ("wgpu",)


class TestWebGPUCompute(ComputeDeviceConformance):
    backend_name = "webgpu"
    scale_offset_code = (KERNELS / "scale_offset.wgsl").read_text()
    broken_code = (KERNELS / "broken.wgsl").read_text()
    entry = "main"
