"""The opengl Backend: probe by importing moderngl and creating a headless EGL OpenGL 4.3 context."""

from __future__ import annotations

from typing import Any

from ironaccel.probing import (
    ProbedBackend,
    ProbeFacts,
    check_ordinal,
    distribution_version,
    import_binding,
    loaded_library,
)
from ironaccel.types import DeviceDescriptor

from .context import GLCalls, create_context, egl_library
from .describe import describe

BACKEND = "opengl"


class Backend(ProbedBackend[tuple[Any, DeviceDescriptor]]):
    """OpenGL 4.3 compute through moderngl on a headless EGL context: one device, EGL's default
    (GLCONTEXT_DEVICE_INDEX picks another)."""

    name = BACKEND

    def _probe(self, facts: ProbeFacts) -> tuple[Any, DeviceDescriptor]:
        """Import moderngl, create a context once to read what the device is; NotAvailable says why not."""
        moderngl = import_binding(BACKEND, "moderngl", "moderngl", fix="pip install moderngl")
        facts.record(binding_version=distribution_version("moderngl"))
        facts.extra(glcontext=distribution_version("glcontext"))
        ctx = create_context(moderngl)
        try:
            facts.record(library_path=loaded_library("libEGL.so") or egl_library())
            descriptor = describe(ctx, GLCalls(ctx))
        finally:
            ctx.release()
        gl_version = str(descriptor.extras["gl_version"])
        facts.record(driver_version=gl_version)
        facts.found(f"{descriptor.name}: {gl_version} through EGL", 1)
        return moderngl, descriptor

    def devices(self) -> list[DeviceDescriptor]:
        """The one device: the GL 4.3 context the headless EGL probe made."""
        return [self._state()[1]]

    def open(self, ordinal: int = 0) -> Any:
        """Open the GL device as a ComputeDevice (only ordinal 0 exists)."""
        moderngl, descriptor = self._state()
        check_ordinal(BACKEND, ordinal, 1)
        from .device import OpenGLDevice

        return OpenGLDevice(moderngl, descriptor)
