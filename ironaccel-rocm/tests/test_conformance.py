"""ironaccel-rocm against the shared Backend conformance kit."""

from ironaccel.testing.conformance import BackendConformance


class TestRocmBackend(BackendConformance):
    backend_name = "rocm"
    vendor_modules = ("hip", "rocm", "rocm.bindings", "rocm.bindings.hip")
