"""Entry point of ironaccel-pjrt: hands the registry a BackendSpec, nothing more.

Importing this module loads no plugin: discovery, dlopen and client creation
all happen in `ironaccel_pjrt.backend`, when the pjrt backend is asked for.
"""

from ironaccel import BackendSpec, DeviceKind, Vendor, hookimpl


@hookimpl
def ironaccel_backends() -> list[BackendSpec]:
    return [
        BackendSpec(
            name="pjrt",
            factory="ironaccel_pjrt.backend:Backend",
            summary="PJRT C API plugins (TPU, GPU, CPU) through ctypes",
            vendor=Vendor.GOOGLE,
            kinds=(DeviceKind.TPU, DeviceKind.GPU, DeviceKind.CPU),
            install="pip install ironaccel-pjrt",
        )
    ]
