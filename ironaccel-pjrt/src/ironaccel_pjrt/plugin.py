"""Entry point of ironaccel-pjrt: hands the registry a BackendSpec, nothing more."""

from ironaccel import BackendSpec, Vendor, hookimpl


@hookimpl
def ironaccel_backends() -> list[BackendSpec]:
    return [
        BackendSpec(
            name="pjrt",
            factory="ironaccel_pjrt.backend:Backend",
            summary="PJRT C API plugins (TPU, GPU, CPU) through ctypes",
            vendor=Vendor.GOOGLE,
            install="pip install ironaccel-pjrt",
        )
    ]
