"""The core conformance suites, run against the opengl backend with GLSL 430 kernels."""

from pathlib import Path

from ironaccel.testing.conformance import BackendConformance, ComputeDeviceConformance
from ironaccel.testing.execution import ExecutionConformance

KERNELS = Path(__file__).with_name("kernels")


class TestOpenGLBackend(BackendConformance):
    backend_name = "opengl"
    vendor_modules = ("moderngl", "glcontext")


class TestOpenGLCompute(ComputeDeviceConformance, ExecutionConformance):
    backend_name = "opengl"
    scale_offset_code = (KERNELS / "scale_offset.comp").read_text()
    broken_code = (KERNELS / "broken.comp").read_text()
    typed_params_code = (KERNELS / "typed_params.comp").read_text()
    constants_code = (KERNELS / "constants.comp").read_text()
    entry = "main"
