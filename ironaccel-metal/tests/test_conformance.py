"""ironaccel-metal against the shared Backend conformance kit."""

from ironaccel.testing.conformance import BackendConformance


class TestMetalBackend(BackendConformance):
    backend_name = "metal"
    vendor_modules = ("Metal", "objc", "Foundation")
