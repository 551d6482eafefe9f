"""The core conformance suite, run against the webgpu backend with the WGSL scale_offset kernel."""

from pathlib import Path

from ironaccel.testing.conformance import BackendConformance, ComputeDeviceConformance
from ironaccel.testing.execution import ExecutionConformance

KERNELS = Path(__file__).with_name("kernels")


class TestWebGPUBackend(BackendConformance):
    backend_name = "webgpu"
    vendor_modules = ("wgpu",)


class TestWebGPUCompute(ComputeDeviceConformance, ExecutionConformance):
    backend_name = "webgpu"
    scale_offset_code = (KERNELS / "scale_offset.wgsl").read_text()
    broken_code = (KERNELS / "broken.wgsl").read_text()
    typed_params_code = (KERNELS / "typed_params.wgsl").read_text()
    constants_code = (KERNELS / "constants.wgsl").read_text()
    entry = "main"
