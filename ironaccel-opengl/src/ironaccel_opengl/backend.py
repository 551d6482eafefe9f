"""The opengl Backend: probe by importing moderngl and creating a headless EGL OpenGL 4.3 context."""

from __future__ import annotations

import threading
from typing import Any

from ironaccel.errors import InvalidArgument
from ironaccel.probing import distribution_version, import_binding, probe_guard
from ironaccel.types import DeviceDescriptor, ProbeResult

from .context import GLCalls, create_context, egl_library
from .describe import describe

BACKEND = "opengl"


class Backend:
    """OpenGL 4.3 compute through moderngl on a headless EGL context: one device, EGL's default
    (GLCONTEXT_DEVICE_INDEX picks another)."""

    name = BACKEND

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._moderngl: Any = None
        self._descriptor: DeviceDescriptor | None = None

    def _load(self) -> DeviceDescriptor:
        """Import moderngl, create a context once to read what the device is; NotAvailable says why not."""
        with self._lock:
            if self._descriptor is None:
                moderngl = import_binding(BACKEND, "moderngl", "moderngl", fix="pip install moderngl")
                ctx = create_context(moderngl)
                try:
                    self._descriptor = describe(ctx, GLCalls(ctx))
                finally:
                    ctx.release()
                self._moderngl = moderngl
            return self._descriptor

    def probe(self) -> ProbeResult:
        """Available with the renderer named, or unavailable saying why; never raises NotAvailable."""
        return probe_guard(self._probe)()

    def _probe(self) -> ProbeResult:
        descriptor = self._load()
        return ProbeResult(
            backend=BACKEND,
            available=True,
            reason=f"{descriptor.name}: {descriptor.extras['gl_version']} through EGL",
            driver_version=str(descriptor.extras["gl_version"]),
            binding_version=distribution_version("moderngl"),
            library_path=egl_library(),
            device_count=1,
            extras={"glcontext": distribution_version("glcontext")},
        )

    def refresh(self) -> None:
        """Forget what the probe read, so the next call creates a context again."""
        with self._lock:
            self._descriptor = None

    def devices(self) -> list[DeviceDescriptor]:
        return [self._load()]

    def open(self, ordinal: int = 0) -> Any:
        descriptor = self._load()
        if isinstance(ordinal, bool) or not isinstance(ordinal, int) or ordinal != 0:
            raise InvalidArgument(BACKEND, "open", detail=f"ordinal {ordinal!r} out of range 0..0")
        from .device import OpenGLDevice

        return OpenGLDevice(self._moderngl, descriptor)
