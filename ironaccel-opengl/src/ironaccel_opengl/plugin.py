"""Entry point of ironaccel-opengl: hands the registry a BackendSpec, nothing more."""

from ironaccel import BackendSpec, Vendor, hookimpl


@hookimpl
def ironaccel_backends() -> list[BackendSpec]:
    return [
        BackendSpec(
            name="opengl",
            factory="ironaccel_opengl.backend:Backend",
            summary="OpenGL 4.3 compute on moderngl with headless EGL",
            vendor=Vendor.UNKNOWN,
            install="pip install ironaccel-opengl",
        )
    ]
