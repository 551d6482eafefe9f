"""Entry point of ironaccel-cuda: hands the registry a BackendSpec, nothing more."""

from ironaccel import BackendSpec, Vendor, hookimpl


@hookimpl
def ironaccel_backends() -> list[BackendSpec]:
    return [
        BackendSpec(
            name="cuda",
            factory="ironaccel_cuda.backend:Backend",
            summary="NVIDIA CUDA driver API on cuda-python",
            vendor=Vendor.NVIDIA,
            install="pip install ironaccel-cuda",
        )
    ]
