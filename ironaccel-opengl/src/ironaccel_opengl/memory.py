"""Shader storage buffers of an OpenGL device: a moderngl Buffer under the compute kit's handle."""

from __future__ import annotations

from ironaccel.compute import BufferHandle


class OpenGLBuffer(BufferHandle):
    """A GL buffer object used as a shader storage buffer: `size` elements of `dtype`."""

    __slots__ = ()
