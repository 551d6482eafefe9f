"""Entry point of ironaccel-webgpu: hands the registry a BackendSpec, nothing more (no wgpu import)."""

from ironaccel import BackendSpec, DeviceKind, Vendor, hookimpl


@hookimpl
def ironaccel_backends() -> list[BackendSpec]:
    return [
        BackendSpec(
            name="webgpu",
            factory="ironaccel_webgpu.backend:Backend",
            summary="WebGPU compute (WGSL) on wgpu-py: every adapter wgpu-native sees",
            vendor=Vendor.UNKNOWN,
            kinds=(DeviceKind.GPU, DeviceKind.CPU),
            install="pip install ironaccel-webgpu",
        )
    ]
