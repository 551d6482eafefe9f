"""ironaccel-levelzero against the shared Backend conformance kit."""

from ironaccel.testing.conformance import BackendConformance


class TestLevelZeroBackend(BackendConformance):
    backend_name = "levelzero"
    # A ctypes backend has no binding: what must stay unloaded is its own loader module.
    vendor_modules = ("ironaccel_levelzero.loader", "ironaccel_levelzero.backend")
