"""Entry point of ironaccel-rocm: hands the registry a BackendSpec, nothing more."""

from ironaccel import BackendSpec, DeviceKind, Vendor, hookimpl


@hookimpl
def ironaccel_backends() -> list[BackendSpec]:
    return [
        BackendSpec(
            name="rocm",
            factory="ironaccel_rocm.backend:Backend",
            summary="AMD ROCm/HIP on hip-python; hipRTC compiler through ctypes",
            vendor=Vendor.AMD,
            kinds=(DeviceKind.GPU,),
            install="pip install 'ironaccel-rocm[hip]'",
        )
    ]
