"""Entry point of ironaccel-metal: hands the registry a BackendSpec, nothing more."""

from ironaccel import BackendSpec, Vendor, hookimpl


@hookimpl
def ironaccel_backends() -> list[BackendSpec]:
    return [
        BackendSpec(
            name="metal",
            factory="ironaccel_metal.backend:Backend",
            summary="Apple Metal on pyobjc",
            vendor=Vendor.APPLE,
            install="pip install 'ironaccel-metal[metal]'",
        )
    ]
