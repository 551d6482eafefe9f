"""Entry point of ironaccel-opengl: hands the registry a BackendSpec, nothing more (no moderngl import)."""

from ironaccel import BackendSpec, DeviceKind, Vendor, hookimpl


@hookimpl
def ironaccel_backends() -> list[BackendSpec]:
    return [
        BackendSpec(
            name="opengl",
            factory="ironaccel_opengl.backend:Backend",
            summary="OpenGL 4.3 compute shaders (GLSL 430) on moderngl with a headless EGL context",
            vendor=Vendor.UNKNOWN,
            kinds=(DeviceKind.GPU, DeviceKind.CPU),
            install="pip install ironaccel-opengl",
        )
    ]
