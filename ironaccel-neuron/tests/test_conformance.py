"""ironaccel-neuron against the shared Backend conformance kit."""

from ironaccel.testing.conformance import BackendConformance


class TestNeuronBackend(BackendConformance):
    backend_name = "neuron"
    # A ctypes backend has no binding: what must stay unloaded is its own libnrt module.
    vendor_modules = ("ironaccel_neuron.nrt", "ironaccel_neuron.backend")
