"""Entry point of ironaccel-webgpu: hands the registry a BackendSpec, nothing more."""

from ironaccel import BackendSpec, Vendor, hookimpl


@hookimpl
def ironaccel_backends() -> list[BackendSpec]:
    return [
        BackendSpec(
            name="webgpu",
            factory="ironaccel_webgpu.backend:Backend",
            summary="WebGPU compute on wgpu-py",
            vendor=Vendor.UNKNOWN,
            install="pip install ironaccel-webgpu",
        )
    ]
