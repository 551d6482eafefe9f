"""Entry point of ironaccel-levelzero: hands the registry a BackendSpec, nothing more."""

from ironaccel import BackendSpec, DeviceKind, Vendor, hookimpl


@hookimpl
def ironaccel_backends() -> list[BackendSpec]:
    return [
        BackendSpec(
            name="levelzero",
            factory="ironaccel_levelzero.backend:Backend",
            summary="Intel oneAPI Level Zero through ctypes",
            vendor=Vendor.INTEL,
            kinds=(DeviceKind.GPU, DeviceKind.NPU),
            install="pip install ironaccel-levelzero",
        )
    ]
