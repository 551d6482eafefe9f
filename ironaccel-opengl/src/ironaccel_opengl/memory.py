"""Shader storage buffers of an OpenGL device."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ironaccel.types import DType

if TYPE_CHECKING:
    from .device import OpenGLDevice


class OpenGLBuffer:
    """A GL buffer object used as a shader storage buffer: `size` elements of `dtype`."""

    __slots__ = ("dtype", "size", "nbytes", "handle", "_device", "__weakref__")

    def __init__(self, device: OpenGLDevice, handle: Any, dtype: DType, size: int):
        self._device = device
        self.handle: Any = handle  # the moderngl Buffer; None once closed
        self.dtype = dtype
        self.size = size
        self.nbytes = size * dtype.itemsize

    @property
    def device(self) -> OpenGLDevice:
        return self._device

    @property
    def closed(self) -> bool:
        """True once this buffer or its device is closed."""
        return self.handle is None or self._device.closed

    def close(self) -> None:
        """Delete the GL buffer; closing twice (or after the device closed) is a no-op."""
        handle, self.handle = self.handle, None
        if handle is not None:
            self._device._release_buffer(handle)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # at interpreter exit moderngl may already be gone
            pass

    def __repr__(self) -> str:
        state = "closed" if self.handle is None else f"{self.nbytes} bytes"
        return f"<OpenGLBuffer {self.dtype.value}[{self.size}] {state}>"
