"""The core conformance suite, run against the opengl backend with the GLSL 430 scale_offset kernel."""

from pathlib import Path

from ironaccel.testing.conformance import BackendConformance, ComputeDeviceConformance

KERNELS = Path(__file__).with_name("kernels")


class TestOpenGLBackend(BackendConformance):
    backend_name = "opengl"
    vendor_modules = ("moderngl", "glcontext")


class TestOpenGLCompute(ComputeDeviceConformance):
    backend_name = "opengl"
    scale_offset_code = (KERNELS / "scale_offset.comp").read_text()
    broken_code = (KERNELS / "broken.comp").read_text()
    entry = "main"
