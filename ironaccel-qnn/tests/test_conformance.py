"""ironaccel-qnn against the shared Backend conformance kit."""

from ironaccel.testing.conformance import BackendConformance


class TestQnnBackend(BackendConformance):
    backend_name = "qnn"
    # A ctypes backend has no binding: what must stay unloaded is its own loading code.
    vendor_modules = ("ironaccel_qnn.interface", "ironaccel_qnn.backend")
