"""Entry point of ironaccel-vulkan: hands the registry a BackendSpec, nothing more."""

from ironaccel import BackendSpec, DeviceKind, Vendor, hookimpl


@hookimpl
def ironaccel_backends() -> list[BackendSpec]:
    return [
        BackendSpec(
            name="vulkan",
            factory="ironaccel_vulkan.backend:Backend",
            summary="Vulkan compute on the vulkan package (pyvulkan): SPIR-V pipelines, storage buffers",
            vendor=Vendor.UNKNOWN,
            kinds=(DeviceKind.GPU, DeviceKind.CPU),
            install="pip install ironaccel-vulkan",
        )
    ]
