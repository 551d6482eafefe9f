"""Entry point of ironaccel-neuron: hands the registry a BackendSpec, nothing more."""

from ironaccel import BackendSpec, DeviceKind, Vendor, hookimpl


@hookimpl
def ironaccel_backends() -> list[BackendSpec]:
    return [
        BackendSpec(
            name="neuron",
            factory="ironaccel_neuron.backend:Backend",
            summary="AWS Neuron runtime (libnrt) through ctypes",
            vendor=Vendor.AWS,
            kinds=(DeviceKind.NPU,),
            install="pip install ironaccel-neuron",
        )
    ]
