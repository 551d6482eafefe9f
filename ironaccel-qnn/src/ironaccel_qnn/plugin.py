"""Entry point of ironaccel-qnn: hands the registry a BackendSpec, nothing more."""

from ironaccel import BackendSpec, DeviceKind, Vendor, hookimpl


@hookimpl
def ironaccel_backends() -> list[BackendSpec]:
    return [
        BackendSpec(
            name="qnn",
            factory="ironaccel_qnn.backend:Backend",
            summary="Qualcomm AI Engine Direct (QNN) through ctypes",
            vendor=Vendor.QUALCOMM,
            kinds=(DeviceKind.NPU,),
            install="pip install ironaccel-qnn",
        )
    ]
